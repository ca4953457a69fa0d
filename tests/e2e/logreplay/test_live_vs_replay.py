"""Every labelled startup log, through the live path AND through replay, field by field.

Live: a real process (the simulator with ``--replay-log``) prints the log as the engine printed it, opening
its port and serving where the log says the engine did, and exits (a failed start) or stays silent (a stuck
one) as the labelled process did; ``firstlight up`` watches it, told nothing of the engine (it learns it from
the lines, as from a command it does not know). Replay: ``replay_log`` on the same file, engine not given.
Both must give the labelled outcome, phase and failure, and agree with each other on the engine, the phases
the log's lines began (name and line), the verdict, the failure and the hint: one driver
(``firstlight.drive``) feeds the judge on both paths.

Outcome words: replay says ready / failed / incomplete; live says ready / failed, and for an incomplete log
(the process stays, silent) hung.

The process-starting tests of this subject; the others: ``tests/unit/logreplay/test_logreplay.py``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from firstlight.logreplay import Replayer, ReplayReport, replay_log
from firstlight.logtext import read_line_events
from firstlight.sim.fixtures import free_port
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import SHARED, run_firstlight, sim_cmd
from tests.support.live_vs_replay import Labelled, _index

FIXTURES = _FIXTURES / "engines"


SHARED_LOGS = SHARED / "logs"


LIVE_OUTCOME = {"ready": "ready", "failed": "failed", "incomplete": "hung"}


# the corpus logs whose rules the latest round added (docs/engines.md, the corpus): through the live path too; and
# an OOM whose phase the loader's lines after it tell (a specific cause waits for them, live as in replay)
CORPUS_ROUND = ("g-llamacpp-rocm-apertus-70b-compute-buffer-oom.log",
                "h-sglang-rocm-dsr1-aiter-graph-capture-segfault.log",
                "h-generic-mistralrs-gguf-config-null-usize.log",
                "h-lmdeploy-gradio-turbomind-tp4-peer-access-ready.log",
                "h-vllm-torchserve-llama31-8b-tp2-gpu-blocks.log",
                "h-vllm-llmd-openshift-triton-cache-permission.log",
                "e-tgi-a40-docker-timestamps-args-block.log")  # named by its words
LOGS = (_index(FIXTURES) + _index(SHARED_LOGS)
        + [lg for lg in _index(_FIXTURES / "corpus") if lg.path.name in CORPUS_ROUND])


def _live(log: Labelled) -> dict[str, Any]:
    end = {"failed": "exit", "incomplete": "hang", "ready": "auto"}[log.outcome]
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--no-history", "--quiet-server",
                       "--url", f"http://127.0.0.1:{port}",
                       "--poll-min", "0.05", "--sample-interval", "0.2", "--stall-timeout", "3", "--timeout", "90",
                       "--", *sim_cmd("normal", port, "--replay-log", str(log.path), "--engine", log.engine,
                                      "--max-gap", "0.02", "--end", end))
    return r.summary


def _engine_known_before_the_verdict(path: Path) -> bool:
    """Live stops reading at the verdict: an engine the lines tell only after it stays unknown there."""
    r = Replayer()
    for text, final in read_line_events(path, 1 << 20):
        r.feed(text, final)
        if not r.driver.detecting:
            return True
        if r.judge.settled:
            return False
    return False


def _log_phases(phases: list[dict[str, Any]]) -> list[str]:
    """The phases the log's lines began, in order (live, a probe may begin one first: the port opened, the
    generation). Names only: live numbers each output stream's lines apart, and the simulator prints its own
    access lines among the log's."""
    return [p["name"] for p in phases if p.get("line") is not None and p["name"] != "ready"]


def _compare(log: Labelled, rep: ReplayReport, live: dict[str, Any]) -> None:
    replayed = (rep.engine, rep.outcome, rep.phase, rep.failure)
    seen = (live["engine"], live["verdict"], live["phase"], live["failure"] or "none")
    assert rep.outcome == log.outcome and rep.phase in log.phase and rep.failure in log.failure, (
        f"replay {replayed} vs label {log}")
    assert live["verdict"] == LIVE_OUTCOME[log.outcome], f"live {seen}; evidence {live['evidence']}"
    if _engine_known_before_the_verdict(log.path):
        assert live["engine"] == rep.engine == log.engine, f"live {seen} vs replay {replayed}"
    assert live["phase"] == rep.phase, f"live {seen} vs replay {replayed}; phases {live['phases']}"
    assert (live["failure"] or "none") == rep.failure, f"live {seen} vs replay {replayed}; {live['evidence']}"
    assert live["hint"] == rep.hint, f"live {seen} vs replay {replayed}"
    # A probe that moved the phase first (the port, /health, the generation answered before the reader reached
    # the lines: a fast start) ends what the lines can still begin; else every phase is the same.
    live_phases, replayed_phases = _log_phases(live["phases"]), _log_phases(rep.phases)
    if any(p["source"] == "probe" for p in live["phases"]):
        replayed_phases = replayed_phases[:len(live_phases)]
    assert live_phases == replayed_phases, f"live {live['phases']} vs replay {rep.phases}"


@pytest.mark.parametrize("log", LOGS, ids=[f"{lg.path.parent.name}/{lg.path.name}" for lg in LOGS])
def test_live_and_replay_agree_with_the_label(log: Labelled) -> None:
    _compare(log, replay_log(log.path), _live(log))


def test_the_latest_rounds_corpus_logs_are_all_here() -> None:
    assert sorted(lg.path.name for lg in LOGS if lg.path.parent.name == "corpus") == sorted(CORPUS_ROUND)


def test_a_six_line_oom_is_judged_with_the_engine_its_lines_tell() -> None:
    """The engine is known only from the lines, and the OOM comes before the detector is sure: both paths read
    the first lines again with llama.cpp's markers (weights_loading), none stays at process_start."""
    log = next(lg for lg in LOGS if lg.path.name == "llamacpp-oom-6-lines.log")
    rep, live = replay_log(log.path), _live(log)
    _compare(log, rep, live)
    assert (live["engine"], live["phase"], live["failure"]) == ("llamacpp", "weights_loading", "oom")


def _pip_preamble(n: int) -> list[str]:
    """What ``pip install`` prints before the server starts (a container entry point that installs first)."""
    out = []
    for i in range(n // 3):
        out += [f"Collecting package-{i}==1.{i % 10}.0",
                f"  Downloading package_{i}-1.{i % 10}.0-py3-none-any.whl (1{i % 90} kB)",
                f"Requirement already satisfied: dep-{i} in /usr/local/lib/python3.10/site-packages (from package-{i})"]
    return out


@pytest.mark.parametrize("name", ["sglang-llama31-8b-cudagraph-2024.log", "sglang-nccl-unhandled-system-error.log"])
def test_a_long_pip_preamble_leaves_the_engine_known(tmp_path: Path, name: str) -> None:
    """3,000 lines of pip output before a real SGLang start: detection reads past them, live as in replay (the
    failed one never opens its port, so live the engine is known from its lines only)."""
    real = next(lg for lg in LOGS if lg.path.name == name)
    path = tmp_path / name
    path.write_text("\n".join(_pip_preamble(3000)) + "\n" + real.path.read_text(encoding="utf-8"), encoding="utf-8")
    log = dataclasses.replace(real, path=path)
    rep, live = replay_log(path), _live(log)
    _compare(log, rep, live)
    assert rep.engine == live["engine"] == "sglang"
