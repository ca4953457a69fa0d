"""The live journal followed: ``journalctl -f`` on a thread, its entries handed to each invocation's
subscribers, and the source that feeds one attempt's lines to a watch."""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from firstlight.logtext import LineSplitter
from firstlight.samplers.base import Guard, Sink
from firstlight.timeline import LogLine, Observation, ProcessSample, SourceNote

from .entries import (
    JournalEntry,
    JournalError,
    exit_code_of,
    manager_observations,
    oom_trace_of,
    parse_line,
)
from .journalctl import MAX_ENTRY_BYTES, bounded_lines, find_journalctl, is_journal_file, journalctl_argv, stderr_tail

MAX_BUFFERED_ENTRIES = 200_000  # per invocation, kept until an attempt asks for them
AGAIN_S = 1.0  # a reader that raised reads on after this, from the entry after the last one it handed out


@dataclass
class _InvocationLog:
    id: str
    first_t: float
    entries: deque[JournalEntry] = field(default_factory=lambda: deque(maxlen=MAX_BUFFERED_ENTRIES))
    subscribers: list[Callable[[JournalEntry], None]] = field(default_factory=list)


class JournalFollower:
    """Runs journalctl for one unit and hands its entries out by invocation.

    First it reads what the journal holds (from ``since``) and says so (``caught_up``), then it follows
    with ``-f --after-cursor`` from the last entry read, so nothing is read twice or missed in between.
    Entries are kept per invocation (bounded) until an attempt subscribes; ``stop()`` ends journalctl
    (TERM, then KILL) and nothing here waits forever.
    """

    def __init__(self, unit: str, journal_file: Path | None = None, since: float | None = None,
                 journalctl: str = "journalctl", clock: Callable[[], float] = time.time) -> None:
        self.unit, self.journal_file, self.since = unit, journal_file, since
        self.journalctl = journalctl
        self.clock = clock
        self.caught_up = threading.Event()
        self.error: str | None = None
        self.notes: deque[str] = deque(maxlen=16)
        self.escapes: deque[SourceNote] = deque(maxlen=16)  # what escaped the reader (its guard's notes)
        self._guard = Guard("journal", "journal reader", clock=clock)
        self._lock = threading.Condition()
        self._invocations: dict[str, _InvocationLog] = {}
        self._order: list[str] = []
        self._last_cursor: str | None = None
        self._last_arrival = 0.0
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._guard.run, args=(self._run, self.escapes.append),
                                        kwargs={"stop": self._stop, "again_s": AGAIN_S}, name="firstlight-journal",
                                        daemon=True)

    # -- control --
    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        with self._lock:
            proc = self._proc
        if proc is not None:
            _end(proc, timeout)
        self._thread.join(timeout)
        with self._lock:
            self._lock.notify_all()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    # -- what it has seen --
    def invocations(self) -> list[str]:
        with self._lock:
            return list(self._order)

    def first_time(self, invocation: str) -> float | None:
        with self._lock:
            inv = self._invocations.get(invocation)
            return inv.first_t if inv else None

    def exit_code(self, invocation: str) -> int | None:
        """The main process's exit code as systemd logged it for that invocation (None: not seen)."""
        with self._lock:
            inv = self._invocations.get(invocation)
            for e in reversed(inv.entries if inv else ()):
                is_exit, code = exit_code_of(e) if e.is_manager(self.unit) else (False, None)
                if is_exit:
                    return code
        return None

    def wait_caught_up(self, timeout: float) -> bool:
        return self.caught_up.wait(timeout)

    def wait_invocation(self, after: str | None, timeout: float,
                        cancel: threading.Event | None = None) -> str | None:
        """The first invocation that began after ``after`` (None: the latest one the journal held when
        caught up, else the first to appear), waiting up to ``timeout`` seconds, or until ``cancel`` is set."""
        deadline = time.monotonic() + timeout
        cancel = cancel or threading.Event()
        while not self.caught_up.wait(min(0.25, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline or cancel.is_set():
                break
        with self._lock:
            while True:
                found = self._next_after(after)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set() or cancel.is_set() or not self._thread.is_alive():
                    return None
                self._lock.wait(min(left, 0.25))

    def _next_after(self, after: str | None) -> str | None:
        if after is None:
            return self._order[-1] if self._order else None
        if after not in self._order:
            return None
        i = self._order.index(after)
        return self._order[i + 1] if i + 1 < len(self._order) else None

    def subscribe(self, invocation: str, callback: Callable[[JournalEntry], None]) -> None:
        """``callback`` gets the invocation's entries read so far, then each new one as it arrives."""
        with self._lock:
            inv = self._invocation(invocation, self.clock())
            for e in inv.entries:
                callback(e)
            inv.subscribers.append(callback)

    def unsubscribe(self, invocation: str, callback: Callable[[JournalEntry], None]) -> None:
        with self._lock:
            inv = self._invocations.get(invocation)
            if inv is not None and callback in inv.subscribers:
                inv.subscribers.remove(callback)

    def quiet_for(self, seconds: float, timeout: float) -> None:
        """Return once no entry arrived for ``seconds`` (or after ``timeout``): the journal has delivered
        what a process wrote just before it died."""
        deadline = time.monotonic() + timeout
        self.wait_caught_up(timeout)
        while time.monotonic() < deadline:
            with self._lock:
                since_last = time.monotonic() - self._last_arrival
            if since_last >= seconds:
                return
            self._stop.wait(min(seconds - since_last, deadline - time.monotonic(), 0.1))

    # -- the reader --
    def _invocation(self, inv_id: str, t: float) -> _InvocationLog:
        inv = self._invocations.get(inv_id)
        if inv is None:
            inv = self._invocations[inv_id] = _InvocationLog(inv_id, t)
            self._order.append(inv_id)
            self._lock.notify_all()
        return inv

    def _dispatch(self, e: JournalEntry) -> None:
        inv_id = e.invocation_for(self.unit)
        with self._lock:
            self._last_arrival = time.monotonic()
            if e.cursor:
                self._last_cursor = e.cursor
            if inv_id is None:
                if not e.is_manager(self.unit) or not self._order:
                    return
                inv_id = self._order[-1]
            inv = self._invocation(inv_id, e.t)
            inv.entries.append(e)
            for cb in list(inv.subscribers):
                cb(e)

    def _note(self, text: str) -> None:
        with self._lock:
            self.notes.append(text)

    def _run(self) -> None:
        try:
            journalctl = find_journalctl(self.journalctl)
            if self.journal_file is not None and not is_journal_file(self.journal_file):
                raise JournalError(f"{self.journal_file} is not a journal file (a journalctl -o json dump can be "
                                   "replayed, not followed)")
            if self._pass(journalctl, follow=False) and not self._stop.is_set():
                self.caught_up.set()
                self._pass(journalctl, follow=True)
        except (JournalError, OSError) as e:
            self.error = str(e)
        finally:
            self.caught_up.set()
            with self._lock:
                self._lock.notify_all()

    def _pass(self, journalctl: str, follow: bool) -> bool:
        since = None if self._last_cursor else self.since
        argv = journalctl_argv(self.unit, self.journal_file, follow=follow, since=since,
                               after_cursor=self._last_cursor, journalctl=journalctl)
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            with self._lock:
                self._proc = proc
            assert proc.stdout is not None
            long_noted = False

            def on_long(n: int) -> None:
                nonlocal long_noted
                if not long_noted:
                    long_noted = True
                    self._note(f"a journal entry of {n} bytes was skipped (over {MAX_ENTRY_BYTES >> 20} MiB)")

            for raw in bounded_lines(proc.stdout, on_long):
                e = parse_line(raw)
                if e is not None:
                    self._dispatch(e)
            proc.stdout.close()
            rc = _end(proc, 3.0)
            with self._lock:
                self._proc = None
            if rc != 0 and not self._stop.is_set():
                raise JournalError(f"journalctl stopped: {stderr_tail(err) or f'exit {rc}'}")
        return True


def _end(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """Stop a journalctl we started: TERM, then KILL; never wait longer than ``timeout`` in all."""
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.terminate()
        try:
            return proc.wait(timeout / 2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                proc.kill()
    try:
        return proc.wait(timeout / 2)
    except subprocess.TimeoutExpired:
        return None


class JournalSource:
    """One attempt's view of the journal: the lines of one invocation as LogLines with the journal's own
    time, systemd's messages about it as notes, its main-process exit (from systemd's message, or because
    the next invocation began) as a ProcessSample. Start/stop like a sampler; ``sync`` lets the session
    read a dying process's last lines before it judges the exit."""

    name = "journal"

    def __init__(self, follower: JournalFollower, invocation: str,
                 echo: Callable[[str, str], None] | None = None) -> None:
        self.follower, self.invocation, self.echo = follower, invocation, echo
        self._sink: Sink | None = None
        self._lineno = 0
        self._splitter = LineSplitter()
        self._exited = False
        self._oom: list[str] = []  # systemd's OOM-kill messages, sent with the exit
        self._noted_omitted = False
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._told = self._escaped = 0  # the follower's problems and escapes handed on so far
        self._guard = Guard("journal", "the journal's watcher", clock=follower.clock)

    def start(self, sink: Sink) -> None:
        self._sink = sink
        self.follower.subscribe(self.invocation, self._on_entry)
        self._watcher = threading.Thread(target=self._guard.run, args=(self._watch_next, self._put),
                                         kwargs={"stop": self._stop, "again_s": AGAIN_S},
                                         name="firstlight-journal-next", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        self.follower.unsubscribe(self.invocation, self._on_entry)

    def sync(self, timeout: float) -> None:
        self.follower.quiet_for(0.25, timeout)

    def _put(self, obs: Observation) -> None:
        if self._sink is not None and not self._stop.is_set():
            self._sink(obs)

    def _on_entry(self, e: JournalEntry) -> None:
        if e.is_engine(self.follower.unit):
            if e.message is None and not self._noted_omitted:
                self._noted_omitted = True
                self._put(SourceNote(e.t, "journal", "journalctl left out a message over 4 KiB (null in its "
                                                     "JSON); its line is counted, its text is lost"))
            for line in e.lines():
                self._line(e.t, line)
            return
        trace = oom_trace_of(e)
        if trace is not None and trace not in self._oom:
            self._oom.append(trace)
        for obs in manager_observations(e):
            if isinstance(obs, ProcessSample):
                if self._exited:
                    continue
                self._exited = True
                obs = dataclasses.replace(obs, oom=tuple(self._oom))
            self._put(obs)

    def _line(self, t: float, text: str) -> None:
        """One MESSAGE line, peeled and split as every log line is (``LineSplitter.feed_text``)."""
        for e in self._splitter.feed_text(text):
            if not e.final:
                self._put(LogLine(t, e.text, "journal", self._lineno + 1, final=False))
                continue
            self._lineno += 1
            self._put(LogLine(t, e.text, "journal", self._lineno))
            if self.echo is not None:
                self.echo("journal", e.text)

    def _watch_next(self) -> None:
        """A next invocation means systemd is done with this one: its main process is gone. Also says, once,
        when journalctl could not read the journal."""
        while not self._stop.is_set():
            running = self.follower.running  # before reading its problems: an error is set before it stops
            problems = [*self.follower.notes, *([self.follower.error] if self.follower.error else [])]
            for text in problems[self._told:]:
                self._put(SourceNote(self.follower.clock(), "journal", text))
            self._told = len(problems)
            escapes = list(self.follower.escapes)
            for note in escapes[self._escaped:]:
                self._put(note)
            self._escaped = len(escapes)
            if not running:
                return
            nxt = self.follower.wait_invocation(self.invocation, 0.5)
            if nxt is not None:
                if not self._exited:
                    self._exited = True
                    t = self.follower.first_time(nxt) or self.follower.clock()
                    self._put(SourceNote(t, "systemd", f"invocation {nxt} of {self.follower.unit} began: the "
                                                       "process of this one is gone"))
                    self._put(ProcessSample(t, alive=False, exit_code=None))
                return
