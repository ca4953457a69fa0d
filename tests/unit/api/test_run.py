"""The API's run in process: ``up``'s context manager around a scripted session (the session the run would
start is replaced by one that tells a READY result, dies, fails or waits for the stop, as a test script says).
What the block enters with, when ``NotReady`` is raised and with which result, the caller's stop, the server's
death inside the block, a session's own error, the bound on waiting and what ``Server`` reports. The real
sessions behind the same code: ``tests/e2e/test_api*.py``."""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import firstlight
from firstlight import api
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.runner.outcome import Outcome
from firstlight.serving import ServingStatus
from firstlight.sim.fixtures import free_port
from firstlight.timeline import Interrupted

READY = RunResult(verdict="ready", phase="ready", started_at=100.0, ended_at=160.0, engine="vllm",
                  url="http://127.0.0.1:1", ready_at=160.0, pid=4242)
FAILED = RunResult(verdict="failed", phase="weights_loading", started_at=100.0, ended_at=130.0, engine="vllm",
                   url="http://127.0.0.1:1", failure="oom", evidence=({"signal": "log", "value": "CUDA OOM"},))


class Scripted:
    """A session: ``script(session)`` runs on the run's thread and returns the Outcome."""

    def __init__(self, tracker: Any, script: Callable[[Scripted], Outcome]) -> None:
        self.tracker, self.script = tracker, script
        self.q: queue.Queue[Any] = queue.Queue()
        self.preflight: Any = None
        self.preflight_at_start: Any = "unset"

    def run(self) -> Outcome:
        self.preflight_at_start = self.preflight
        return self.script(self)


def serve_until_stopped(s: Scripted) -> Outcome:
    s.tracker.summary(READY)
    stop = s.q.get(timeout=30)
    assert isinstance(stop, Interrupted)
    return Outcome(READY.interrupted(stop.signal, stop.t, "while serving").stopped("SIGTERM, exited 0"), 130)


def context(script: Callable[[Scripted], Outcome], **kw: Any) -> Any:
    ctx = firstlight.up([sys.executable, "-c", "pass"], port=free_port(), history=False,
                        no_preflight=kw.pop("no_preflight", True), **kw)
    ctx._run.session = Scripted(ctx._run.tracker, script)
    return ctx


def test_the_block_enters_with_the_ready_result_and_its_exit_stops_the_server():
    ctx = context(serve_until_stopped)
    with ctx as server:
        assert server.result is READY and server.pid == 4242 and server.launched is True
        assert server.url == ctx._url and server.alive is True
    assert server.alive is False  # the run's thread has ended
    assert server.result.verdict == "ready"  # the caller's stop is not a failure
    assert server.result.server_stopped == "SIGTERM, exited 0"


def test_the_stop_is_told_to_the_session_as_the_blocks_exit():
    seen: list[Any] = []

    def script(s: Scripted) -> Outcome:
        s.tracker.summary(READY)
        seen.append(s.q.get(timeout=30))
        return Outcome(READY.interrupted(seen[0].signal, seen[0].t, "while serving"), 130)

    with context(script) as server:
        pass
    assert seen[0].signal == "the with-block's exit"
    assert server.result.server_stopped == "stopped"  # the session said nothing of how


def test_a_run_that_never_serves_raises_not_ready_with_its_result():
    with pytest.raises(firstlight.NotReady) as caught, context(lambda s: Outcome(FAILED, 1)):
        pytest.fail("the block must not run")
    assert caught.value.result is FAILED
    assert str(caught.value) == "failed (oom) in phase weights_loading: CUDA OOM"


def test_a_server_that_dies_in_the_block_raises_not_ready_at_its_exit():
    died = threading.Event()

    def script(s: Scripted) -> Outcome:
        s.tracker.summary(READY)
        died.set()
        return Outcome(READY.died_serving(-11, 170.0), 1)

    with pytest.raises(firstlight.NotReady) as caught, context(script) as server:
        assert died.wait(30)
        server._run.thread.join(30)
        assert server.alive is False
    assert caught.value.result.failure == "crashed" and server.result is caught.value.result


def test_the_blocks_own_exception_wins_over_the_servers_death():
    def script(s: Scripted) -> Outcome:
        s.tracker.summary(READY)
        return Outcome(READY.died_serving(1, 170.0), 1)

    with pytest.raises(KeyError), context(script) as server:
        server._run.thread.join(30)
        raise KeyError("the caller's")
    assert server.result.verdict == "failed"  # the death is still the result


def test_a_stop_that_ends_in_a_failure_is_not_ready():
    def script(s: Scripted) -> Outcome:
        s.tracker.summary(READY)
        s.q.get(timeout=30)
        return Outcome(READY.died_serving(1, 170.0), 1)  # it died while being stopped, not by our stop

    with pytest.raises(firstlight.NotReady), context(script):
        pass


def test_an_interruption_by_someone_else_is_not_ready():
    def script(s: Scripted) -> Outcome:
        s.tracker.summary(READY)
        return Outcome(READY.interrupted("SIGTERM", 170.0, "while serving"), 130)

    with pytest.raises(firstlight.NotReady) as caught, context(script) as server:
        server._run.thread.join(30)
    assert caught.value.result.verdict == "interrupted"


def test_an_error_of_the_session_reaches_the_caller():
    def script(s: Scripted) -> Outcome:
        raise OSError("the session's own bug")

    with pytest.raises(OSError, match="own bug"), context(script):
        pass


