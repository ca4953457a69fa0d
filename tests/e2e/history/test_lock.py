"""A history held in EXCLUSIVE locking mode by another process never holds up the server (issue 32): the launch
waited out the 30 s busy timeout, and the cold start then read 30 s. A real SQLite lock held by another
connection for the whole run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from firstlight.history.store import History
from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd


def test_an_exclusively_locked_history_is_a_warning_and_the_start_is_not_delayed(tmp_path: Path, weights: Path):
    path = tmp_path / "h.sqlite3"
    with History(path):
        pass
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE IF NOT EXISTS held (x)")
    holder.execute("COMMIT")  # the lock stays: EXCLUSIVE mode keeps it until this connection closes
    try:
        port = free_port()
        r = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(path), "--poll-min", "0.05", "--",
                           *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0.5"),
                           timeout=180)
    finally:
        holder.close()
    assert r.rc == 0, r.stderr[-3000:]
    assert r.summary["verdict"] == "ready"
    assert r.summary["cold_start_s"] < 15, r.summary["cold_start_s"]  # a 0.5 s load; the lock's wait was 30 s
    said = [e["message"] for e in r.events if e["event"] == "message"] + r.summary["notes"]
    assert any("history" in m and "locked" in m for m in said), said
