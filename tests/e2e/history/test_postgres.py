"""The history in a real PostgreSQL server (started by the test on loopback, tests/support/postgres.py): two nodes
share it and see each other's starts, a database that is stopped, frozen or refuses the login never holds a start
longer than its bound and loses no run (the spool sends it once), and the password never shows."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstlight.history import DeploymentKey, History, Unreachable
from firstlight.history.pg import BOUND_S
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
        assert [r.metrics["cold_start_s"] for r in back.runs(KEY)] == [40.0]
