"""The shared database's bounds as the docs state them, and the spool's rules (a run written whole, read back,
a damaged file set aside); the server itself is in tests/e2e/history/test_postgres.py."""

from __future__ import annotations

import json
from pathlib import Path

from firstlight.history import pg
from firstlight.history.spool import MAX_SPOOLED, Spool
from tests.support.docs import PAGES

DOC = PAGES["docs/history.md"]


def test_the_docs_state_the_bounds_the_code_keeps():
    assert pg.CONNECT_TIMEOUT_S == 3 and "connection has 3 s" in DOC
    assert pg.QUERY_TIMEOUT_S == 2.0 and "every statement 2 s" in DOC
    assert pg.SLACK_S == 0.5 and "stops waiting 0.5 s after each" in DOC
    assert pg.BOUND_S == 6.0 and "waits **6 s at most**" in DOC
    assert pg.START_BOUND_S == 10.0 and "take **10 s at most in all**" in DOC
    assert f"its bound of {pg.START_BOUND_S:g} s in all" in DOC


def test_a_start_budget_is_spent_by_its_calls_and_cuts_the_last_short():
    b = pg.Budget(10.0)
    b.spend(4.0)
    b.spend(-1.0)  # a clock that went back spends nothing
    assert b.left() == 6.0
    b.spend(7.0)
    assert b.left() == 0.0


def test_the_schema_has_the_columns_of_a_fleet_run():
    runs = pg.MIGRATIONS[pg.SCHEMA_VERSION][0]
    assert "node TEXT" in runs and "uid TEXT UNIQUE" in runs


def test_a_spooled_run_is_one_whole_file_named_by_its_id_and_read_back(tmp_path: Path):
    warned: list[str] = []
    s = Spool(tmp_path / "spool", warned.append)
    path = s.keep({"uid": "abc", "kind": "up"})
    assert path.name == "abc.json" and (path.stat().st_mode & 0o777) == 0o600
    assert [r for _, r in s.waiting()] == [{"uid": "abc", "kind": "up"}]
    assert [p.name for p in (tmp_path / "spool").iterdir()] == ["abc.json"]  # no temporary file left
    s.sent(path)
    assert s.waiting() == [] and warned == []


def test_a_damaged_spool_file_is_set_aside_and_the_others_still_go(tmp_path: Path):
    warned: list[str] = []
    s = Spool(tmp_path, warned.append)
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "nouid.json").write_text(json.dumps({"kind": "up"}))
    s.keep({"uid": "good"})
    assert [r["uid"] for _, r in s.waiting()] == ["good"]
    assert (tmp_path / "bad.json.bad").exists() and (tmp_path / "nouid.json.bad").exists() and len(warned) == 2


def test_the_spool_keeps_at_most_its_cap(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("firstlight.history.spool.MAX_SPOOLED", 3)
    warned: list[str] = []
    s = Spool(tmp_path, warned.append)
    for i in range(5):
        s.keep({"uid": f"r{i}"})
    assert len(s.waiting()) == 3 and len(warned) == 2
    assert MAX_SPOOLED == 10_000
