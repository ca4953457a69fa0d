"""A fleet's history through `firstlight up`: separate nodes (each its own FIRSTLIGHT_NODE and local dirs) start the
simulated server against one real PostgreSQL (started by the test on loopback): a second node's first start gets
its ETA from the first node's starts, `firstlight history` lists the fleet with its nodes, a database stopped
during a start leaves the run in the node's spool until the next start sends it once, a frozen database holds a
start no longer than the documented bound, and a wrong password is one line that never shows it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firstlight.history.pg import BOUND_S, START_BOUND_S
from firstlight.sim.fixtures import free_port
from tests.support.common import Run, run_firstlight, sim_cmd
from tests.support.postgres import PASSWORD, Postgres, postgres_server

MARGIN_S = 20.0  # a busy 2-core machine: the bound plus this, never a tight timing


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    with postgres_server() as server:
        yield server


def _env(tmp: Path, node: str) -> dict[str, str]:
    home = tmp / node
    return {"FIRSTLIGHT_NODE": node, "XDG_STATE_HOME": str(home / "state"), "XDG_DATA_HOME": str(home / "data"),
            "FIRSTLIGHT_HISTORY": ""}


def _up(url: str, tmp: Path, node: str) -> tuple[Run, dict[str, Any]]:
    r = run_firstlight("up", "--json", "--stop-when-ready", "--history", url, "--margin", "10", "--",
                       *sim_cmd("normal", free_port(), "--dialect", "vllm"),
                       timeout=180, env=_env(tmp, node))
    assert r.rc == 0, r.stderr[-3000:]
    assert PASSWORD not in r.stdout + r.stderr
    summary: dict[str, Any] = r.summary
    assert summary["verdict"] == "ready", summary
    return r, summary


def _spooled(tmp: Path, node: str) -> list[Path]:
    return sorted((tmp / node / "state").rglob("spool/*/*.json"))


def test_a_second_node_gets_its_first_eta_from_the_fleet_and_the_listing_names_the_nodes(pg: Postgres,
                                                                                        tmp_path: Path):
    url = pg.url.replace("/postgres", "/postgres?application_name=fleet1")
    for _ in range(2):
        _up(url, tmp_path, "node-a")
    _, first = _up(url, tmp_path, "node-b")  # node-b has never started it: its history is the fleet's
    assert first["eta"] is not None and first["eta"]["seconds"] > 0, first.get("eta")
    listing = run_firstlight("history", "--history", url, "--limit", "10", env=_env(tmp_path, "node-b"))
    assert listing.rc == 0, listing.stderr
    assert "node-a" in listing.stdout and "node-b" in listing.stdout
    assert PASSWORD not in listing.stdout + listing.stderr


def test_a_database_down_during_a_start_keeps_the_run_and_the_next_start_sends_it_once(pg: Postgres,
                                                                                      tmp_path: Path):
    pg.stop()
    try:
        r, s = _up(pg.url, tmp_path, "node-c")
        notes = [n for n in s.get("notes", []) if n.startswith("history:")]
        assert notes and "not reached" in notes[0] and "\n" not in notes[0], s.get("notes")
        assert "Traceback" not in r.stderr
        assert len(_spooled(tmp_path, "node-c")) == 1
        assert "timeline" in json.loads(_spooled(tmp_path, "node-c")[0].read_text())
        assert s["history_run"] is None and s["history_uid"] == _spooled(tmp_path, "node-c")[0].stem
    finally:
        pg.start()
    _up(pg.url, tmp_path, "node-c")
    assert _spooled(tmp_path, "node-c") == []
    import psycopg

    with psycopg.connect(pg.url, connect_timeout=5) as con:
        n = con.execute("SELECT count(*), count(DISTINCT uid) FROM runs WHERE node = 'node-c'").fetchone()
        # the spooled run arrived whole: its metrics and its timeline, as the run written directly
        parts = con.execute("SELECT r.id, (SELECT string_agg(name, ',' ORDER BY name) FROM metrics m WHERE "
                            "m.run_id = r.id), (SELECT count(*) FROM timelines t WHERE t.run_id = r.id) FROM runs r "
                            "WHERE node = 'node-c' ORDER BY r.id").fetchall()
    assert n == (2, 2)
    assert [p[1:] for p in parts] == [(parts[1][1], 1)] * 2 and parts[1][1], parts


def test_a_frozen_database_delays_a_start_no_more_than_the_bound(pg: Postgres, tmp_path: Path):
    t0 = time.monotonic()
    _up(pg.url, tmp_path, "node-d")
    normal = time.monotonic() - t0
    pg.freeze()
    try:
        t0 = time.monotonic()
        _, s = _up(pg.url, tmp_path, "node-d")
        frozen = time.monotonic() - t0
    finally:
        pg.thaw()
    assert any("not reached" in n for n in s.get("notes", [])), s.get("notes")
    assert frozen < normal + BOUND_S + MARGIN_S, (frozen, normal)
    assert len(_spooled(tmp_path, "node-d")) == 1


def test_a_slow_database_delays_a_start_no_more_than_the_start_bound(pg: Postgres, tmp_path: Path):
    """Each statement answers within its deadline, a second late: all the start's calls together stop at the
    start's bound, and the run waits in the spool."""
    for _ in range(2):
        _up(pg.url, tmp_path, "node-s")  # starts of this deployment to read: the comparison has work to do
    t0 = time.monotonic()
    _up(pg.url, tmp_path, "node-s")
    normal = time.monotonic() - t0
    with pg.slow(1.0) as url:
        t0 = time.monotonic()
        _, s = _up(url, tmp_path, "node-s")
        slow = time.monotonic() - t0
    notes = [n for n in s.get("notes", []) if n.startswith("history:")]
    assert notes and f"took its bound of {START_BOUND_S:g} s" in notes[0], s.get("notes")
    assert slow < normal + START_BOUND_S + MARGIN_S, (slow, normal)
    assert len(_spooled(tmp_path, "node-s")) == 1


