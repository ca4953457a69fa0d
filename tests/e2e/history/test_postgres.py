"""The history in a real PostgreSQL server (started by the test on loopback, tests/support/postgres.py): two nodes
share it and see each other's starts, a database that is stopped, frozen or refuses the login never holds a start
longer than its bound and loses no run (the spool sends it once), and the password never shows."""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstlight.history import DeploymentKey, History, HistoryError, Unreachable
from firstlight.history.pg import BOUND_S, START_BOUND_S, Budget
from tests.support.postgres import PASSWORD, Postgres, postgres_server

KEY = DeploymentKey.create("vllm", "meta-llama/Llama-3.1-8B", ["vllm", "serve", "meta-llama/Llama-3.1-8B"], 1)
MARGIN_S = 10.0  # a busy 2-core machine: the bound plus this, never a tight timing


def ready(cold_start_s: float) -> dict:
    return {"verdict": "ready", "started_at": 1000.0, "ready_at": 1000.0 + cold_start_s}


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    with postgres_server() as server:
        yield server


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """This test's own node: its name and its state directory (where the spool lives)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("FIRSTLIGHT_NODE", "node-a")
    yield


def _clear(pg: Postgres) -> None:
    with History(pg.url) as h:
        h.con.execute("TRUNCATE runs CASCADE")


def test_two_nodes_share_one_history_and_a_new_node_gets_its_eta_from_the_fleet(pg: Postgres, node: None,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    _clear(pg)
    with History(pg.url) as a:
        for s in (40.0, 42.0, 44.0):
            a.record_run("up", ready(s), KEY)
    monkeypatch.setenv("FIRSTLIGHT_NODE", "node-b")
    with History(pg.url) as b:
        eta = b.expected_start(KEY)
        assert eta is not None and eta.seconds == 42.0
        assert b.baseline(KEY, "cold_start_s") == 42.0
        b.record_run("up", ready(50.0), KEY)
        assert [r.node for r in b.runs(KEY)] == ["node-b", "node-a", "node-a", "node-a"]


def _write(url: str, n: int, state: str) -> None:
    import os

    os.environ["XDG_STATE_HOME"] = state
    with History(url) as h:
        for i in range(n):
            h.record_run("up", ready(30.0 + i), KEY)


def test_many_writers_at_once_lose_no_run(pg: Postgres, node: None, tmp_path: Path):
    _clear(pg)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write, args=(pg.url, 20, str(tmp_path / f"s{w}"))) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with History(pg.url) as h:
        assert len(h.runs(KEY, limit=1000)) == 80
        assert all(len(r.metrics) >= 1 for r in h.runs(KEY, limit=1000))


def test_a_stopped_database_spools_the_run_and_the_next_start_sends_it_once(pg: Postgres, node: None):
    _clear(pg)
    with History(pg.url) as h:
        h.record_run("up", ready(40.0), KEY)
        pg.stop()
        try:
            with pytest.raises(Unreachable) as caught:
                h.record_run("up", ready(41.0), KEY)
            assert "kept in" in str(caught.value) and PASSWORD not in str(caught.value)
            spooled = list(h.spool.folder.glob("*.json")) if h.spool else []
            assert len(spooled) == 1
            with History(pg.url) as down:  # a start while it is down: goes on, its record spooled too
                assert down.unreached is not None and PASSWORD not in down.unreached
                with pytest.raises(Unreachable):
                    down.record_run("up", ready(42.0), KEY)
        finally:
            pg.start()
    folder = spooled[0].parent
    copy = folder / "copy.json"  # a file that outlived its send: sent again, stored once
    copy.write_text(spooled[0].read_text())
    with History(pg.url) as back:
        back.send_spooled()
        assert list(folder.glob("*.json")) == []
        runs = back.runs(KEY)
        assert sorted(r.metrics["cold_start_s"] for r in runs) == [40.0, 41.0, 42.0]


def test_a_frozen_database_holds_a_start_no_longer_than_the_bound(pg: Postgres, node: None):
    _clear(pg)
    pg.freeze()
    try:
        t0 = time.monotonic()
        with History(pg.url) as h:
            assert h.unreached is not None and "not reached" in h.unreached
            with pytest.raises(Unreachable):
                h.runs(KEY)
            with pytest.raises(Unreachable):
                h.record_run("up", ready(40.0), KEY)
        assert time.monotonic() - t0 < BOUND_S + MARGIN_S
    finally:
        pg.thaw()
    with History(pg.url) as back:
        back.send_spooled()
        assert [r.metrics["cold_start_s"] for r in back.runs(KEY)] == [40.0]


def test_a_wrong_password_is_one_line_and_never_shown(pg: Postgres, node: None, capsys: pytest.CaptureFixture[str]):
    wrong = "Wr0ng-Pass-xyz"
    with History(pg.url_with(wrong)) as h:
        assert h.unreached is not None
        assert "\n" not in h.unreached and wrong not in h.unreached and "password authentication failed" in \
            h.unreached
        assert wrong not in str(h.path)
        with pytest.raises(Unreachable) as caught:
            h.record_run("up", ready(40.0), KEY)
        assert wrong not in str(caught.value)
    out = capsys.readouterr()
    assert wrong not in out.out + out.err


def test_a_newer_schema_is_not_written_and_the_run_waits(pg: Postgres, node: None):
    _clear(pg)
    with History(pg.url) as h:
        h.con.execute("UPDATE firstlight_schema SET version = 99")
    try:
        with History(pg.url) as newer:
            assert newer.unreached is not None and "newer firstlight (schema 99)" in newer.unreached
            with pytest.raises(Unreachable):
                newer.record_run("up", ready(40.0), KEY)
    finally:
        import psycopg

        with psycopg.connect(pg.url, connect_timeout=5, autocommit=True) as fix:
            fix.execute("UPDATE firstlight_schema SET version = 3")
    with History(pg.url) as back:
        back.send_spooled()
        assert [r.metrics["cold_start_s"] for r in back.runs(KEY)] == [40.0]


def _whole(h: History, run_id: int) -> tuple:
    """A stored run as every reader sees it: its row, its metrics, its timeline and its serving changes."""
    run = h.get(run_id)
    assert run is not None
    return (run.kind, run.ok, run.summary, run.metrics, run.node, h.timeline(run_id), h.serving_changes(run_id))


def test_a_spooled_run_once_sent_arrives_whole_and_never_twice(pg: Postgres, node: None):
    _clear(pg)
    direct_uid, spooled_uid = "d" * 32, "5" * 32
    with History(pg.url) as h:
        direct = h.record_run("up", ready(40.0), KEY, uid=direct_uid)
        h.record_serving(direct, 1.0, "serving", "generation ok")
        h.record_serving(direct, 2.0, "degraded", "slow answers")
        h.store_timeline(direct, b"\x1f\x8b timeline")
        pg.stop()
        try:
            with pytest.raises(Unreachable):
                h.record_run("up", ready(40.0), KEY, uid=spooled_uid)
            with pytest.raises(Unreachable):  # recorded again after a failure: kept once, under its id
                h.record_run("up", ready(40.0), KEY, uid=spooled_uid)
            h.record_serving(spooled_uid, 1.0, "serving", "generation ok")
            h.record_serving(spooled_uid, 2.0, "degraded", "slow answers")
            h.store_timeline(spooled_uid, b"\x1f\x8b timeline")
            assert h.spool is not None
            files = list(h.spool.folder.glob("*.json"))
            assert [f.name for f in files] == [f"{spooled_uid}.json"]
        finally:
            pg.start()
    (files[0].parent / "copy.json").write_text(files[0].read_text())  # a file that outlived its send
    with History(pg.url) as back:
        back.send_spooled()
        assert back.send_spooled() == 0 and not list(files[0].parent.glob("*.json"))
        sent = back.run_id(spooled_uid)
        assert sent is not None and sent != direct
        assert _whole(back, sent) == _whole(back, direct)
        assert len(back.runs(KEY)) == 2
        assert back.con.execute("SELECT count(*) FROM serving").fetchone()[0] == 4
        assert back.con.execute("SELECT count(*) FROM timelines").fetchone()[0] == 2


def test_what_a_run_adds_after_its_spooled_record_was_sent_goes_to_its_row(pg: Postgres, node: None):
    """Another start of the node sent the spool before this run's timeline was ready: the timeline finds the row."""
    _clear(pg)
    uid = "a" * 32
    with History(pg.url) as h:
        pg.stop()
        try:
            with pytest.raises(Unreachable):
                h.record_run("up", ready(40.0), KEY, uid=uid)
        finally:
            pg.start()
    with History(pg.url) as other:
        other.send_spooled()
        assert other.spool is not None and not list(other.spool.folder.glob("*.json"))
    with History(pg.url) as later:
        later.record_serving(uid, 1.0, "serving", "generation ok")
        later.store_timeline(uid, b"timeline")
        run_id = later.run_id(uid)
        assert run_id is not None
        assert later.timeline(run_id) == b"timeline"
        assert later.serving_changes(run_id) == [(1.0, "serving", "generation ok")]
        assert len(later.runs(KEY)) == 1


