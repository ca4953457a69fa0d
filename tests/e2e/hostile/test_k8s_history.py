"""``history --k8s-probe`` is sized only from starts whose process start is known (issue 20): a ``watch`` that
attached to a server already serving saw no cold start, and its "0 s" made ``failureThreshold: 1``. A real
server process, real watches, a real history database."""

from __future__ import annotations

import math
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from firstlight.history.policy import MAX_METRIC
from firstlight.history.store import History
from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd, wait_for
from tests.support.hostile_history import _two_runs


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


@pytest.mark.parametrize("damaged", [0.0, -5.0, 1e400, "9" * 300, "²", MAX_METRIC * 10])
def test_a_damaged_start_row_sizes_no_probe(tmp_path: Path, damaged: object):
    """A row whose cold start is 0, negative, infinite, 300 digits or not a number is no start: the probe is
    sized from the others (one good start of 11 s: 16.5 s, 17 probes of 1 s), never failureThreshold 1 or exit 70."""
    history = tmp_path / "history.sqlite3"
    _two_runs(history)
    con = sqlite3.connect(history)
    stored = damaged if not isinstance(damaged, float) or math.isfinite(damaged) else str(damaged)
    con.execute("UPDATE metrics SET value = ? WHERE run_id = (SELECT MIN(id) FROM runs)", (stored,))
    con.commit()
    con.close()
    with History(history) as h:
        deployment = h.runs()[0].deployment
    k = run_firstlight("history", "--history", str(history), "--k8s-probe", deployment[:12])
    assert k.rc == 0, (k.stdout, k.stderr)
    assert "1 good cold starts" in k.stdout and "failureThreshold: 17 " in k.stdout, k.stdout
