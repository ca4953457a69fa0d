"""A run reads its server's command once (settings.read_server builds the run's Plan; the profile, the URL, the
role, the preflight, the weights, the node rank and the history's deployment key read that plan): counted on a
live ``up`` of the simulator (the CLI's and the API's), a ``watch --pid`` and a sidecar's start, in this process,
by wrapping the one parse function every reading goes through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import firstlight
from firstlight.cli.app import cli
from firstlight.engines import command as reader
from firstlight.engines.command import split_words
from firstlight.sim.fixtures import free_port
from tests.support import sidecar as sidecar_start
from tests.support.common import sim_cmd, started_sim

WATCH = ["--poll-min", "0.05", "--sample-interval", "0.2", "--plain"]
UP = [*WATCH, "--quiet-server"]


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, ...]]]:
    """Every command parsed, as words (the preflight's stale-server check reads other processes' too)."""
    seen: list[tuple[str, ...]] = []
    real = reader.parse_command

    def counting(argv, profiles, **kw):  # type: ignore[no-untyped-def]
        seen.append(tuple(split_words(argv)))
        return real(argv, profiles, **kw)

    monkeypatch.setattr(reader, "parse_command", counting)
    yield seen


def _sim(port: int, weights: Path) -> list[str]:
    return sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "1")


def test_a_live_up_parses_its_command_once(parses: list[tuple[str, ...]], weights: Path, tmp_path: Path):
    cmd = _sim(free_port(), weights)  # names no engine: the engine is learnt from its log, the key reads it so
    r = CliRunner().invoke(cli, ["up", "--stop-when-ready", "--history", str(tmp_path / "h.db"), *UP, "--", *cmd])
    assert r.exit_code == 0, r.output[-2000:]
    assert parses.count(tuple(cmd)) == 1, parses


def test_an_up_of_the_api_parses_its_command_once(parses: list[tuple[str, ...]], weights: Path, tmp_path: Path):
    cmd = _sim(free_port(), weights)
    with firstlight.up(cmd, timeout=120, history=tmp_path / "h.db") as server:
        assert server.result.verdict == firstlight.READY
    assert parses.count(tuple(cmd)) == 1, parses


def test_a_watch_parses_the_watched_command_once(parses: list[tuple[str, ...]], weights: Path, tmp_path: Path,
                                                 reap: list[int]):
    port = free_port()
    sim = started_sim(_sim(port, weights), reap)
    r = CliRunner().invoke(cli, ["watch", f"http://127.0.0.1:{port}", "--pid", str(sim.pid), "--history",
                                 str(tmp_path / "h.db"), *WATCH])
    assert r.exit_code == 0, r.output[-2000:]
    assert len(parses) == 1 and parses[0][1:] == tuple(_sim(port, weights)[1:]), parses  # its cmdline, read once


def test_a_sidecar_parses_each_start_s_command_once(parses: list[tuple[str, ...]], weights: Path, tmp_path: Path,
                                                    reap: list[int], monkeypatch: pytest.MonkeyPatch):
    port, rport = free_port(), free_port()
    sim = started_sim(_sim(port, weights), reap)
    with sidecar_start.one_start(monkeypatch, rport):
        r = CliRunner().invoke(cli, ["watch", f"http://127.0.0.1:{port}", "--pid", str(sim.pid), "--serve-readiness",
                                     f"127.0.0.1:{rport}", "--history", str(tmp_path / "h.db"), *WATCH])
    assert "ready" in r.output.lower(), r.output[-2000:]
    assert len(parses) == 1 and parses[0][1:] == tuple(_sim(port, weights)[1:]), parses
