"""The one start-after-start loop: the order of its steps, what each Step does, and the stop signals it takes
between sessions (and gives back)."""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from firstlight.assessment import Assessment, Event, Progress
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.runner.outcome import Outcome
from firstlight.runner.restarts import Loop, Step, report_attempt
from firstlight.timeline import Level


def outcome(verdict: str) -> Outcome:
    return Outcome(RunResult(verdict=verdict, phase="ready", started_at=1.0, ended_at=2.0, engine="vllm",
                             url="http://127.0.0.1:1"), 0)


class Scripted:
    """Starts 1, 2, 3, ... whose verdicts and steps are given in turn; every call is logged."""

    def __init__(self, verdicts: list[str], steps: list[Step], starts: int = 99) -> None:
        self.verdicts, self.steps, self.left = list(verdicts), list(steps), starts
        self.stop = threading.Event()
        self.calls: list[tuple[str, int | None]] = []
        self.on_next: object = None

    def next_start(self, previous: int | None) -> int | None:
        self.calls.append(("next", previous))
        if callable(self.on_next):
            self.on_next()
        if self.left == 0:
            return None
        self.left -= 1
        return (previous or 0) + 1

    def watch(self, start: int) -> Outcome:
        self.calls.append(("watch", start))
        return outcome(self.verdicts.pop(0))

    def after(self, start: int, out: Outcome) -> tuple[Step, Outcome]:
        self.calls.append(("after", start))
        return self.steps.pop(0), out


def test_next_watches_the_start_after_and_end_returns_the_last_outcome() -> None:
    s = Scripted(["failed", "ready"], [Step.NEXT, Step.END])
    loop = Loop(s)
    last = loop.run()
    assert last is not None and last.verdict == "ready" and loop.count == 2 and loop.signal is None
    assert s.calls == [("next", None), ("watch", 1), ("after", 1), ("next", 1), ("watch", 2), ("after", 2)]


def test_again_watches_the_same_start_without_asking_for_the_next() -> None:
    s = Scripted(["timeout", "ready"], [Step.AGAIN, Step.END])
    loop = Loop(s)
    assert loop.run() is not None and loop.count == 2
    assert s.calls == [("next", None), ("watch", 1), ("after", 1), ("watch", 1), ("after", 1)]


def test_no_start_coming_ends_the_loop_with_the_last_outcome_or_none() -> None:
    s = Scripted(["failed"], [Step.NEXT], starts=1)
    last = Loop(s).run()
    assert last is not None and last.verdict == "failed" and s.calls[-1] == ("next", 1)
    assert Loop(Scripted([], [], starts=0)).run() is None


def test_a_starts_own_interrupted_verdict_ends_the_loop_before_after() -> None:
    s = Scripted(["interrupted"], [Step.NEXT])
    last = Loop(s).run()
    assert last is not None and last.verdict == "interrupted" and s.calls == [("next", None), ("watch", 1)]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT])
def test_a_stop_signal_between_starts_sets_stop_names_itself_and_the_handlers_are_given_back(
        stop: signal.Signals) -> None:
    before = signal.getsignal(stop)
    s = Scripted(["failed", "ready"], [Step.NEXT, Step.NEXT])
    loop = Loop(s)

    def signal_at_the_second_wait() -> None:
        if ("next", 1) in s.calls:
            os.kill(os.getpid(), stop)  # delivered to the main thread before kill() returns

    s.on_next = signal_at_the_second_wait
    last = loop.run()
    assert loop.signal == stop.name and s.stop.is_set()
    assert last is not None and last.verdict == "ready" and loop.count == 2  # the start found is still watched
    assert ("next", 2) not in s.calls  # and the loop ends before waiting for another
    assert signal.getsignal(stop) == before


@dataclass
class Tried:
    number: int = 2
    verdict: str = "failed"
    phase: str = "weights_loading"
    failure: str | None = "oom"
    hint: str | None = "lower --gpu-memory-utilization"
    evidence: list[dict[str, Any]] = field(default_factory=lambda: [{"signal": "log", "value": "CUDA out of memory"}])
    ended_at: float | None = 42.0


class Told(QuietReporter):
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.messages: list[str] = []
        self.assessments: list[Assessment] = []

    def event(self, ev: Event, a: Assessment) -> None:
        self.events.append(ev)
        self.assessments.append(a)

    def message(self, text: str) -> None:
        self.messages.append(text)


ASSESSED = Assessment("failed", "weights_loading", Level.PROCESS, 10.0, [], Progress())


def test_an_attempt_is_reported_with_its_verdict_evidence_and_what_the_watch_waits_for() -> None:
    told = Told()
    report_attempt(told, ASSESSED, Tried(), "inv-2", {"invocation": "inv-2"}, "systemd's next attempt", 3, 99.0)
    [ev] = told.events
    assert (ev.t, ev.type) == (42.0, "attempt") and not told.messages and told.assessments == [ASSESSED]
    assert ev.message == ("attempt 2 (inv-2) failed in phase weights_loading [oom]: CUDA out of memory; "
                          "watching systemd's next attempt (3 of at most 3)")
    assert ev.data == {"attempt": 2, "invocation": "inv-2", "verdict": "failed", "failure": "oom",
                       "hint": "lower --gpu-memory-utilization",
                       "evidence": [{"signal": "log", "value": "CUDA out of memory"}]}
    assert list(ev.data)[:2] == ["attempt", "invocation"]


def test_an_attempt_without_evidence_failure_end_or_assessment_is_a_plain_message_at_now() -> None:
    told = Told()
    bare = Tried(number=1, verdict="hung", failure=None, evidence=[], ended_at=None)
    report_attempt(told, ASSESSED, bare, "started T1", {"started_at": "T1"}, "the next start", 2, 99.0)
    assert told.events[0].t == 99.0
    assert told.events[0].message == "attempt 1 (started T1) hung in phase weights_loading; watching the next start " \
                                     "(2 of at most 2)"
    report_attempt(told, None, bare, "started T1", {"started_at": "T1"}, "the next start", 2, 99.0)
    assert told.messages == [told.events[0].message] and len(told.events) == 1
