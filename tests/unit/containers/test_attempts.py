"""A container's attempts (firstlight.containers.attempts) on a runtime whose answers the test scripts: which start
is the next one, when the watch goes on after a verdict and when it ends, and what the summary keeps. The real
podman's restarts: tests/e2e/containers/test_containers.py."""

from __future__ import annotations

import json
import os
import signal
import threading
from typing import Any

import pytest

from firstlight.assessment import Assessment, Event, Progress
from firstlight.containers.attempts import ContainerAttempts
from firstlight.containers.runtime import Container, ContainerGone
from firstlight.containers.watch import Tracker
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.runner.outcome import Outcome
from firstlight.runner.restarts import Step
from firstlight.settings import NUMBERS
from firstlight.timeline import Level


def state(started: str, status: str = "running", code: int | None = None, policy: str = "on-failure",
          retries: int = 0, count: int = 0, pid: int = 4242) -> Container:
    running = status == "running"
    s: dict[str, Any] = {"Status": status, "Running": running, "Pid": pid if running else 0, "StartedAt": started}
    if code is not None:
        s["ExitCode"] = code
    return Container.from_inspect({"Id": "c0ffee" * 8, "Name": "/llm", "State": s, "RestartCount": count,
                                   "HostConfig": {"RestartPolicy": {"Name": policy, "MaximumRetryCount": retries}}})


class Runtime:
    """Answers ``inspect`` from a script: each answer once, the last one for ever (None: no such container)."""

    name = "podman"

    def __init__(self, *answers: Container | None) -> None:
        self.answers = list(answers)
        self.asked = 0

    def inspect(self, ref: str) -> Container:
        self.asked += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if answer is None:
            raise ContainerGone(f"no such container {ref}")
        return answer


class Seen(QuietReporter):
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.verdicts: list[RunResult] = []
        self.summaries: list[RunResult] = []
        self.messages: list[str] = []

    def event(self, ev: Event, a: Assessment) -> None:
        self.events.append(ev)

    def verdict(self, result: RunResult) -> None:
        self.verdicts.append(result)

    def summary(self, result: RunResult) -> None:
        self.summaries.append(result)

    def message(self, text: str) -> None:
        self.messages.append(text)


class Judged:
    """A session stand-in: its verdict, told to the reporter it was given as a real session's would be."""

    def __init__(self, verdict: str, reporter: Any, started: str) -> None:
        self.verdict, self.reporter, self.started = verdict, reporter, started
        self.assessed_at: list[float] = []

    def run(self) -> Outcome:
        self.reporter.message(f"judging the start of {self.started}")  # passed on: only verdicts are held
        r = RunResult(verdict=self.verdict, phase="weights_loading", started_at=10.0, ended_at=20.0, engine="vllm",
                      url="http://127.0.0.1:1", failure="oom" if self.verdict == "failed" else None,
                      evidence=({"signal": "log", "value": f"CUDA out of memory in the start of {self.started}",
                                 "since": 19.0},))
        self.reporter.verdict(r)
        self.reporter.summary(r)
        return Outcome(r, r.exit_code())

    def assess(self, now: float) -> Assessment:
        self.assessed_at.append(now)
        return Assessment(self.verdict, "weights_loading", Level.PROCESS, 10.0, [], Progress())


sessions: list[tuple[Judged, str | None]] = []  # each session made, and the start the tracker watched then


def attempts(runtime: Runtime, first: Container, verdicts: list[str], seen: Seen, **kw: Any) -> ContainerAttempts:
    # a clock that never moves: the runtime is asked only by a fresh inspect, never by the once-a-second cache
    tracker = Tracker(runtime, ref=first.id, clock=lambda: 0.0)  # type: ignore[arg-type]
    tracker.last = first
    left = list(verdicts)

    def session(c: Container, reporter: Any) -> Any:
        judged = Judged(left.pop(0), reporter, c.started_at or "?")
        sessions.append((judged, tracker.watching))
        return judged

    kw.setdefault("restart_wait", 5.0)
    return ContainerAttempts(tracker, first, session, seen, clock=lambda: 100.0, **kw)


def test_each_start_of_the_restart_policy_is_an_attempt_and_the_last_verdict_is_the_watchs():
    first, second = state("T1", retries=1), state("T2", retries=1, count=1)  # --restart on-failure:1
    runtime = Runtime(state("T1", "stopped", 3, retries=1), second, state("T2", "exited", 3, retries=1, count=1))
    seen = Seen()
    out = attempts(runtime, first, ["failed", "failed"], seen, max_attempts=3).run()
    assert out.verdict == "failed" and out.exit_code == 1
    assert len(seen.verdicts) == len(seen.summaries) == 1  # each attempt's own verdict is held back
    [event] = seen.events
    assert event.type == "attempt" and event.data["attempt"] == 1 and event.data["started_at"] == "T1"
    assert "CUDA out of memory in the start of T1" in json.dumps(event.data["evidence"])
    assert "watching the container's next start (2 of at most 3)" in event.message
    c = out.result.container
    assert c is not None and seen.summaries[0].container == c
    assert (c["name"], c["id"], c["runtime"], c["restart_policy"], c["attempt"], c["max_attempts"]) == (
        "llm", "c0ffee" * 2, "podman", "on-failure", 2, 3)
    assert [(a["number"], a["started_at"], a["restart_count"]) for a in c["attempts"]] == [(1, "T1", 0),
                                                                                         (2, "T2", 1)]
    assert "start of T2" in json.dumps(out.result.evidence)


