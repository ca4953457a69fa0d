"""The sidecar loop (``watch --serve-readiness``): watch one start after another until stopped by a signal.

A Kubernetes sidecar must not exit after a verdict: it keeps serving the last state (``/livez`` 503 after
``hung`` or ``failed``, so the kubelet restarts the engine container) and watches the next start when the
engine comes back. What "comes back" means depends on what the sidecar can see:

- the engine's processes (``--pid-from REGEX``, or ``--pid`` whose command line is then looked for again): with
  ``shareProcessNamespace: true`` a sidecar sees the engine container's processes, but PIDs are not known when
  the manifest is written and change on every restart, so the engine is found by its command line, like
  ``pgrep -f -n``: the newest match, and a new start is a match created after the previous start's process
  (an older process whose command line happens to match, a decoy, is never taken);
- only the URL: a new start is the port closing and opening again.

Each start is one ``run_start(target)`` call (one Session: one verdict, one run in the history). While it
serves, this loop runs the serving checks (``serving(outcome, target)``: :mod:`firstlight.runner.serving`) and
watches that the engine is still there (the process alive, or the port accepting a connection), and tells the
reporters when serving ends; it decides nothing about any one start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from firstlight.probes.ladder import split_url
from firstlight.report.base import Reporter
from firstlight.result import RunResult
from firstlight.runner.outcome import Outcome
from firstlight.runner.restarts import Loop, Step
from firstlight.runner.serving import ServingWatch
from firstlight.samplers.process import zombie_exit_code
from firstlight.vocab import INTERRUPTED, SERVING_VERDICTS, TIMEOUT
from firstlight.wire.client import port_open


@dataclass(frozen=True)
class Target:
    """One start to watch: the engine's top process (None when only the URL is known)."""

    pid: int | None = None
    create_time: float | None = None
    command: tuple[str, ...] = ()
    # the log file's size when the wait for this start began, where the start came after it (0: no file then):
    # the start's lines in a log without dates begin there, however late it was found
    log_size: int | None = None

    @classmethod
    def of(cls, pid: int) -> Target | None:
        try:
            p = psutil.Process(pid)
            return cls(pid, p.create_time(), tuple(p.cmdline()))
        except psutil.Error:
            return None

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            p = psutil.Process(self.pid)
            return p.create_time() == self.create_time and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


def _own_lineage() -> set[int]:
    """This process and its ancestors: their command lines may contain the pattern (``sh -c 'firstlight watch
    --pid-from "vllm serve"'``), and they are never the engine."""
    out = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        out |= {p.pid for p in psutil.Process().parents()}
    return out


