"""Runs drawn from the history: ``up --report/--trace`` write both whatever the verdict and keep the timeline
with the run; ``report --last``/``--run`` draw it again; databases from before timelines were kept still work.

The process-starting tests of this subject; the others: ``tests/unit/report/test_history.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from firstlight.history import DeploymentKey, History
from firstlight.history.db import SCHEMA_VERSION
from firstlight.report.record import pack_timeline
from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd
from tests.support.report import ready_timeline


def test_up_writes_report_and_trace_on_failure_and_report_last_draws_it_again(tmp_path: Path, weights: Path):
    db = tmp_path / "h.sqlite3"
    html, trace = tmp_path / "live.html", tmp_path / "live.json"
    r = run_firstlight("up", "--json", "--quiet-server", "--plain", "--history", str(db), "--report", str(html),
                       "--trace", str(trace), "--engine", "sglang", "--poll-min", "0.05", "--sample-interval", "0.2",
                       "--", *sim_cmd("crash_oom", free_port()), "--model-path", str(weights), "--load-seconds", "1")
    assert r.rc == 1 and r.summary["failure"] == "oom"
    assert html.exists() and trace.exists() and 'data-verdict="failed"' in html.read_text()
    again = tmp_path / "again.html"
    d = run_firstlight("report", "--last", "--history", str(db), "-o", str(again))
    assert d.rc == 0, d.stderr
    page = again.read_text()
    assert 'data-verdict="failed"' in page and 'data-failure="oom"' in page
    assert page.count('class="phase-bar"') == len(r.summary["phases"])


def test_report_run_from_history_and_a_database_without_timelines(tmp_path: Path):
    db = tmp_path / "h.sqlite3"
    obs = ready_timeline()
    summary = {"verdict": "ready", "phase": "ready", "started_at": obs[0].t, "ready_at": obs[-1].t,
               "phases": [{"name": "process_start", "start": obs[0].t, "end": obs[-1].t}], "engine": "sglang"}
    with History(db) as h:
        key = DeploymentKey.create("sglang", "m", ["srv"])
        old = h.record_run("up", summary, key)
        assert h.timeline(old) is None  # no timelines table yet: an older database reads as "none kept"
        new = h.record_run("up", summary, key)
        h.store_timeline(new, pack_timeline(obs))
    with sqlite3.connect(db) as con:  # timelines did not change the schema's version (the key's migration did)
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    out = tmp_path / "r.html"
    r = run_firstlight("report", "--run", str(new), "--history", str(db), "-o", str(out))
    assert r.rc == 0, r.stderr
    assert 'data-verdict="ready"' in out.read_text() and f"run {old}" in out.read_text()  # the baseline
    r = run_firstlight("report", "--run", str(old), "--history", str(db), "-o", str(out))
    assert r.rc == 1 and "no stored timeline" in r.stderr
    r = run_firstlight("report", "--run", "999", "--history", str(db), "-o", str(out))
    assert r.rc == 64 and "no run 999" in r.stderr