@pytest.mark.parametrize("verdict", ["ready", "regression", "timeout", "interrupted"])
def test_a_verdict_that_is_not_failed_or_hung_ends_the_watch_at_once(verdict: str):
    runtime = Runtime(state("T2"))  # a restart would be there: it is not waited for
    seen = Seen()
    out = attempts(runtime, state("T1"), [verdict], seen, max_attempts=3).run()
    assert out.result.container is not None and out.result.container["attempt"] == 1 and not seen.events
    assert runtime.asked == 0


@pytest.mark.parametrize("verdict", ["failed", "hung"])
def test_the_last_allowed_attempt_ends_the_watch(verdict: str):
    runtime = Runtime(state("T2"))
    out = attempts(runtime, state("T1"), [verdict], Seen(), max_attempts=1).run()
    assert out.verdict == verdict and runtime.asked == 0


@pytest.mark.parametrize(("after", "step"), [
    (state("T1", "stopped", 3), Step.NEXT),  # stopped, on-failure: a restart is due
    (state("T2"), Step.NEXT),  # already started again
    (state("T1", "restarting"), Step.NEXT),
    (state("T1", "exited", 3, policy="no"), Step.END),  # no policy: stopped for good
    (state("T1", "exited", 0), Step.END),  # on-failure does not restart a clean exit
    (state("T1", "exited", 3, retries=1, count=1), Step.END),  # its retries used up
    (None, Step.END),  # removed
], ids=["due", "restarted", "restarting", "no-policy", "exit-0", "retries-used", "removed"])
def test_after_a_failed_attempt_the_watch_goes_on_only_while_a_restart_is_coming(after: Container | None,
                                                                                 step: Step):
    first = state("T1")
    a = attempts(Runtime(after), first, ["failed"], Seen(), max_attempts=3)
    out = a.watch(a.next_start(None))  # type: ignore[arg-type]
    assert a.after(a.next_start(None), out)[0] is step  # type: ignore[arg-type]


