"""The systemctl interface: ``systemctl show`` outputs of units in each state a watch meets (fixtures written
from systemd 252's documented format: tests/fixtures/systemctl/README.md), the verbs and their timeouts.

The process-starting tests of this subject; the others: ``tests/unit/units/test_systemctl.py``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from firstlight.units.systemctl import (
    SYSTEMCTL_ENV,
    Systemctl,
    SystemctlError,
)
from tests.support.common import FIXTURES as _FIXTURES

FIXTURES = _FIXTURES / "systemctl"


@pytest.fixture
def fake_systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A systemctl double: logs its arguments, prints a fixture for show, sleeps when told to."""
    log = tmp_path / "calls.log"
    script = tmp_path / "systemctl"
    script.write_text(f"""#!{sys.executable}
import sys, time, os
open({str(log)!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_SLEEP"):
    time.sleep(float(os.environ["FAKE_SLEEP"]))
if "show" in sys.argv:
    sys.stdout.write(open({str(FIXTURES / "llama-failed.txt")!r}).read())
""")
    script.chmod(0o755)
    monkeypatch.setenv(SYSTEMCTL_ENV, str(script))
    return log


def test_verbs_do_not_block_on_the_start_job(fake_systemctl: Path):
    ctl = Systemctl()
    before = ctl.restart_or_start("llama.service")  # failed: start, not restart
    assert before.active_state == "failed"
    ctl.restart("llama.service")
    assert ctl.stop("llama.service", timeout=5).active_state == "failed"
    calls = fake_systemctl.read_text().splitlines()
    assert calls[0].startswith("show -p Id,LoadState,ActiveState") and calls[0].endswith(" -- llama.service")
    assert calls[1:3] == ["--no-block start -- llama.service", "--no-block restart -- llama.service"]
    assert calls[3] == "--no-block stop -- llama.service"


def test_a_systemctl_that_hangs_times_out(fake_systemctl: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_SLEEP", "30")
    with pytest.raises(SystemctlError, match="did not answer within 1s"):  # not the double's 30 s
        Systemctl(timeout=1.0).show("llama.service")


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="no systemctl binary")
def test_real_systemctl_without_systemd_is_one_clear_line(monkeypatch: pytest.MonkeyPatch):
    """On these machines systemd is not PID 1: the real systemctl refuses, and we say so in one line."""
    if Path("/run/systemd/system").is_dir():
        pytest.skip("systemd runs here: scripts/check_systemd_unit.sh is the check for this machine")
    monkeypatch.delenv(SYSTEMCTL_ENV, raising=False)
    with pytest.raises(SystemctlError) as e:
        Systemctl().show("nosuch.service")
    assert "\n" not in str(e.value) and "systemd" in str(e.value)