def test_a_listing_of_a_database_without_runs_creates_nothing_and_writes_nothing(pg: Postgres, node: None):
    import psycopg

    with psycopg.connect(pg.url, connect_timeout=5, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS listing_only")
        admin.execute("CREATE DATABASE listing_only")
    url = pg.url.replace("/postgres", "/listing_only")
    with History(url, readonly=True) as h:
        assert h.unreached is None and h.runs() == [] and h.expected_start(KEY) is None
        with pytest.raises(HistoryError, match="read-only transaction"):
            h.con.execute("CREATE TABLE x (y INTEGER)")
    with psycopg.connect(url, connect_timeout=5) as con:
        assert con.execute("SELECT to_regclass('firstlight_schema')").fetchone() == (None,)


SLOW_S = 1.0  # each statement of a slow database: well within its 2 s deadline


def test_a_slow_database_delays_a_start_no_more_than_the_start_bound_and_the_run_waits(pg: Postgres, node: None):
    """Every call answers, slowly, within its own deadline: the start's calls together stop at START_BOUND_S, and
    its run is spooled (sent whole later)."""
    _clear(pg)
    with History(pg.url) as h:
        for s in (40.0, 41.0, 42.0, 43.0, 44.0):
            h.record_run("up", ready(s), KEY)
    with pg.slow(SLOW_S) as url:
        t0 = time.monotonic()
        with History(url, budget=Budget()) as h:
            assert h.unreached is None  # its first calls answer
            for _ in range(3):  # what a start reads before its watch, and again after it (more, unbounded)
                with contextlib.suppress(Unreachable):
                    h.expected_start(KEY)
                    h.start_anatomies(KEY)
                    h.known_answer(KEY, "request")
                    h.check_regression(KEY, cold_start_s=40.0)
                    h.baseline(KEY, "cold_start_s")
                    h.runs(KEY)
            with pytest.raises(Unreachable) as caught:
                h.record_run("up", ready(45.0), KEY)
            took = time.monotonic() - t0
        assert took < START_BOUND_S + MARGIN_S, took
        assert f"bound of {START_BOUND_S:g} s" in str(caught.value) and "kept in" in str(caught.value)
        assert PASSWORD not in str(caught.value)
    with History(url) as back:
        back.send_spooled()
        assert sorted(r.metrics["cold_start_s"] for r in back.runs(KEY)) == [40.0, 41.0, 42.0, 43.0, 44.0, 45.0]


def test_a_run_lost_at_its_write_is_spooled_once_and_its_summary_names_it(pg: Postgres, node: None,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """The comparison read the database, then the write did not go through: the run is recorded again after the
    failure, and kept once, under the id the summary carries."""
    from firstlight.result import RunResult
    from firstlight.runner.after_ready import compare_with_history

    _clear(pg)
    result = RunResult("ready", "ready", 1000.0, 1040.0, "vllm", "http://127.0.0.1:1", ready_at=1040.0,
                       cold_start_s=40.0)
    with History(pg.url) as h:
        def lost(record: dict) -> int:
            raise Unreachable("history not reached: connection lost")
        monkeypatch.setattr(h, "_insert", lost)
        out = compare_with_history(h, KEY, "up", result, 0.2)
        assert h.spool is not None
        files = list(h.spool.folder.glob("*.json"))
    assert out.history_run is None and [f.stem for f in files] == [out.history_uid]
    assert any("kept in" in n for n in out.notes), out.notes
