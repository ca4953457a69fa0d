"""The sidecar's loop in process, around real processes and real sockets on loopback: which process is the engine
(the newest match, never a worker whose parent matches, the one that listens on the engine's port, the exact
command line again), one start after another, a start that ends while serving, a launcher that leaves its
server behind, the same start watched again after a timeout, the port closing and opening again, a shared log
file from the last start, and a stop between starts. Each start's own watch is scripted (``run_start``): the
real sessions behind it run in ``tests/e2e/report/test_readiness.py``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from firstlight.result import RunResult
from firstlight.runner import rewatch as rewatch_module
from firstlight.runner.outcome import Outcome
from firstlight.runner.rewatch import ProcessMatcher, Rewatch, Target, port_open
from firstlight.sim.fixtures import free_port
from tests.e2e.runner.test_session import Recorder
from tests.support.common import drive, signal_self, wait_for
from tests.support.faults import full_accept_queue

CHECK_S = 60  # a deadline far above what each wait needs: reached only when the behaviour is broken
SLEEPER = "import sys, time; time.sleep(120)"
LISTENER = ("import socket, sys, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(120)")
FORKER = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(120)"


class Procs:
    """The processes a test starts, each in its own process group, all killed at the end."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, code: str, *args: str) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.DEVNULL,
                             start_new_session=True)
        self.started.append(p)
        wait_for(lambda: _cmdline(p.pid)[-len(args):] == list(args) if args else True, CHECK_S, "its command line")
        return p

    def listener(self, port: int, marker: str) -> subprocess.Popen[bytes]:
        p = self.start(LISTENER, str(port), marker)
        wait_for(lambda: port_open(f"http://127.0.0.1:{port}", 0.5), CHECK_S, "the listener's port")
        return p

    def kill(self, p: subprocess.Popen[bytes]) -> None:
        """SIGKILL, and reaped."""
        self.end(p)
        p.wait(CHECK_S)

    @staticmethod
    def end(p: subprocess.Popen[bytes]) -> None:
        """SIGKILL, and left unreaped (a zombie until the test ends): its wait status stays readable, as it is
        while a parent has not yet reaped it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)


def _cmdline(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


@pytest.fixture
def procs() -> Iterator[Procs]:
    ps = Procs()
    try:
        yield ps
    finally:
        for p in ps.started:
            ps.kill(p)


def next_tick() -> None:
    """Past the creation-time tick of a process started just before (10 ms: /proc's clock ticks): the next one
    started is later by its creation time, as a restart minutes later is."""
    since = time.monotonic()
    wait_for(lambda: time.monotonic() - since > 0.03, CHECK_S, "the next clock tick")


@pytest.fixture
def marker() -> str:
    return f"firstlight-test-engine-{uuid.uuid4().hex}"


# -- which process is the engine -------------------------------------------------------------------------------

def test_the_newest_matching_process_is_the_engine(procs: Procs, marker: str) -> None:
    old = procs.start(SLEEPER, marker)
    next_tick()
    new = procs.start(SLEEPER, marker)
    found = ProcessMatcher(marker).find()
    assert found is not None and found.pid == new.pid != old.pid
    assert found.create_time == psutil.Process(new.pid).create_time() and found.command[-1] == marker


def test_nothing_matching_is_no_engine(marker: str) -> None:
    assert ProcessMatcher(marker).find() is None


def test_a_worker_whose_parent_matches_is_not_the_engine(procs: Procs, marker: str) -> None:
    parent = procs.start(FORKER, sys.executable, "-c", SLEEPER, marker)
    wait_for(lambda: psutil.Process(parent.pid).children(), CHECK_S, "the worker")
    found = ProcessMatcher(marker).find()
    assert found is not None and found.pid == parent.pid


def test_the_process_that_listens_on_the_engines_port_wins_over_a_newer_match(procs: Procs, marker: str) -> None:
    port = free_port()
    engine = procs.listener(port, marker)
    decoy = procs.start(SLEEPER, marker)  # newer, matching by chance (a tail -f of its log, say)
    assert ProcessMatcher(marker).find(port).pid == engine.pid  # type: ignore[union-attr]
    assert ProcessMatcher(marker).find().pid == decoy.pid  # type: ignore[union-attr]  # no port known: newest
    assert ProcessMatcher(marker).find(free_port()).pid == decoy.pid  # type: ignore[union-attr]


def test_exact_matches_the_same_command_line_and_no_longer_one(procs: Procs, marker: str) -> None:
    same = procs.start(SLEEPER, marker)
    procs.start(SLEEPER, marker, "--more")  # newer, and its command line only begins the same way
    found = ProcessMatcher.exact([sys.executable, "-c", SLEEPER, marker]).find()
    assert found is not None and found.pid == same.pid


def test_a_target_is_alive_only_while_that_very_process_lives(procs: Procs, marker: str) -> None:
    p = procs.start(SLEEPER, marker)
    t = Target.of(p.pid)
    assert t is not None and t.alive() and t.command[-1] == marker
    assert not Target(p.pid, (t.create_time or 0) - 5.0).alive()  # a reused pid: another process
    procs.kill(p)
    assert not t.alive() and Target.of(p.pid) is None and not Target().alive()


# -- one start after another -----------------------------------------------------------------------------------

def ready(url: str, pid: int | None, t: float = 100.0) -> Outcome:
    r = RunResult(verdict="ready", phase="ready", started_at=t, ended_at=t + 5, engine="vllm", url=url,
                  ready_at=t + 5, pid=pid)
    return Outcome(r, 0)


def timed_out(url: str) -> Outcome:
    r = RunResult(verdict="timeout", phase="weights_loading", started_at=100.0, ended_at=160.0, engine="vllm",
                  url=url)
    return Outcome(r, 4)


def in_thread(fn: Callable[[], None]) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def rewatch(run_start: Callable[[Target], Outcome], url: str, rep: Recorder, **kw: object) -> Rewatch:
    return Rewatch(run_start, rep, url, poll_s=0.02, scan_s=0.05, **kw)  # type: ignore[arg-type]


def summaries(rep: Recorder) -> list[RunResult]:
    return [r for _, r in rep._of("summary")]


class Starts:
    """``run_start``: each start's target kept, each one READY (with the target's pid, or by URL alone)."""

    def __init__(self, url: str, by_pid: bool = True) -> None:
        self.url, self.by_pid = url, by_pid
        self.targets: list[Target] = []

    def __call__(self, t: Target) -> Outcome:
        self.targets.append(t)
        return ready(self.url, t.pid if self.by_pid else None)


def test_a_start_that_ends_while_serving_is_reported_and_the_next_one_is_watched(procs: Procs, marker: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = procs.listener(port, marker)
    rep, run_start = Recorder(), Starts(url)
    targets = run_start.targets
    rw = rewatch(run_start, url, rep, matcher=ProcessMatcher(marker))

    def restart() -> None:
        wait_for(lambda: len(targets) == 1, CHECK_S, "the first start")
        procs.end(first)
        wait_for(lambda: summaries(rep), CHECK_S, "the end of the first start to be reported")
        second = procs.listener(port, marker)
        wait_for(lambda: len(targets) == 2, CHECK_S, "the second start")
        assert targets[1].pid == second.pid

    errors = drive(restart, rw.stop.set)
    out = rw.run()
    assert not errors, errors
    assert targets[0].pid == first.pid and rw.count == 2
    ended = summaries(rep)[0]
    assert (ended.verdict, ended.failure, ended.phase) == ("failed", "other", "serving")  # killed: no crash
    assert ended.evidence[0]["value"].startswith(f"server pid {first.pid} died of SIGKILL")
    assert f"waiting for the engine: a process matching {marker!r} other than pid {first.pid}" in rep.messages()
    assert out.verdict == "interrupted" and out.result.evidence[0]["value"] == "stop received while serving"
    assert summaries(rep)[-1] is out.result


def test_an_older_matching_process_is_never_the_next_start(procs: Procs, marker: str) -> None:
    """The previous start's process ends; an older one that matches by chance is still there: not taken."""
    decoy = procs.start(SLEEPER, marker)
    next_tick()
    engine = procs.start(SLEEPER, marker)
    rep, run_start = Recorder(), Starts("http://127.0.0.1:1")
    targets = run_start.targets
    rw = rewatch(run_start, "http://127.0.0.1:1", rep, matcher=ProcessMatcher(marker))

    def end_then_look() -> None:
        wait_for(lambda: targets, CHECK_S, "the first start")
        procs.kill(engine)
        wait_for(lambda: any("other than pid" in m for m in rep.messages()), CHECK_S, "the wait for the next")
        # several scans with the decoy there: none is taken
        scans_done = time.monotonic() + 0.5
        wait_for(lambda: time.monotonic() > scans_done, CHECK_S, "some scans")

    errors = drive(end_then_look, rw.stop.set)
    out = rw.run()
    assert not errors, errors
    assert [t.pid for t in targets] == [engine.pid] and decoy.poll() is None  # the decoy still runs
    assert out.result.evidence[0]["value"] == "stop received between starts"


