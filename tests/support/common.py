"""Helpers shared by the tests: running the real CLI in a subprocess, the processes a test started, and waiting
on conditions with deadlines (never sleeping to let things settle)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
FIXTURES = REPO / "tests" / "fixtures"


def wait_for(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Poll ``cond`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Output:
    """A running subprocess's stdout (and stderr, when piped) read on threads, so that every wait on a line has a
    deadline. A bare ``proc.stdout.readline()`` inside :func:`wait_for` blocks until the process writes or exits,
    and no deadline can stop it (CI: a run whose summary said ``regression``, not ``ready``, wrote nothing more
    and held the test until pytest-timeout killed it 300 s later)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.seen: list[str] = []  # stdout lines the waits consumed, for the failure messages
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._err: list[str] = []
        self._threads = [threading.Thread(target=self._pump, args=(proc.stdout, self._lines.put), daemon=True)]
        if proc.stderr is not None:
            self._threads.append(threading.Thread(target=self._pump, args=(proc.stderr, self._err.append),
                                                  daemon=True))
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream: Any, put: Callable[[Any], None]) -> None:
        for line in iter(stream.readline, ""):
            put(line)
        put(None)  # end of the stream

    def wait_line(self, cond: Callable[[str], Any], timeout: float, what: str,
                  stop: Callable[[str], Any] | None = None) -> Any:
        """The first truthy ``cond(line)`` of the next stdout lines; fails the test after ``timeout`` seconds, at
        the end of the output, or at once on a line for which ``stop(line)`` is truthy (a final verdict that is not
        the one waited for)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; last lines: {self._tail()}")
            try:
                line = self._lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                self._lines.put(None)
                raise AssertionError(f"the output ended before {what}; last lines: {self._tail()}")
            self.seen.append(line)
            value = cond(line)
            if value:
                return value
            if stop is not None and stop(line):
                raise AssertionError(f"waiting for {what}, got: {line.strip()[:2000]}")

    def wait_event(self, event: str, timeout: float, what: str, **fields: Any) -> dict[str, Any]:
        """The next JSON event named ``event`` whose ``fields`` match; a ``summary`` event that does not match
        fails at once (nothing follows a summary but supervision)."""
        def match(line: str) -> dict[str, Any] | None:
            e = _event(line)
            return e if e.get("event") == event and all(e.get(k) == v for k, v in fields.items()) else None

        return self.wait_line(match, timeout, what, stop=lambda line: _event(line).get("event") == "summary")

    def rest(self, timeout: float) -> tuple[str, str]:
        """Like ``communicate``: waits for the process to exit (``subprocess.TimeoutExpired`` after ``timeout``)
        and returns the stdout the waits did not consume and the whole stderr."""
        self.proc.wait(timeout=timeout)
        for t in self._threads:
            t.join(timeout=10)  # a grandchild holding the pipe open: the output up to now is what there is
        out = []
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                break
            if line is None:
                self._lines.put(None)
                break
            out.append(line)
        return "".join(out), "".join(x for x in self._err if x is not None)

    def _tail(self) -> str:
        return repr([x.strip()[:300] for x in self.seen[-5:]])


def _event(line: str) -> dict[str, Any]:
    if not line.startswith("{"):
        return {}
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]

    @property
    def summary(self) -> dict[str, Any]:
        events = self.events
        assert events, f"no JSON output; stderr:\n{self.stderr[-3000:]}"
        assert events[-1]["event"] == "summary", events[-1]
        return events[-1]


def firstlight_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "firstlight", *args]


def sim_cmd(scenario: str = "normal", port: int | None = None, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "firstlight.sim", "--scenario", scenario]
    if port is not None:
        cmd += ["--port", str(port)]
    return [*cmd, *extra]


def started_sim(cmd: list[str], reap: list[int]) -> subprocess.Popen[bytes]:
    """The simulator started (its pid kept in ``reap`` to be killed after the test), once its process runs its own
    command: a watch given its pid before the exec would read the forking parent's command line, or none."""
    sim = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reap.append(sim.pid)
    wait_for(lambda: psutil.Process(sim.pid).cmdline()[1:] == cmd[1:], 30, "the simulator's exec")
    return sim


