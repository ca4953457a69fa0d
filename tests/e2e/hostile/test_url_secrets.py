"""URL secrets are masked the same way by every command (issue 20): ``probe --json`` and ``bench --json`` printed
``http://admin:pass@...`` and ``?api_key=`` unmasked. A real server process; the URL carries a password and
secret query values; no output of any command holds them.

The process-starting tests of this subject; the others: ``tests/unit/redact/test_redact.py``.
"""

from __future__ import annotations

import subprocess

import pytest

from firstlight.redact import MASK
from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd, wait_for

SECRETS = ("Pa55-admin-word", "ak-0123456789", "tk-9876543210")


@pytest.fixture(scope="module")
def server() -> object:
    port = free_port()
    p = subprocess.Popen(sim_cmd("normal", port, "--load-seconds", "0"), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    import httpx

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, 60, "the simulator to be healthy")
        yield port
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("args", [
    ["probe", "--json", "--level", "health", "--timeout", "10"],
    ["probe", "--json", "--timeout", "10"],
    ["bench", "--json", "--requests", "2", "--output-len", "4", "--no-history"],
    ["watch", "--json", "--timeout", "20", "--poll-min", "0.05"],
])
def test_no_command_prints_a_url_secret(server: int, args: list[str]):
    url = f"http://admin:{SECRETS[0]}@127.0.0.1:{server}/?api_key={SECRETS[1]}&token={SECRETS[2]}"
    r = run_firstlight(*args[:1], url, *args[1:], timeout=120)
    out = r.stdout + r.stderr
    assert not [s for s in SECRETS if s in out], out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert f"admin:{MASK}@127.0.0.1" in out, out[-3000:]  # the URL is shown, masked the same way
