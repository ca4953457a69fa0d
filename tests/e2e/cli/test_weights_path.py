"""The weights' path reaches every output redacted and on one line (issue 32): a secret in the model directory's
name (a token the environment holds) is masked on the console, in ``--json``, the ``--record`` file and the
history, and a newline in it cannot start a line of its own. The real CLI, the simulated server, real files."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

from firstlight.history import History
from firstlight.sim.fixtures import free_port, make_weights
from tests.support.common import run_firstlight, sim_cmd

TOKEN = "hf_q8VtZr3LmW0pXc7NbK2sYd5GfJ9hTa4Ue"


def test_a_secret_and_a_newline_in_the_weights_path_reach_no_output(tmp_path: Path):
    weights = tmp_path / f"models-{TOKEN}\nforged: READY"
    make_weights(weights, 16 << 20, shards=2)
    record, history = tmp_path / "run.jsonl", tmp_path / "h.sqlite3"
    r = run_firstlight("up", "--json", "--stop-when-ready", "--record", str(record), "--history", str(history),
                       "--poll-min", "0.05", "--sample-interval", "0.2", "--quiet-server", "--",
                       *sim_cmd("normal", free_port(), "--model-path", str(weights)),
                       env={"FIRSTLIGHT_SIM_LOAD_SECONDS": "1", "HF_TOKEN": TOKEN})
    assert r.rc == 0, r.stderr[-3000:]
    notes = [line for line in r.stderr.splitlines() if "weights: " in line and " files at " in line]
    assert notes, r.stderr[-3000:]  # the note is there, masked
    # the server's own lines are not echoed: every line left is firstlight's, and none starts with the path's tail
    assert not any(line.startswith("forged") for line in r.stderr.splitlines()), r.stderr
    with History(history) as h:
        run = h.runs(limit=1)[0]
        timeline = gzip.decompress(h.timeline(run.id) or b"").decode()
    with sqlite3.connect(history) as con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = "\n".join(str(row) for table in tables for row in con.execute(f"SELECT * FROM {table}"))
    for name, text in (("stderr", r.stderr), ("stdout", r.stdout), ("record", record.read_text()),
                       ("history", rows), ("history timeline", timeline)):
        assert TOKEN not in text, f"{name} holds the token"
    assert "***" in record.read_text() and "***" in timeline  # masked, not dropped