def run_firstlight(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
                   preexec_fn: Callable[[], None] | None = None) -> Run:
    p = subprocess.run(firstlight_cmd(*args), capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
    return Run(p.returncode, p.stdout, p.stderr)


def children(pid: int) -> list[psutil.Process]:
    """The children of ``pid``; none once it is gone (a condition polled by wait_for must not raise)."""
    try:
        return psutil.Process(pid).children()
    except psutil.Error:
        return []


def launched_server(pid: int, timeout: float = 30) -> psutil.Process:
    """The server that firstlight (``pid``) launched: its child that leads a session of its own (the launch's
    ``setsid``). Not just any child, nor one by its command line: preflight's helpers and the watchdog stay in
    firstlight's session, and a child just forked shows firstlight's command line (which names the server's)
    until its exec: taken for the server, it failed a loaded fresh CI run once."""

    def server() -> psutil.Process | None:
        for p in children(pid):
            with contextlib.suppress(OSError):
                if os.getsid(p.pid) == p.pid:
                    return p
        return None

    found = wait_for(server, timeout, "the server firstlight launched (its child in a session of its own)")
    assert isinstance(found, psutil.Process)
    return found


def pids_in_group(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                out.append(p.pid)
        except (OSError, psutil.Error):
            continue
    return out


IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1")


def require(present: bool, what: str) -> None:
    """A real part the test needs (a binary, ../shared/logs, a package). Under CI (``CI`` is true or 1) its
    absence fails the run; elsewhere the test is skipped with the reason."""
    if present:
        return
    if IN_CI:
        pytest.fail(f"CI: {what} is missing (the setup must provide it)", pytrace=False)
    pytest.skip(f"{what} is missing")


# The CLI's own peak memory, read from /proc/self/status (VmHWM) as it exits. Not rusage: a child's ru_maxrss keeps
# the high-water mark of the process it was forked or vforked from (Linux carries it across exec), and a pytest
# worker late in a run is hundreds of MB (a 300 MB bound read 474 MiB).
_PEAK = """import atexit, sys
PEAK = sys.argv.pop(1)
def _peak():
    with open("/proc/self/status") as f, open(PEAK, "w") as out:
        out.write(next(line.split()[1] for line in f if line.startswith("VmHWM:")))
atexit.register(_peak)
sys.argv[0] = "firstlight"
from firstlight.cli import main
main()
"""


def firstlight_peak_cmd(peak: Path, *args: str) -> list[str]:
    """``firstlight ARGS`` that writes its own peak RSS (KiB) to ``peak`` as it exits."""
    return [sys.executable, "-c", _PEAK, str(peak), *args]


def _handled(sig: int) -> bool:
    return signal.getsignal(sig) not in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler, None)


# A test's threads may outlive it (a daemon thread still waiting when its test has ended, a driver slowed on a busy
# machine): what they send to this process must never reach the next test's run, whose handler would take a stale
# stop for its own. Each test's end moves the epoch (tests/conftest.py); a stop is sent only in the epoch it was
# asked in, checked and sent under one lock, so no test can end between the check and the send.
_EPOCH_LOCK = threading.RLock()
_epoch = 0


def current_epoch() -> int:
    """The running test's epoch: capture it in the test body, before a thread that will stop its run starts."""
    return _epoch


def end_epoch() -> None:
    """The test is over: its threads' stops are not sent from now on (tests/conftest.py, at each test's teardown)."""
    global _epoch
    with _EPOCH_LOCK:
        _epoch += 1


def signal_self(sig: int = signal.SIGTERM, within: float = 0.0, epoch: int | None = None) -> bool:
    """``sig`` to this process, as an operator's stop comes to a run going on in the main thread; only while a
    handler of the run's own is installed, waited for up to ``within`` seconds. Without one the default action
    would end the whole test process (pytest-xdist then reports the worker down): a run that already ended, or
    one whose signal installer has not run yet (a step taken before ``run()`` that wakes the thread sending the
    signal). ``epoch`` (:func:`current_epoch`, taken in the test body): never once that test has ended. Returns
    whether it was sent; a test whose run needed it fails on the run's outcome."""
    deadline = time.monotonic() + within
    while True:
        with _EPOCH_LOCK:
            if epoch is not None and epoch != _epoch:
                return False
            if _handled(sig):
                os.kill(os.getpid(), sig)
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def drive(steps: Callable[[], None], stop: Callable[[], None]) -> list[BaseException]:
    """``steps`` on a thread of their own (what a test does to a run going on in the main thread), then ``stop``
    whatever happened: a step that fails ends the run at once instead of leaving it running for ever, and its
    error is kept in the list returned, for the test to fail on. ``stop`` is skipped once the test has ended (its
    run ended first): a late stop would reach the next test's run."""
    errors: list[BaseException] = []
    epoch = current_epoch()

    def run() -> None:
        try:
            steps()
        except BaseException as e:
            errors.append(e)
        finally:
            with _EPOCH_LOCK:
                if epoch == _epoch:
                    stop()

    threading.Thread(target=run, name="test-driver", daemon=True).start()
    return errors


@pytest.fixture
def stand_in_engine() -> Iterator[int]:
    """A real process standing in for an engine's main process (a watch given ``--pid`` samples it), killed after."""
    p = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
    yield p.pid
    p.kill()
    p.wait(timeout=30)