def test_a_timeout_watches_the_same_start_again_while_it_lives(procs: Procs, marker: str) -> None:
    p = procs.start(SLEEPER, marker)
    first = Target.of(p.pid)
    rep, targets = Recorder(), []

    def run_start(t: Target) -> Outcome:
        targets.append(t)
        if len(targets) == 3:
            rw.stop.set()
        return timed_out("http://127.0.0.1:1")

    rw = rewatch(run_start, "http://127.0.0.1:1", rep, first=first, matcher=ProcessMatcher(marker))
    out = rw.run()
    assert targets == [first, first, first]
    assert out.result.verdict == "interrupted"


def test_a_launcher_that_leaves_its_server_behind_is_followed_to_that_server(procs: Procs, marker: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    launcher = procs.start(SLEEPER, marker)
    server = procs.listener(port, f"{marker}-daemon")  # not a child of the launcher: it left (a double fork)
    rep = Recorder()
    rw = rewatch(lambda t: ready(url, t.pid), url, rep, first=Target.of(launcher.pid))

    def launcher_exits_then_server() -> None:
        procs.end(launcher)
        wait_for(lambda: any("still serves" in m for m in rep.messages()), CHECK_S, "the server to be followed")
        procs.end(server)
        wait_for(lambda: summaries(rep), CHECK_S, "the end")

    errors = drive(launcher_exits_then_server, rw.stop.set)
    rw.run()
    assert not errors, errors
    assert (f"pid {launcher.pid} ended; pid {server.pid} still serves {url} (a process it left behind): "
            "watching that one") in rep.messages()
    ended = summaries(rep)[0]
    assert ended.evidence[0]["value"].startswith(f"server pid {server.pid} died of SIGKILL")


def test_by_url_alone_a_new_start_is_the_port_closing_and_opening_again(procs: Procs, marker: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = procs.listener(port, marker)
    rep, run_start = Recorder(), Starts(url, by_pid=False)
    starts = run_start.targets
    rw = rewatch(run_start, url, rep)

    def restart() -> None:
        wait_for(lambda: starts, CHECK_S, "the first start")
        procs.kill(first)
        wait_for(lambda: summaries(rep), CHECK_S, "the closed port to end the first start")
        procs.listener(port, marker)
        wait_for(lambda: len(starts) == 2, CHECK_S, "the port opening again to be the next start")

    errors = drive(restart, rw.stop.set)
    rw.run()
    assert not errors, errors
    assert starts == [Target(), Target()]
    ended = summaries(rep)[0]
    assert (ended.verdict, ended.failure) == ("failed", "other")
    assert ended.evidence[0]["signal"] == "probe:port" and ended.evidence[0]["since"] == ended.ended_at
    assert ended.evidence[0]["value"].startswith(f"{url} stopped accepting connections after serving for ")
    assert f"waiting for the next start: {url} to close and open again" in rep.messages()


def test_a_stop_before_any_start_is_interrupted_waiting_for_the_server(marker: str) -> None:
    rep = Recorder()
    rw = rewatch(lambda t: ready("u", None), "http://127.0.0.1:1", rep, matcher=ProcessMatcher(marker),
                 engine="vllm")
    before = signal.getsignal(signal.SIGTERM)

    errors = drive(lambda: wait_for(lambda: rep.messages(), CHECK_S, "the wait"),
                   lambda: signal_self(signal.SIGTERM))
    out = rw.run()
    assert not errors, errors
    assert rw.count == 0 and out.verdict == "interrupted" and out.result.engine == "vllm"
    assert out.result.evidence[0]["value"] == "SIGTERM received while waiting for the server to start"
    assert rep.messages()[0] == f"waiting for the engine: a process matching {marker!r}"  # no previous pid to name
    assert summaries(rep) == [out.result]
    assert signal.getsignal(signal.SIGTERM) == before  # the handlers are given back


def test_a_stale_shared_log_holds_the_next_start_back_until_it_is_written_or_a_bound(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("the last start's lines\n")
    old = log.stat().st_mtime
    rw = rewatch(lambda t: ready("u", None), "http://127.0.0.1:1", Recorder(), log_file=log)
    t0 = time.monotonic()
    rw._wait_log_fresh(old + 60, limit_s=0.3)  # never rewritten: waits out the bound
    assert time.monotonic() - t0 >= 0.3
    t0 = time.monotonic()
    rw._wait_log_fresh(old, limit_s=CHECK_S)  # written since: no wait
    rw._wait_log_fresh(0.0, limit_s=CHECK_S)
    missing = rewatch(lambda t: ready("u", None), "http://127.0.0.1:1", Recorder(), log_file=tmp_path / "none")
    missing._wait_log_fresh(time.time() + 60, limit_s=CHECK_S)  # not there yet: nothing old to re-read
    assert time.monotonic() - t0 < CHECK_S


@pytest.mark.parametrize("before", [None, "the last start's lines\n"])
def test_a_start_found_late_is_read_from_where_its_log_ended_when_the_wait_began(
        procs: Procs, marker: str, tmp_path: Path, before: str | None) -> None:
    """A start that began after the sidecar began waiting may write its first (dateless) lines before a scan finds
    it: its target carries where the log ended when the wait began (0: no file then), where its lines begin."""
    log = tmp_path / "engine.log"
    if before is not None:
        log.write_text(before)
    run_start, rep = Starts("http://127.0.0.1:1"), Recorder()
    rw = rewatch(run_start, "http://127.0.0.1:1", rep, matcher=ProcessMatcher(marker), log_file=log)

    def start_then_stop() -> None:
        wait_for(lambda: any("waiting for the engine" in m for m in rep.messages()), CHECK_S, "the wait")
        with log.open("a") as f:
            f.write("llama_model_loader: loaded meta data\n")  # its first line, before it is found
        procs.start(SLEEPER, marker)
        wait_for(lambda: run_start.targets, CHECK_S, "the start found")
        rw.stop.set()

    errors = drive(start_then_stop, rw.stop.set)
    rw.run()
    assert not errors, errors
    assert [t.log_size for t in run_start.targets] == [0 if before is None else len(before)]
    # already running when the wait began: where its lines begin is not known
    again = rewatch(run_start, "http://127.0.0.1:1", Recorder(), matcher=ProcessMatcher(marker), log_file=log)
    assert (again._next_target(None) or Target(pid=1, log_size=-1)).log_size is None


def test_port_open_says_whether_the_port_accepts_a_connection() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert port_open(f"http://127.0.0.1:{port}/v1", 1.0)
    assert not port_open(f"http://127.0.0.1:{port}", 1.0)


def test_a_port_whose_connect_hangs_is_not_open_once_its_bound_is_past() -> None:
    """A listener whose accept queue is full: the kernel drops the SYN and a connect waits (a wedged engine)."""
    with full_accept_queue() as port:
        t0 = time.monotonic()
        assert not port_open(f"http://127.0.0.1:{port}", 0.3)
        assert time.monotonic() - t0 < CHECK_S / 2  # bounded (without its bound: about 2 minutes)


@pytest.mark.parametrize(("poll_s", "bound"), [(0.05, 0.2), (0.25, 1.0), (2.0, 1.0)])
def test_a_port_check_is_bounded_by_four_polls_and_at_most_a_second(poll_s: float, bound: float) -> None:
    rw = Rewatch(lambda t: ready("http://127.0.0.1:1", None), Recorder(), "http://127.0.0.1:1", poll_s=poll_s)
    assert rw._port_s == pytest.approx(bound)


# -- the rules of the loop, one by one --------------------------------------------------------------------------

class Watches:
    """``serving``: each serving watch made (for which start, which target) and what was asked of it."""

    def __init__(self) -> None:
        self.made: list[tuple[Outcome, Target]] = []
        self.calls: list[tuple[int, str]] = []  # (which watch, start | step | stop)

    def __call__(self, outcome: Outcome, target: Target) -> Any:
        self.made.append((outcome, target))
        n = len(self.made) - 1
        calls = self.calls

        class Watch:
            def start(self) -> None:
                calls.append((n, "start"))

            def step(self) -> None:
                calls.append((n, "step"))

            def stop(self) -> None:
                calls.append((n, "stop"))

        return Watch()


def test_the_serving_checks_run_for_the_start_that_serves_and_follow_a_daemon_to_its_server(
        procs: Procs, marker: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    launcher = procs.start(SLEEPER, marker)
    server = procs.listener(port, f"{marker}-daemon")
    rep, watches = Recorder(), Watches()
    first = Target.of(launcher.pid)
    outcome = ready(url, launcher.pid)
    rw = Rewatch(lambda t: outcome, rep, url, first=first, poll_s=0.02, scan_s=0.05, serving=watches)

    def launcher_exits_then_server() -> None:
        wait_for(lambda: (0, "step") in watches.calls, CHECK_S, "the first watch's checks")
        procs.end(launcher)
        wait_for(lambda: len(watches.made) == 2, CHECK_S, "a watch for the daemon")
        procs.end(server)
        wait_for(lambda: summaries(rep), CHECK_S, "the end")

    errors = drive(launcher_exits_then_server, rw.stop.set)
    rw.run()
    assert not errors, errors
    assert [(o, t.pid) for o, t in watches.made] == [(outcome, launcher.pid), (outcome, server.pid)]
    first_calls = [c for n, c in watches.calls if n == 0]
    assert first_calls[0] == "start" and first_calls[-1] == "stop" and "step" in first_calls
    assert next(c for n, c in watches.calls if n == 1) == "start" and watches.calls[-1] == (1, "stop")
    ended = summaries(rep)[0]
    assert ended.evidence[0]["signal"] == "process" and ended.phase == "serving"


def scripted_port(monkeypatch: pytest.MonkeyPatch, answers: list[bool]) -> list[bool]:
    """port_open as a script of answers (the last repeated): the rule that counts them is the subject, the real
    connect is ``test_port_open_says_whether_the_port_accepts_a_connection``'s."""
    asked: list[bool] = []

    def port_open(url: str, timeout: float) -> bool:
        asked.append(answers[0] if len(answers) == 1 else answers.pop(0))
        return asked[-1]

    monkeypatch.setattr(rewatch_module, "port_open", port_open)
    return asked


def test_one_refused_connect_is_a_blip_two_in_a_row_end_the_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = scripted_port(monkeypatch, [True, False, True, False, True, False, False, False])
    rep = Recorder()
    url = "http://127.0.0.1:1"
    rw = Rewatch(lambda t: ready(url, None), rep, url, first=Target(), poll_s=0.001)
    out = rw._while_serving(Target(), ready(url, None))
    assert asked[:7] == [True, False, True, False, True, False, False] and len(asked) == 7
    assert out.verdict == "failed" and out.result.evidence[0]["signal"] == "probe:port"
    assert out.exit_code == out.result.exit_code()
    assert summaries(rep) == [out.result]


def test_by_url_the_next_start_is_a_close_then_an_open_never_an_open_port_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous start failed with its port still open: that is not the next start; the port closing and
    opening again is."""
    asked = scripted_port(monkeypatch, [True, True, True, False, True])
    rw = Rewatch(lambda t: ready("u", None), Recorder(), "http://127.0.0.1:1", poll_s=0.001)
    assert rw._next_target(Target()) == Target()
    assert asked == [True, True, True, False, True]
    assert rw._next_target(None) == Target()  # the first start: whatever the port says


def test_a_start_that_failed_is_followed_by_the_next_one_not_watched_again(procs: Procs, marker: str) -> None:
    p = procs.start(SLEEPER, marker)
    first = Target.of(p.pid)
    failed = Outcome(RunResult(verdict="failed", phase="weights_loading", started_at=1.0, ended_at=2.0,
                               engine="vllm", url="u", failure="oom"), 3)
    rep, targets = Recorder(), []

    def run_start(t: Target) -> Outcome:
        targets.append(t)
        return failed

    rw = rewatch(run_start, "http://127.0.0.1:1", rep, first=first, matcher=ProcessMatcher(marker))

    errors = drive(lambda: wait_for(lambda: any("other than pid" in m for m in rep.messages()), CHECK_S,
                                    "the wait for the next"), rw.stop.set)
    out = rw.run()
    assert not errors, errors
    assert targets == [first]  # alive, but failed: never watched again as the same start
    assert out.result.evidence[0]["value"] == "stop received between starts"
    assert out.result.ended_at is not None and out.exit_code == out.result.exit_code()


def test_by_url_a_timeout_watches_the_same_start_again() -> None:
    rep, starts = Recorder(), []

    def run_start(t: Target) -> Outcome:
        starts.append(t)
        if len(starts) == 2:
            rw.stop.set()
        return timed_out("http://127.0.0.1:1")

    rw = rewatch(run_start, "http://127.0.0.1:1", rep)
    rw.run()
    assert starts == [Target(), Target()]
    assert not any(m.startswith("waiting for the next start") for m in rep.messages())


def test_the_loop_runs_from_a_thread_that_cannot_take_signals() -> None:
    """Library use: signal handlers can be set only from the main thread; the loop runs without them."""
    rep = Recorder()
    rw = rewatch(lambda t: ready("u", None), "http://127.0.0.1:1", rep, matcher=ProcessMatcher("never-" + "x" * 8))
    rw.stop.set()
    out: list[Outcome] = []
    th = in_thread(lambda: out.append(rw.run()))
    th.join(CHECK_S)
    assert out and out[0].verdict == "interrupted"
    assert out[0].result.started_at == rw.started_at and out[0].result.url == "http://127.0.0.1:1"
    assert out[0].result.ended_at is not None and out[0].exit_code == out[0].result.exit_code()


def test_the_loops_defaults_scan_once_a_second() -> None:
    rw = Rewatch(lambda t: ready("u", None), Recorder(), "http://127.0.0.1:1")
    assert (rw.poll_s, rw.scan_s, rw.engine, rw.serving) == (0.25, 1.0, "generic", None)


@pytest.mark.parametrize(("found", "previous", "later"), [
    (Target(2, 100.0), Target(1, 100.0), True),  # the same creation tick: a restart within 10 ms counts
    (Target(2, 100.01), Target(1, 100.0), True),
    (Target(2, 99.99), Target(1, 100.0), False),  # older: a decoy
    (Target(1, 101.0), Target(1, 100.0), False),  # the same pid
    (Target(2, None), Target(1, None), True),
    (Target(2, 0.5), Target(1, None), True),
])
def test_a_next_start_is_another_process_created_no_earlier(found: Target, previous: Target, later: bool) -> None:
    assert Rewatch._later(found, previous) is later


# B, started by A, both with the marker in their command lines, looks for the marker: neither itself nor its
# parent is the engine, so it finds nothing (its own command line, shared with another test process under xdist,
# would hide what this checks: the marker makes the two unique)
def test_the_engine_is_never_this_process_or_one_of_its_ancestors(marker: str) -> None:
    code = ("import os, subprocess, sys\n"
            "from firstlight.runner.rewatch import ProcessMatcher\n"
            "if sys.argv[2] == 'A':\n"
            "    sys.exit(subprocess.run([sys.executable, '-c', os.environ['CODE'], sys.argv[1], 'B']).returncode)\n"
            "found = ProcessMatcher(sys.argv[1]).find()\n"
            "print(found.pid if found else None, flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code, marker, "A"], env={**os.environ, "CODE": code},
                         capture_output=True, text=True, timeout=CHECK_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "None"


def test_the_listening_process_found_deep_in_a_tree_is_taken_with_its_own_start_time(procs: Procs,
                                                                                        marker: str) -> None:
    """The engine's grandchild listens (a launcher, its server, its worker); a newer match listens nowhere."""
    port = free_port()
    engine = procs.start(FORKER, sys.executable, "-c", FORKER, sys.executable, "-c", LISTENER, str(port), marker)
    wait_for(lambda: port_open(f"http://127.0.0.1:{port}", 0.5), CHECK_S, "the grandchild's port")
    next_tick()
    procs.start(SLEEPER, marker)
    found = ProcessMatcher(marker).find(port)
    assert found is not None and found.pid == engine.pid
    assert found.create_time == psutil.Process(engine.pid).create_time()
    assert found.command == tuple(psutil.Process(engine.pid).cmdline())


def test_of_two_processes_that_listen_on_the_port_the_newer_is_the_engine(procs: Procs, marker: str) -> None:
    port = free_port()
    reuse = LISTENER.replace("socket.SO_REUSEADDR", "socket.SO_REUSEPORT")
    old = procs.start(reuse, str(port), marker)
    wait_for(lambda: port_open(f"http://127.0.0.1:{port}", 0.5), CHECK_S, "the first listener")
    next_tick()
    new = procs.start(reuse, str(port), marker)
    wait_for(lambda: any(c.status == psutil.CONN_LISTEN for c in psutil.Process(new.pid).net_connections()),
             CHECK_S, "the second listener")
    found = ProcessMatcher(marker).find(port)
    assert found is not None and found.pid == new.pid != old.pid


def test_a_refused_connect_at_the_first_check_is_a_blip_too(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = scripted_port(monkeypatch, [False, True, False, False])
    url = "http://127.0.0.1:1"
    rw = Rewatch(lambda t: ready(url, None), Recorder(), url, first=Target(), poll_s=0.001)
    out = rw._while_serving(Target(), ready(url, None))
    assert asked == [False, True, False, False] and out.verdict == "failed"


def test_a_stop_before_any_start_dates_the_watch_from_its_own_beginning() -> None:
    rw = Rewatch(lambda t: ready("u", None), Recorder(), "http://127.0.0.1:1", clock=lambda: 5000.0)
    rw.stop.set()
    out = rw.run()
    assert rw.count == 0 and out.result.started_at == 5000.0


def test_this_process_and_its_ancestors_are_its_own_lineage() -> None:
    assert rewatch_module._own_lineage() == {os.getpid(), *(p.pid for p in psutil.Process().parents())}


def test_a_watcher_whose_own_command_line_matches_never_takes_itself_for_the_engine() -> None:
    """``sh -c 'firstlight watch --pid-from "vllm serve"'``: the pattern is in the watcher's own command line."""
    code = ("import sys; from firstlight.runner.rewatch import ProcessMatcher; "
            "f = ProcessMatcher('lineage-mark-7d1').find(None); print(f.pid if f else None)")
    out = subprocess.run([sys.executable, "-c", code, "lineage-mark-7d1"], capture_output=True, text=True,
                         timeout=CHECK_S, check=True)
    assert out.stdout.strip() == "None", out.stdout


def test_a_process_of_the_watchers_own_lineage_is_never_the_engine_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rule in process (mutation testing reaches no subprocess): a matching process that is one of the
    watcher's own lineage is skipped."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "lineage-mark-2c9"])
    try:
        wait_for(lambda: "lineage-mark-2c9" in " ".join(psutil.Process(child.pid).cmdline()), CHECK_S, "its exec")
        found = ProcessMatcher("lineage-mark-2c9").find(None)
        assert found is not None and found.pid == child.pid
        monkeypatch.setattr(rewatch_module, "_own_lineage", lambda: {os.getpid(), child.pid})
        assert ProcessMatcher("lineage-mark-2c9").find(None) is None
    finally:
        child.kill()
        child.wait(CHECK_S)
