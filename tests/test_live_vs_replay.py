"""Every labelled startup log, through the live path AND through replay, with the same verdict.

Live: a real process (the simulator with ``--replay-log``) prints the log as the engine printed it, opening
its port and serving where the log says the engine did, and exits (a failed start) or stays silent (a stuck
one) as the labelled process did; ``firstlight up`` watches it. Replay: ``replay_log`` on the same file. Both
must give the labelled outcome, phase and failure, and agree with each other: the line interpretation is one
(``firstlight.interpret``), whichever path reads the line.

Outcome words: replay says ready / failed / incomplete; live says ready / failed, and for an incomplete log
(the process stays, silent) hung.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pytest

from firstlight.logreplay import replay_log
from firstlight.sim.server import free_port
from tests.conftest import SHARED, require, run_firstlight, sim_cmd

FIXTURES = Path(__file__).parent / "fixtures" / "engines"
SHARED_LOGS = SHARED / "logs"
LIVE_OUTCOME = {"ready": "ready", "failed": "failed", "incomplete": "hung"}


@dataclass(frozen=True)
class Labelled:
    path: Path
    engine: str
    outcome: str
    phase: tuple[str, ...]
    failure: tuple[str, ...]


def _index(folder: Path) -> list[Labelled]:
    index = folder / "INDEX.tsv"
    if not index.is_file():
        return []
    with index.open(newline="", encoding="utf-8") as fh:
        return [Labelled(folder / r["file"], r["engine"], r["outcome"], tuple(r["phase"].split("|")),
                         tuple(r["failure"].split("|"))) for r in csv.DictReader(fh, delimiter="\t")]


LOGS = _index(FIXTURES) + _index(SHARED_LOGS)


def test_the_shared_logs_are_here() -> None:
    require((SHARED_LOGS / "INDEX.tsv").is_file(), f"the real startup logs at {SHARED_LOGS}")
    assert len(_index(SHARED_LOGS)) >= 30


def _live(log: Labelled) -> dict[str, object]:
    end = {"failed": "exit", "incomplete": "hang", "ready": "auto"}[log.outcome]
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--no-history", "--quiet-server", "--engine", log.engine,
                       "--url", f"http://127.0.0.1:{port}",
                       "--poll-min", "0.05", "--sample-interval", "0.2", "--stall-timeout", "3", "--timeout", "90",
                       "--", *sim_cmd("normal", port, "--replay-log", str(log.path), "--engine", log.engine,
                                      "--max-gap", "0.02", "--end", end))
    return r.summary


@pytest.mark.parametrize("log", LOGS, ids=[f"{lg.path.parent.name}/{lg.path.name}" for lg in LOGS])
def test_live_and_replay_agree_with_the_label(log: Labelled) -> None:
    rep = replay_log(log.path)
    live = _live(log)
    replayed = (rep.outcome, rep.phase, rep.failure)
    seen = (live["verdict"], live["phase"], live["failure"] or "none")
    assert rep.outcome == log.outcome and rep.phase in log.phase and rep.failure in log.failure, (
        f"replay {replayed} vs label {log}")
    assert live["verdict"] == LIVE_OUTCOME[log.outcome], f"live {seen}; evidence {live['evidence']}"
    assert live["phase"] == rep.phase, f"live {seen} vs replay {replayed}; phases {live['phases']}"
    assert (live["failure"] or "none") == rep.failure, f"live {seen} vs replay {replayed}; {live['evidence']}"