def test_a_session_that_returns_nothing_is_a_bug_said_so():
    run = context(lambda s: None)._run  # type: ignore[arg-type,return-value]
    with pytest.raises(RuntimeError, match="the session did not end"):
        run.start()


def test_waiting_for_a_verdict_is_bounded():
    release = threading.Event()
    ctx = context(lambda s: (release.wait(30), Outcome(FAILED, 1))[1])
    ctx._run.bound = 0.3
    try:
        with pytest.raises(RuntimeError, match=r"no verdict within 0\.3s"), ctx:
            pass
    finally:
        release.set()


def test_ctrl_c_while_waiting_stops_the_session_and_propagates():
    stopped = threading.Event()

    def script(s: Scripted) -> Outcome:
        stop = s.q.get(timeout=30)
        stopped.set()
        return Outcome(FAILED.interrupted(stop.signal, stop.t, "while starting"), 130)

    ctx = context(script)

    class Interrupting(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            raise KeyboardInterrupt

    ctx._run.ready = Interrupting()
    with pytest.raises(KeyboardInterrupt), ctx:
        pass
    assert stopped.is_set() and not ctx._run.thread.is_alive()


def test_preflight_runs_before_the_session_with_the_shorter_of_its_deadline_and_the_runs(
        monkeypatch: pytest.MonkeyPatch):
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(api, "_preflight", lambda *a: calls.append(a) or "the report")
    with context(serve_until_stopped, no_preflight=False, timeout=12.0, engine="vllm", model="/m") as server:
        assert server._run.session.preflight_at_start == "the report"
    command, engine, model, disk_sample, redactor, deadline, read = calls[0]
    assert (command[1:], engine, str(model), disk_sample, deadline) == (["-c", "pass"], "vllm", "/m", True, 12.0)
    assert redactor is server._run.redactor
    assert read is server._run.plan.server and read.argv[1:] == ("-c", "pass")  # the run's one reading of it
    calls.clear()
    with context(serve_until_stopped, no_preflight=False):
        pass
    assert calls[0][5] == 30.0  # preflight's own deadline under the run's hour
    calls.clear()
    with context(serve_until_stopped) as server:
        assert server._run.session.preflight_at_start is None
    assert calls == []


def test_server_serving_is_the_checks_state_now():
    with context(serve_until_stopped) as server:
        assert server.serving is None  # no check yet
        status = ServingStatus("degraded", "slow", 1.0, True, True)
        server._run.tracker.serving(status, True)
        assert server.serving is status
    assert "serving='degraded'" in repr(server)


def test_server_repr_masks_the_urls_password():
    server = api.Server(url="http://user:pa55w0rd-x@127.0.0.1:8000", result=READY, pid=7, launched=False)
    shown = repr(server)
    assert "pa55w0rd-x" not in shown and "127.0.0.1:8000" in shown
    assert "pid=7" in shown and "launched=False" in shown and "verdict='ready'" in shown and "serving=None" in shown


def test_server_alive_without_a_run_reads_the_pid():
    assert api.Server(url="u", result=READY, pid=None, launched=False).alive is None
    assert api.Server(url="u", result=READY, pid=os.getpid(), launched=False).alive is True
    assert api.Server(url="u", result=READY, pid=2 ** 22 + 12345, launched=False).alive is False


def test_the_tracker_tells_ready_once_and_forwards_everything():
    told: list[Any] = []

    class Inner(QuietReporter):
        def summary(self, result: RunResult) -> None:
            told.append(result)

    ready = threading.Event()
    tracker = api._Tracker(Inner(), ready)
    tracker.summary(FAILED)
    assert not ready.is_set() and tracker.serving_result is None
    tracker.summary(READY)
    second = READY.stopped("x")
    tracker.summary(second)
    assert ready.is_set() and tracker.serving_result is READY and told == [FAILED, READY, second]


def test_a_ready_that_comes_later_is_waited_for_in_short_slices():
    waits: list[float | None] = []

    class Slices(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout)
            return super().wait(timeout)

    def script(s: Scripted) -> Outcome:
        assert not later.wait(0.35)  # READY only after a few of the caller's slices
        return serve_until_stopped(s)

    later = threading.Event()
    ctx = context(script)
    ctx._run.ready = Slices()
    ctx._run.tracker.ready = ctx._run.ready
    with ctx as server:
        assert server.result is READY
    assert len(waits) >= 2 and set(waits) == {0.1}  # a Ctrl-C is heard within 0.1 s, never a long lock wait


def test_the_stop_is_dated_now():
    seen: list[Any] = []

    def script(s: Scripted) -> Outcome:
        s.tracker.summary(READY)
        seen.append(s.q.get(timeout=30))
        return Outcome(READY.interrupted(seen[0].signal, seen[0].t, "while serving"), 130)

    before = time.time()
    with context(script):
        pass
    assert before <= seen[0].t <= time.time()


def test_the_serving_checks_are_forwarded_to_the_callers_reporter():
    told: list[Any] = []

    class Inner(QuietReporter):
        def serving(self, status: ServingStatus, changed: bool) -> None:
            told.append((status, changed))

    tracker = api._Tracker(Inner(), threading.Event())
    status = ServingStatus("serving", "ok", 1.0, True, True)
    tracker.serving(status, False)
    assert told == [(status, False)] and tracker.status_now is status


def test_a_session_that_returns_nothing_says_so_in_its_words():
    run = context(lambda s: None)._run  # type: ignore[arg-type,return-value]
    with pytest.raises(RuntimeError) as caught:
        run.start()
    assert str(caught.value) == "firstlight: the session did not end"