def test_a_wrong_password_is_one_line_and_never_shown(pg: Postgres, tmp_path: Path):
    wrong = "Wr0ng-Fleet-pw"
    r, s = _up(pg.url_with(wrong), tmp_path, "node-e")
    assert wrong not in r.stdout + r.stderr
    notes = [n for n in s.get("notes", []) if n.startswith("history:")]
    assert notes and "password authentication failed" in notes[0] and "\n" not in notes[0]
    listing = run_firstlight("history", "--history", pg.url_with(wrong), env=_env(tmp_path, "node-e"))
    assert listing.rc == 1 and wrong not in listing.stdout + listing.stderr
    assert len(listing.stderr.strip().splitlines()) == 1 and "Traceback" not in listing.stderr


def test_a_listing_or_a_report_never_sends_the_spool_only_a_start_does(pg: Postgres, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    from firstlight.history import DeploymentKey, History, Unreachable

    env = _env(tmp_path, "node-f")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    key = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m"], 1)
    with History(pg.url_with("Wr0ng-pw")) as h, pytest.raises(Unreachable):  # the same database's spool
        h.record_run("up", {"verdict": "ready", "started_at": 0.0, "ready_at": 30.0}, key)
    assert len(_spooled(tmp_path, "node-f")) == 1
    import psycopg

    def stored() -> int:
        with psycopg.connect(pg.url, connect_timeout=5) as con:
            row = con.execute("SELECT count(*) FROM runs WHERE node = 'node-f'").fetchone()
        return int(row[0]) if row else -1

    for args, rc in ((["--limit", "5"], 0), (["--json"], 0), (["--deployment", key.hash[:10]], 0),
                     (["--compare", "999998", "999999"], 64), (["--k8s-probe", key.hash[:10]], 64)):  # 64: no such run
        r = run_firstlight("history", "--history", pg.url, *args, env=env)
        assert r.rc == rc and "Traceback" not in r.stderr, (args, r.stderr)
    r = run_firstlight("report", "--history", pg.url, "--run", "999999", "-o", str(tmp_path / "r.html"), env=env)
    assert r.rc == 64 and "no run 999999" in r.stderr, r.stderr
    assert len(_spooled(tmp_path, "node-f")) == 1 and stored() == 0  # read, never sent
    _up(pg.url, tmp_path, "node-f")
    assert _spooled(tmp_path, "node-f") == [] and stored() == 2
