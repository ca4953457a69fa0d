"""The console reporter's lines (firstlight.report.console): what a person reads at the verdict."""

from __future__ import annotations

import io

import pytest

from firstlight.assessment import Assessment, Event, Progress
from firstlight.report.console import ConsoleReporter
from firstlight.result import RunResult
from firstlight.timeline import Level
from firstlight.vocab import FAILED, READY

ANATOMY = {"total_s": 1.5, "reached": "warmup", "phases": [
    {"name": "weights_loading", "seconds": 0.7, "bound": "page_cache", "evidence": [{"value": "100% resident"}]},
    {"name": "warmup", "seconds": 0.8, "bound": "cpu", "evidence": [{"value": "0.97 cores"}]}]}


def _shown(result: RunResult) -> list[str]:
    out = io.StringIO()
    reporter = ConsoleReporter(out, live=False)
    reporter.verdict(result)
    return [line.strip() for line in out.getvalue().splitlines()]


def test_the_anatomy_block_says_anatomy_once_per_line_with_the_total_first():
    ready = RunResult(verdict=READY, phase="ready", started_at=0.0, ended_at=1.5, engine="sim",
                      url="http://127.0.0.1:1", ready_at=1.5, cold_start_s=1.5, anatomy=ANATOMY)
    lines = [x for x in _shown(ready) if x.startswith("anatomy")]
    assert lines[0] == "anatomy total: 1.5s", lines
    assert not any("anatomy anatomy" in x for x in lines)
    assert lines[1].split()[:3] == ["anatomy", "weights_loading", "0.7s"]


def test_a_failed_starts_anatomy_head_says_how_far_it_got():
    failed = RunResult(verdict=FAILED, phase="warmup", started_at=0.0, ended_at=1.5, engine="sim",
                       url="http://127.0.0.1:1", failure="crash", anatomy=ANATOMY)
    head = next(x for x in _shown(failed) if x.startswith("anatomy"))
    assert head == "anatomy (reached warmup; how far each phase got): 1.5s", head


def test_a_workers_ready_line_says_what_was_seen_of_it_port_or_head():
    """A worker generates nothing: its READY line names what firstlight saw, from its evidence (its port
    listening, or a headless node's connection to its head)."""
    seen = "pid 7 is connected to its head 10.0.0.1:29501 (seen in /proc, no connection made)"
    worker = RunResult(verdict=READY, phase="ready", started_at=0.0, ended_at=2.0, engine="vllm",
                       url="http://127.0.0.1:8000", ready_at=2.0,
                       evidence=({"signal": "probe:port", "value": f"worker ready: {seen}", "since": 2.0},))
    line = next(x for x in _shown(worker) if "serving after" in x)
    assert line.endswith(f"a worker (it generates nothing itself): {seen}"), line
    bare = RunResult(verdict=READY, phase="ready", started_at=0.0, ended_at=2.0, engine="llamarpc",
                     url="http://127.0.0.1:50052", ready_at=2.0)
    assert next(x for x in _shown(bare) if "serving after" in x).endswith("itself): its port listens")


@pytest.mark.parametrize(("line", "shown"), [(412, "[oom] line 412: CUDA out of memory"),
                                             (None, "[oom] CUDA out of memory")])
def test_a_failure_line_names_its_line_only_when_it_has_a_number(line: int | None, shown: str):
    out = io.StringIO()
    reporter = ConsoleReporter(out, live=False)
    reporter.started({"started_at": 0.0, "pid": 7, "launched": True, "engine": "vllm", "url": "http://127.0.0.1:1"})
    reporter.event(Event(1.0, "failure_line", "CUDA out of memory", {"category": "oom", "line": line}),
                   Assessment("starting", "weights_loading", Level.PROCESS, 1.0, [], Progress()))
    text = out.getvalue().splitlines()[-1]
    assert text.endswith(shown) and "None" not in text, text