def test_a_hung_start_still_running_brings_no_restart_once_the_runtime_had_time_to_record_an_exit(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("firstlight.containers.attempts.EXIT_SETTLE_S", 0.3)
    first = state("T1")
    a = attempts(Runtime(state("T1")), first, ["hung"], Seen(), max_attempts=3)
    start = a.next_start(None)
    assert start is not None
    assert a.after(start, a.watch(start))[0] is Step.END


def test_the_next_start_is_a_new_started_at_running_not_the_same_start_nor_a_stopped_one():
    first = state("T1")
    runtime = Runtime(state("T1", "stopped", 3), state("T1", "stopped", 3), state("T2", "created"), state("T2"))
    a = attempts(runtime, first, [], Seen(), max_attempts=3)
    start = a.next_start(a.next_start(None))
    assert start is not None and start.number == 2 and start.container.started_at == "T2"
    assert start.container.pid == 4242 and runtime.asked == 4


@pytest.mark.parametrize("answer", [None, state("T1", "exited", 3, policy="no")], ids=["removed", "for-good"])
def test_no_next_start_when_the_container_is_removed_or_stopped_for_good(answer: Container | None):
    a = attempts(Runtime(answer), state("T1"), [], Seen(), max_attempts=3)
    assert a.next_start(a.next_start(None)) is None


def test_the_wait_for_the_next_start_ends_at_restart_wait_or_at_a_stop():
    waiting = state("T1", "stopped", 3)  # due, but never started
    a = attempts(Runtime(waiting), state("T1"), [], Seen(), max_attempts=3, restart_wait=0.3)
    assert a.next_start(a.next_start(None)) is None  # --restart-wait passed
    b = attempts(Runtime(waiting), state("T1"), [], Seen(), max_attempts=3, restart_wait=600)
    threading.Timer(0.2, b.stop.set).start()
    assert b.next_start(b.next_start(None)) is None  # a stop signal ends the wait, not the 600 s


def test_a_stop_signal_between_attempts_is_the_watchs_interrupted_verdict():
    runtime = Runtime(state("T1", "stopped", 3))
    seen = Seen()
    a = attempts(runtime, state("T1"), ["failed"], seen, max_attempts=3, restart_wait=600)
    real_next = a.next_start

    def stopped_while_waiting(previous: Any) -> Any:
        if previous is not None:
            os.kill(os.getpid(), signal.SIGTERM)  # the loop's handler sets stop; the wait ends
        return real_next(previous)

    a.next_start = stopped_while_waiting  # type: ignore[method-assign]
    out = a.run()
    assert out.verdict == "interrupted" and out.exit_code == 130 and out.result.ended_at == 100.0  # its clock
    assert out.result.evidence[0]["value"] == "SIGTERM received while waiting for the container's next start"
    assert out.result.container is not None and [x["verdict"] for x in out.result.container["attempts"]] == ["failed"]
    assert seen.summaries == [out.result]


def test_the_librarys_defaults_are_the_clis():
    tracker = Tracker(Runtime(state("T1")), ref="x")  # type: ignore[arg-type]
    a = ContainerAttempts(tracker, state("T1"), lambda c, r: None, Seen())  # type: ignore[arg-type]
    assert a.max_attempts == NUMBERS["max_attempts"].default == 1
    assert a.restart_wait == NUMBERS["restart_wait"].default
    assert a.fail_on_regression is False and not a.stop.is_set() and a.attempts == []


@pytest.mark.parametrize(("fail_on_regression", "code"), [(False, 0), (True, 4)])
def test_a_regression_exits_by_fail_on_regression(fail_on_regression: bool, code: int):
    out = attempts(Runtime(state("T1")), state("T1"), ["regression"], Seen(),
                   fail_on_regression=fail_on_regression).run()
    assert out.verdict == "regression" and out.exit_code == code == out.result.exit_code(fail_on_regression)


def test_the_facts_name_the_container_as_first_seen_before_any_inspect_and_no_policy_as_no():
    first = state("T1", policy="")
    tracker = Tracker(Runtime(first), ref=first.id)  # type: ignore[arg-type]
    a = ContainerAttempts(tracker, first, lambda c, r: Judged("ready", r, "T1"), Seen(),  # type: ignore[arg-type]
                          clock=lambda: 100.0)
    c = a.run().result.container
    assert c is not None and (c["name"], c["id"], c["restart_policy"]) == ("llm", "c0ffee" * 2, "no")
    assert c["attempts"][0]["ended_at"] == 20.0 and c["attempts"][0]["verdict"] == "ready"
    assert c["attempts"][0]["evidence"] == [{"signal": "log", "value": "CUDA out of memory in the start of T1",
                                             "since": 19.0}]
    assert (c["attempts"][0]["phase"], c["attempts"][0]["failure"], c["attempts"][0]["hint"]) == (
        "weights_loading", None, None)


def test_each_session_watches_its_own_start_reports_through_the_held_reporter_and_is_assessed_at_its_end():
    sessions.clear()
    runtime = Runtime(state("T1", "stopped", 3, retries=1), state("T2", count=1, retries=1),
                      state("T2", "exited", 3, retries=1, count=1))
    seen = Seen()
    attempts(runtime, state("T1", retries=1), ["failed", "failed"], seen, max_attempts=3).run()
    assert [w for _, w in sessions] == ["T1", "T2"]  # the tracker knows which start is watched
    assert seen.messages == ["judging the start of T1", "judging the start of T2"]
    assert [j.assessed_at for j, _ in sessions] == [[20.0], [20.0]]  # at the attempt's end


def test_a_restart_is_waited_for_while_the_runtime_records_the_exit():
    # still running at the first look, stopped with a restart due at the next: the watch goes on
    a = attempts(Runtime(state("T1"), state("T1", "stopped", 3)), state("T1"), ["failed"], Seen(), max_attempts=3)
    start = a.next_start(None)
    assert start is not None and a.after(start, a.watch(start))[0] is Step.NEXT


def test_a_stop_while_waiting_for_the_exit_brings_no_restart():
    a = attempts(Runtime(state("T1")), state("T1"), ["failed"], Seen(), max_attempts=3)
    start = a.next_start(None)
    assert start is not None
    out = a.watch(start)
    a.stop.set()
    assert a.after(start, out)[0] is Step.END


@pytest.mark.parametrize("answer", [None, state("T1", "exited", 3, policy="no")], ids=["removed", "for-good"])
def test_no_next_start_is_said_at_once_not_after_restart_wait(answer: Container | None):
    a = attempts(Runtime(answer), state("T1"), [], Seen(), max_attempts=3, restart_wait=600)
    guard = threading.Timer(20, a.stop.set)  # the bound of a wrong answer: never the 600 s
    guard.start()
    try:
        assert a.next_start(a.next_start(None)) is None
        assert not a.stop.is_set()  # found out, not cut off
    finally:
        guard.cancel()


def test_a_new_start_running_without_a_pid_yet_is_waited_for():
    runtime = Runtime(state("T1", "stopped", 3), state("T2", pid=0), state("T2"))
    a = attempts(runtime, state("T1"), [], Seen(), max_attempts=3)
    start = a.next_start(a.next_start(None))
    assert start is not None and start.container.pid == 4242 and runtime.asked == 3
