"""The run history: concurrent writers, a writer killed mid-run, a corrupt file, baselines and regressions.

The process-starting tests of this subject; the others: ``tests/e2e/history/test_store.py``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from firstlight.history import DeploymentKey, History
from tests.support.common import wait_for

KEY = DeploymentKey.create("vllm", "meta-llama/Llama-3.1-8B", ["vllm", "serve", "meta-llama/Llama-3.1-8B"], 1)


def test_a_writer_killed_mid_run_leaves_a_readable_database(tmp_path: Path):
    path = tmp_path / "h.sqlite3"
    code = textwrap.dedent(f"""
        from firstlight.history import DeploymentKey, History
        key = DeploymentKey("vllm", "m")
        with History({str(path)!r}) as h:
            i = 0
            while True:
                h.record_run("bench", {{"i": i, "pad": "x" * 4000}}, key, bench={{"completed": 1,
                             "output_throughput": float(i)}})
                i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
    try:
        def written() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"writer exited with {proc.returncode}")
            try:
                with sqlite3.connect(path, timeout=5) as con:
                    return con.execute("SELECT count(*) FROM runs").fetchone()[0] >= 30
            except sqlite3.Error:
                return False
        wait_for(written, 60, "the writer to commit 30 runs")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    warnings: list[str] = []
    with History(path, warn=warnings.append) as h:
        runs = h.runs(limit=100_000)
        assert len(runs) >= 30 and not warnings
        assert sorted(r.summary["i"] for r in runs) == list(range(len(runs)))  # no gap, no torn record
        assert all(r.metrics["output_throughput"] == r.summary["i"] for r in runs)
        h.record_run("bench", {"after": True}, KEY)  # and it is writable again
        assert h._con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
