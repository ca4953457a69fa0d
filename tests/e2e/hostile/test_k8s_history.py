"""``history --k8s-probe`` is sized only from starts whose process start is known (issue 20): a ``watch`` that
attached to a server already serving saw no cold start, and its "0 s" made ``failureThreshold: 1``. A real
server process, real watches, a real history database."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd, wait_for


def test_watches_of_a_server_already_up_do_not_size_a_probe(tmp_path: Path):
    port = free_port()
    history = tmp_path / "history.sqlite3"
    server = subprocess.Popen(sim_cmd("normal", port, "--load-seconds", "0"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        def up() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 60, "the simulator to serve")
        for _ in range(3):  # no --pid: the watch cannot know when the server started
            r = run_firstlight("watch", f"http://127.0.0.1:{port}", "--json", "--timeout", "30", "--history",
                               str(history), "--poll-min", "0.05")
            assert r.rc == 0 and r.summary["verdict"] == "ready" and r.summary["cold_start_s"] is None, r.stderr
    finally:
        server.kill()
        server.wait()
    deployment = r.summary["baseline"]["deployment"]
    k = run_firstlight("history", "--history", str(history), "--k8s-probe", deployment)
    assert k.rc == 1 and "no good cold start" in k.stderr, (k.stdout, k.stderr)
    assert "failureThreshold: 1\n" not in k.stdout