class ProcessMatcher:
    """The engine's top process, found by a regular expression over its command line (joined by spaces, as
    ``pgrep -f`` sees it). Of the matching processes, those whose parent also matches are skipped (an engine's
    workers often share its command line), and of the rest the one whose process tree listens on the engine's
    port wins, else the newest (``pgrep -n``): an older process that matches by chance is not the start being
    watched, and once the engine listens, neither is a newer one (a ``tail -f`` whose arguments match)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.regex = re.compile(pattern)

    @classmethod
    def exact(cls, command: list[str]) -> ProcessMatcher:
        """The same command line again (``watch --pid N``: the next start of the process N was)."""
        return cls("^" + re.escape(" ".join(command)) + "$")

    def find(self, port: int | None = None) -> Target | None:
        own = _own_lineage()
        found: dict[int, tuple[float, int, tuple[str, ...]]] = {}
        for p in psutil.process_iter(["pid", "ppid", "cmdline", "create_time", "status"]):
            info = p.info
            cmd = info.get("cmdline")
            if not cmd or info["pid"] in own or info.get("status") == psutil.STATUS_ZOMBIE:
                continue
            if self.regex.search(" ".join(cmd)):
                found[info["pid"]] = (info.get("create_time") or 0.0, info.get("ppid") or 0, tuple(cmd))
        tops = [(ct, pid, cmd) for pid, (ct, ppid, cmd) in found.items() if ppid not in found]
        if not tops:
            return None
        if port is not None:
            for ct, pid, cmd in sorted(tops, reverse=True):
                if _listens(pid, port):
                    return Target(pid, ct, cmd)
        ct, pid, cmd = max(tops)
        return Target(pid, ct, cmd)


def _listens(pid: int, port: int) -> bool:
    """Does the process, or one below it, listen on ``port`` (TCP)?"""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    for p in procs:
        try:
            conns = p.net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns):
            return True
    return False


class Rewatch:
    """The sidecar's starts (runner/restarts.py's ``Starts``): ``run_start`` for each, and between them, the
    served engine's end and the next start.

    ``run()`` returns only when a signal (SIGINT/SIGTERM) stops it (or ``stop`` is set): an ``interrupted``
    Outcome carrying the last start's summary.
    """

    def __init__(self, run_start: Callable[[Target], Outcome], reporter: Reporter, url: str, *,
                 matcher: ProcessMatcher | None = None, first: Target | None = None, log_file: Path | None = None,
                 engine: str = "generic", poll_s: float = 0.25, scan_s: float = 1.0,
                 clock: Callable[[], float] = time.time,
                 serving: Callable[[Outcome, Target], ServingWatch | None] | None = None) -> None:
        self.run_start, self.reporter, self.url, self.engine = run_start, reporter, url, engine
        self.matcher, self.first, self.log_file = matcher, first, log_file
        self.poll_s, self.scan_s, self.clock = poll_s, scan_s, clock
        self.serving = serving
        self.stop = threading.Event()
        self.count = 0  # starts watched
        self._between = "between starts"  # what the loop was doing when a signal came
        self.started_at = clock()
        self._port_s = min(1.0, poll_s * 4)  # a port check's bound: a hung connect never holds the loop

    def _port_open(self) -> bool:
        return port_open(self.url, self._port_s)

    def run(self) -> Outcome:
        loop = Loop(self)
        last = loop.run()
        self.count = loop.count
        if last is not None and last.verdict == INTERRUPTED:
            return last  # a start's own verdict: its session took the signal
        return self._stopped(last, loop.signal)

    # -- the loop's three steps (runner/restarts.py) ----------------------------------------------------------
    def next_start(self, previous: Target | None) -> Target | None:
        if previous is None and self.first is not None:
            return self.first
        return self._next_target(previous)

    def watch(self, start: Target) -> Outcome:
        return self.run_start(start)

    def after(self, start: Target, outcome: Outcome) -> tuple[Step, Outcome]:
        if outcome.verdict in SERVING_VERDICTS:
            return Step.NEXT, self._while_serving(start, outcome)
        if outcome.verdict == TIMEOUT and (start.pid is None or start.alive()):
            return Step.AGAIN, outcome  # no verdict yet within --timeout: the same start, watched again
        return Step.NEXT, outcome

    # -- between starts -------------------------------------------------------------------------------------
    def _next_target(self, previous: Target | None) -> Target | None:
        """Wait for the next start: a new matching process, or (by URL) the port seen closed, then open."""
        if self.matcher is not None:
            self.reporter.message(f"waiting for the engine: a process matching {self.matcher.pattern!r}"
                                  + (f" other than pid {previous.pid}" if previous and previous.pid else ""))
            # the log's size before the first scan: a start that a later scan finds first began after it (process
            # creation times are too coarse against the wall clock to tell)
            log_size, absent = self._log_size(), False
            while not self.stop.is_set():
                found = self.matcher.find(split_url(self.url)[1])
                if found is not None and (previous is None or self._later(found, previous)):
                    self._wait_log_fresh(found.create_time or self.clock())
                    return dataclasses.replace(found, log_size=log_size) if absent else found
                absent = True  # this scan did not find it: the one that does, found it after the wait began
                # a scan reads every process's command line (~2 % of a core per 100 processes at 1 Hz); a start
                # takes minutes, so one scan a second finds it soon enough
                self.stop.wait(max(self.poll_s, self.scan_s))
            return None
        if previous is None:
            return Target()
        self.reporter.message(f"waiting for the next start: {self.url} to close and open again")
        seen_closed = False
        while not self.stop.is_set():
            is_open = self._port_open()
            seen_closed = seen_closed or not is_open
            if seen_closed and is_open:
                self._wait_log_fresh(self.clock() - 1.0)
                return Target()
            self.stop.wait(self.poll_s)
        return None

    @staticmethod
    def _later(found: Target, previous: Target) -> bool:
        """Another process, created no earlier than the previous start's (creation times have 10 ms ticks)."""
        return found.pid != previous.pid and (found.create_time or 0.0) >= (previous.create_time or 0.0)

    def _log_size(self) -> int | None:
        """The log file's size now (0: no file yet); None without a regular log file."""
        if self.log_file is None:
            return None
        try:
            st = self.log_file.stat()
        except OSError:
            return 0
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def _wait_log_fresh(self, since: float, limit_s: float = 5.0) -> None:
        """A log file shared by every start (a truncating ``tee``) may still hold the last start's lines, its
        fatal error too: give the new start a moment (bounded) to truncate or write it first."""
        if self.log_file is None:
            return
        deadline = time.monotonic() + limit_s
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                if self.log_file.stat().st_mtime >= since:
                    return
            except OSError:
                return  # not there yet: nothing old to re-read
            self.stop.wait(min(self.poll_s, 0.1))

    def _while_serving(self, target: Target, outcome: Outcome) -> Outcome:
        """Serving: check that the engine is still there (cheaply, never a generation); when it goes, say so."""
        closed_in_a_row = 0
        self._between = "while serving"
        watch = self.serving(outcome, target) if self.serving is not None else None
        if watch is not None:
            watch.start()
        try:
            while not self.stop.is_set():
                if watch is not None:
                    watch.step()
                if target.pid is not None:
                    gone, signal_name, what = not target.alive(), "process", f"server pid {target.pid} exited"
                    daemon = self._daemon_serving(target) if gone else None
                    if daemon is not None:  # a launcher that left the real server running: follow the server
                        self.reporter.message(f"pid {target.pid} ended; pid {daemon.pid} still serves "
                                              f"{self.url} (a process it left behind): watching that one")
                        target = daemon
                        if watch is not None:
                            watch.stop()
                            watch = self.serving(outcome, target) if self.serving is not None else None
                            if watch is not None:
                                watch.start()
                        continue
                else:
                    is_open = self._port_open()
                    closed_in_a_row = 0 if is_open else closed_in_a_row + 1
                    gone = closed_in_a_row >= 2  # one refused connect may be a blip; two in a row is a closed port
                    signal_name, what = "probe:port", f"{self.url} stopped accepting connections"
                if gone:
                    # Named as before READY where it can be known: the wait status of a zombie not yet reaped
                    # by its parent (a SIGSEGV after READY was "server pid N exited")
                    code = zombie_exit_code(target.pid) if target.pid is not None else None
                    ended = (outcome.result.died_serving(code, self.clock(), pid=target.pid) if code is not None
                             else outcome.result.ended_serving(signal_name, what, self.clock()))
                    self.reporter.summary(ended)
                    return Outcome(ended, ended.exit_code())
                self.stop.wait(self.poll_s)
            return outcome
        finally:
            if watch is not None:
                watch.stop()
            if not self.stop.is_set():  # stopped while serving: the summary says so
                self._between = "between starts"

    def _daemon_serving(self, ended: Target) -> Target | None:
        """The process that now listens on the engine's port, if another than the one that ended: the server a
        launcher daemonized (``sh -c 'server &'``, a double fork) before it exited."""
        port = split_url(self.url)[1]
        try:
            conns = psutil.net_connections(kind="tcp")
        except (psutil.Error, OSError):
            return None  # not allowed to see other users' sockets: the end stands
        for c in conns:
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid and c.pid != ended.pid:
                found = Target.of(c.pid)
                if found is not None and found.alive():
                    return found
        return None

    def _stopped(self, last: Outcome | None, signal_name: str | None) -> Outcome:
        now, why = self.clock(), signal_name or "stop"
        if last is None:
            result = RunResult.never_started(self.url, self.engine, self.started_at, why, now)
        else:
            result = last.result.interrupted(why, now, self._between)
        self.reporter.summary(result)
        return Outcome(result, result.exit_code())
