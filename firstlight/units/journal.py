"""The unit's journal: entries as ``journalctl -o json`` writes them, one invocation's lines, followed live.

We run ``journalctl`` rather than bind libsystemd: it is on every systemd machine, it reads a journal file
copied from another machine (``--file``) and it follows one (``-f``) with no daemon; systemd-python would need
a C build for the same API. JSON as journalctl writes it (journalctl(1), "json"):

* a field over 4096 bytes is ``null`` (unless ``--all``: we pass it, but a saved dump may have nulls);
* a field repeated in one entry is an array of its values;
* a value that is not valid UTF-8 (or not printable) is an array of byte numbers.

``MESSAGE`` may be any of those. An entry's time is its ``__REALTIME_TIMESTAMP`` (microseconds since the
epoch, when journald received it). ``journalctl -u UNIT`` also returns systemd's own messages about the unit
(``UNIT=``, with its ``INVOCATION_ID=``): those are not the engine's lines, but a main-process exit among them
is evidence of how an attempt ended. ``_SYSTEMD_INVOCATION_ID`` tells one start of the unit from the next, so
an earlier attempt's lines never count for this one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from firstlight.deaths import describe_exit
from firstlight.files import open_regular
from firstlight.logtext import LineSplitter, strip_ansi
from firstlight.samplers.base import Sink
from firstlight.timeline import LogLine, Observation, ProcessSample, SourceNote

JOURNAL_MAGIC = b"LPKSHHRH"  # the first bytes of a journal file (systemd's journal-def.h)
OMITTED = "[journal: a MESSAGE over 4 KiB, omitted by journalctl -o json without --all]"
MAX_ENTRY_BYTES = 16 << 20  # one JSON entry; a longer one is skipped (with a note), memory stays bounded
MAX_BUFFERED_ENTRIES = 200_000  # per invocation, kept until an attempt asks for them
STDERR_KEEP = 4096
NO_INVOCATION = ""  # entries of a systemd too old to stamp _SYSTEMD_INVOCATION_ID (< 232)

# systemd's catalog ids (sd-messages.h) of the manager's messages about a unit that we interpret
MSG_PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15"
MSG_UNIT_FAILURE_RESULT = "d9b373ed55a64feb8242e02dbe79a49c"
MSG_UNIT_OUT_OF_MEMORY = "fe6faa94e7774663a0da52717891d8ef"  # "... killed by the OOM killer."
_EXIT_TEXT = re.compile(r"Main process exited, code=(?P<code>\w+), status=(?P<status>\d+)")
_SIGNALS = {s.name: int(s) for s in signal.Signals}
_MAX_DIGITS = 20  # __REALTIME_TIMESTAMP and EXIT_STATUS are 64-bit at most
KEPT_FIELDS = ("MESSAGE_ID", "EXIT_CODE", "EXIT_STATUS", "UNIT_RESULT", "N_RESTARTS", "_PID", "PRIORITY")


class JournalError(Exception):
    """journalctl is missing, or could not read the journal: one line for the user."""


# --- the JSON quirks -------------------------------------------------------------------------------------


def _is_bytes(v: list[Any]) -> bool:
    return bool(v) and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 256 for x in v)


def field_values(value: Any) -> list[str | None]:
    """Every value of one field: ``None`` for one omitted (over 4 KiB), bytes decoded as UTF-8 with
    replacement (never fatal), a repeated field's values in order."""
    if value is None:
        return [None]
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        if _is_bytes(value):
            return [bytes(value).decode("utf-8", "replace")]
        out: list[str | None] = []
        for v in value:
            out.extend(field_values(v))
        return out
    return [str(value)]


def field_text(value: Any) -> str | None:
    """The first value of a field (identifiers, numbers: a repeat is the same value again)."""
    return field_values(value)[0]


def message_text(value: Any) -> str | None:
    """MESSAGE as one text (a repeated MESSAGE's values are joined as lines); ``None`` when omitted."""
    parts = [v for v in field_values(value) if v is not None]
    if not parts:
        return None
    return "\n".join(parts)


@dataclass(frozen=True)
class JournalEntry:
    t: float  # __REALTIME_TIMESTAMP, seconds
    message: str | None  # None: journalctl left it out (over 4 KiB)
    unit: str | None = None  # _SYSTEMD_UNIT: the unit whose process wrote the entry
    invocation: str | None = None  # _SYSTEMD_INVOCATION_ID
    about_unit: str | None = None  # UNIT / USER_UNIT / COREDUMP_UNIT: systemd writing about a unit
    about_invocation: str | None = None  # INVOCATION_ID / USER_INVOCATION_ID of that message
    cursor: str | None = None
    fields: dict[str, str] = field(default_factory=dict)  # KEPT_FIELDS present in the entry

    def is_engine(self, unit: str) -> bool:
        """Written by the unit's own processes (stdout/stderr, syslog): the engine's log."""
        return self.unit == unit

    def is_manager(self, unit: str) -> bool:
        """systemd's own message about the unit (started, exited, failed, restart scheduled)."""
        return self.about_unit == unit and self.unit != unit

    def invocation_for(self, unit: str) -> str | None:
        """The invocation this entry belongs to for ``unit``; None when it is not about ``unit``."""
        if self.is_engine(unit):
            return self.invocation or NO_INVOCATION
        if self.is_manager(unit):
            return self.about_invocation  # may be None: attributed to the latest invocation
        return None

    def lines(self) -> list[str]:
        """The message as log lines (a multi-line message is several lines; ANSI escapes removed)."""
        text = OMITTED if self.message is None else self.message
        text = text.rstrip("\n")
        return [strip_ansi(line) for line in text.split("\n")] if text else [""]


def parse_entry(obj: Any) -> JournalEntry | None:
    """One ``journalctl -o json`` object; None when it is not an entry (no usable timestamp)."""
    if not isinstance(obj, dict):
        return None
    raw = field_text(obj.get("__REALTIME_TIMESTAMP")) or ""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_DIGITS:  # 400 digits: no time, no float
        return None
    t = int(raw) / 1e6

    def get(*names: str) -> str | None:
        for name in names:
            if name in obj:
                return field_text(obj[name])
        return None

    kept = {k: v for k in KEPT_FIELDS if k in obj and (v := field_text(obj[k])) is not None}
    def shown(*names: str) -> str | None:  # ids that are printed: bidi controls and NUL neutralised
        value = get(*names)
        return strip_ansi(value) if value is not None else None

    return JournalEntry(t, message_text(obj.get("MESSAGE")), get("_SYSTEMD_UNIT"), shown("_SYSTEMD_INVOCATION_ID"),
                        get("UNIT", "USER_UNIT", "COREDUMP_UNIT"), shown("INVOCATION_ID", "USER_INVOCATION_ID"),
                        get("__CURSOR"), kept)


def parse_line(line: bytes | str) -> JournalEntry | None:
    """One line of ``journalctl -o json`` output; None for a line that is not a JSON entry."""
    try:
        return parse_entry(json.loads(line))
    except (ValueError, RecursionError):
        return None


def exit_code_of(entry: JournalEntry) -> tuple[bool, int | None]:
    """(is a main-process exit, code): ``code=exited`` gives the status, ``killed``/``dumped`` minus the
    signal number (as a Popen return code reads)."""
    text = entry.message or ""
    if entry.fields.get("MESSAGE_ID") == MSG_PROCESS_EXIT and "Main process" in text:
        how, status = entry.fields.get("EXIT_CODE"), entry.fields.get("EXIT_STATUS")
    else:
        m = _EXIT_TEXT.search(text)
        if m is None:
            return False, None
        how, status = m["code"], m["status"]
    status = (status or "").strip().partition("/")[0]  # "11", "11/SEGV", or a name: "SEGV" (an exec env's)
    if len(status) > _MAX_DIGITS:
        return True, None  # an exit, its status unreadable (5,000 digits is no status)
    if status.isdigit():
        code = int(status)
    elif how != "exited" and _SIGNALS.get(f"SIG{status.upper().removeprefix('SIG')}") is not None:
        code = _SIGNALS[f"SIG{status.upper().removeprefix('SIG')}"]
    else:
        return True, None
    # killed/dumped: a signal, never a positive exit code (killed by 9 is not "exit code 9")
    return True, (code if how == "exited" else -code)


def oom_trace_of(entry: JournalEntry) -> str | None:
    """systemd's word that the kernel's OOM killer hit the unit, as evidence (not judged here)."""
    text = (entry.message or "").strip()
    if entry.fields.get("UNIT_RESULT") == "oom-kill":
        return f"systemd: {text or 'Failed with result'} (Result=oom-kill)"
    if entry.fields.get("MESSAGE_ID") == MSG_UNIT_OUT_OF_MEMORY or "killed by the OOM killer" in text:
        return f"systemd: {text or 'a process of this unit has been killed by the OOM killer'}"
    return None


def manager_observations(entry: JournalEntry) -> list[Observation]:
    """systemd's message about the unit as observations: a main-process exit is a ProcessSample (the
    process is gone, with its code), anything else a note."""
    text = (entry.message or "").strip()
    is_exit, code = exit_code_of(entry)
    out: list[Observation] = [SourceNote(entry.t, "systemd", text)] if text else []
    if is_exit:
        out.append(ProcessSample(entry.t, alive=False, exit_code=code))
    return out


# --- journalctl ------------------------------------------------------------------------------------------


def is_journal_file(path: Path) -> bool:
    """A binary journal file (else: a saved ``journalctl -o json`` dump)."""
    with open_regular(path) as f:  # a FIFO or a device is refused, never waited on in open()
        return f.read(len(JOURNAL_MAGIC)) == JOURNAL_MAGIC


def journalctl_argv(unit: str, journal_file: Path | None = None, *, follow: bool = False,
                    since: float | None = None, after_cursor: str | None = None,
                    output_fields: Iterable[str] = (), journalctl: str = "journalctl") -> list[str]:
    """``journalctl [--file F] --unit=UNIT -o json --all ...``. ``--file`` gets an absolute path: journalctl 252
    cannot follow (``-f``) a bare file name ("Failed to get journal fd: Destination address required")."""
    argv = [journalctl]
    if journal_file is not None:
        argv += ["--file", str(Path(journal_file).resolve())]
    argv += [f"--unit={unit}", "-o", "json", "--all", "--no-pager", "-q"]  # one word: never read as an option
    if follow:
        argv += ["-f", "--no-tail"]
    if after_cursor:
        argv += ["--after-cursor", after_cursor]
    elif since is not None:
        argv += ["--since", f"@{since:.6f}"]
    fields = list(output_fields)
    if fields:
        argv += ["--output-fields", ",".join(fields)]
    return argv


def find_journalctl(journalctl: str = "journalctl") -> str:
    found = shutil.which(journalctl)
    if found is None:
        raise JournalError(f"{journalctl} not found (it comes with systemd: apt-get install systemd)")
    return found


def _bounded_lines(stream: IO[bytes], on_long: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """Lines of a pipe, each at most MAX_ENTRY_BYTES (a longer one is skipped whole): memory stays bounded."""
    fd = stream.fileno()
    buf = bytearray()
    skipping = 0
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            return
        if not data:
            return
        buf += data
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            if skipping:
                if on_long is not None:
                    on_long(skipping + nl - start)
                skipping = 0
            else:
                yield bytes(buf[start:nl])
            start = nl + 1
        del buf[:start]
        if len(buf) > MAX_ENTRY_BYTES:
            skipping += len(buf)
            buf.clear()


def _stderr_tail(f: IO[bytes]) -> str:
    f.seek(0)
    text = f.read()[-STDERR_KEEP:].decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else ""


def read_entries(journal_file: Path | None, unit: str, *, since: float | None = None,
                 output_fields: Iterable[str] = (), journalctl: str = "journalctl") -> Iterator[JournalEntry]:
    """The unit's entries now in the journal (or in a file: a journal file, or a ``journalctl -o json``
    dump), in journal order, streamed."""
    if journal_file is not None and not is_journal_file(journal_file):
        with open_regular(journal_file) as f:
            for raw in _bounded_lines(f):
                e = parse_line(raw)
                if e is not None and e.invocation_for(unit) is not None and (since is None or e.t >= since):
                    yield e
        return
    argv = journalctl_argv(unit, journal_file, since=since, output_fields=output_fields,
                           journalctl=find_journalctl(journalctl))
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            for raw in _bounded_lines(proc.stdout):
                e = parse_line(raw)
                if e is not None:
                    yield e
        finally:
            proc.stdout.close()
            if proc.poll() is None:
                proc.terminate()
            rc = proc.wait(timeout=10)
        if rc != 0:
            raise JournalError(f"journalctl could not read the journal: {_stderr_tail(err) or f'exit {rc}'}")


# --- invocations, for replay -----------------------------------------------------------------------------


@dataclass
class Invocation:
    id: str
    first_t: float
    last_t: float
    lines: int = 0  # engine entries
    exit_code: int | None = None  # from systemd's "Main process exited" message, if any
    exited: bool = False
    exit_t: float | None = None  # when (read with the lines, for replay)
    oom: list[str] = field(default_factory=list)  # systemd's OOM-kill messages about it

    def ending(self) -> ProcessSample | None:
        """The main process's end as an observation, once the lines were read (replay)."""
        if not self.exited or self.exit_t is None:
            return None
        return ProcessSample(self.exit_t, alive=False, exit_code=self.exit_code, oom=tuple(self.oom))

    def describe(self) -> str:
        shown = strip_ansi(self.id) if self.id else "(no invocation id)"  # server-written: made safe to show
        how = "" if not self.exited else f", main process {describe_exit(self.exit_code)}"
        began = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.first_t))
        return f"invocation {shown}: {self.lines} lines from {began} UTC{how}"


def list_invocations(entries: Iterable[JournalEntry], unit: str) -> list[Invocation]:
    """The unit's invocations in the order they began; systemd's messages without an id count for the
    latest one."""
    found: dict[str, Invocation] = {}
    last: Invocation | None = None
    for e in entries:
        inv_id = e.invocation_for(unit)
        if inv_id is None and not e.is_manager(unit):
            continue
        inv = found.get(inv_id) if inv_id is not None else last
        if inv is None:
            if inv_id is None:
                continue
            inv = found[inv_id] = Invocation(inv_id, e.t, e.t)
        last = inv
        inv.last_t = max(inv.last_t, e.t)
        if e.is_engine(unit):
            inv.lines += 1
        else:
            is_exit, code = exit_code_of(e)
            if is_exit:
                inv.exited, inv.exit_code = True, code
    return list(found.values())


def pick_invocation(invocations: list[Invocation], wanted: str | None, unit: str) -> Invocation:
    """The last invocation, or the one asked for (its id, or an unambiguous prefix of 8+ characters)."""
    if not invocations:
        raise JournalError(f"no entries of {unit} in the journal")
    if wanted is None:
        started = [i for i in invocations if i.lines] or invocations
        return started[-1]
    wanted = wanted.strip().lower().replace("-", "")
    hits = [i for i in invocations if i.id == wanted or (len(wanted) >= 8 and i.id.startswith(wanted))]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(i.id or "(none)" for i in invocations[-5:])
    if not hits:
        raise JournalError(f"no invocation {wanted} of {unit} in the journal (last ones: {known})")
    raise JournalError(f"invocation prefix {wanted} is ambiguous for {unit} ({known})")


_LIST_FIELDS = ("_SYSTEMD_UNIT", "_SYSTEMD_INVOCATION_ID", "UNIT", "INVOCATION_ID", "USER_UNIT",
                "USER_INVOCATION_ID", "MESSAGE_ID", "EXIT_CODE", "EXIT_STATUS")


def journal_lines(journal_file: Path, unit: str, invocation: str | None = None,
                  journalctl: str = "journalctl") -> tuple[Invocation, list[Invocation], Iterator[tuple[float, str]]]:
    """For replay: the chosen invocation (the last one by default), all of them, and that invocation's engine
    lines as (journal time, text) pairs, streamed. Two passes over the journal (the ids first, with only the
    fields that name them), so a long journal is never held in memory."""
    invocations = list_invocations(read_entries(journal_file, unit, output_fields=_LIST_FIELDS,
                                                journalctl=journalctl), unit)
    chosen = pick_invocation(invocations, invocation, unit)

    def pairs() -> Iterator[tuple[float, str]]:
        """The lines; systemd's messages about the invocation (its exit, an OOM kill) go to ``chosen``."""
        for e in read_entries(journal_file, unit, since=chosen.first_t, journalctl=journalctl):
            if e.is_engine(unit) and (e.invocation or NO_INVOCATION) == chosen.id:
                for line in e.lines():
                    yield e.t, line
            elif e.is_manager(unit) and e.about_invocation == chosen.id:
                is_exit, code = exit_code_of(e)
                if is_exit and chosen.exit_t is None:
                    chosen.exited, chosen.exit_code, chosen.exit_t = True, code, e.t
                trace = oom_trace_of(e)
                if trace is not None and trace not in chosen.oom:
                    chosen.oom.append(trace)

    return chosen, invocations, pairs()


# --- following the live journal --------------------------------------------------------------------------


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
        self._lock = threading.Condition()
        self._invocations: dict[str, _InvocationLog] = {}
        self._order: list[str] = []
        self._last_cursor: str | None = None
        self._last_arrival = 0.0
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._run, name="firstlight-journal", daemon=True)

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

    def wait_invocation(self, after: str | None, timeout: float) -> str | None:
        """The first invocation that began after ``after`` (None: the latest one the journal held when
        caught up, else the first to appear), waiting up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        self.wait_caught_up(timeout)
        with self._lock:
            while True:
                found = self._next_after(after)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set() or not self._thread.is_alive():
                    return None
                self._lock.wait(min(left, 0.5))

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

            for raw in _bounded_lines(proc.stdout, on_long):
                e = parse_line(raw)
                if e is not None:
                    self._dispatch(e)
            proc.stdout.close()
            rc = _end(proc, 3.0)
            with self._lock:
                self._proc = None
            if rc != 0 and not self._stop.is_set():
                raise JournalError(f"journalctl stopped: {_stderr_tail(err) or f'exit {rc}'}")
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

    def start(self, sink: Sink) -> None:
        self._sink = sink
        self.follower.subscribe(self.invocation, self._on_entry)
        self._watcher = threading.Thread(target=self._watch_next, name="firstlight-journal-next", daemon=True)
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
        told = 0
        while not self._stop.is_set():
            running = self.follower.running  # before reading its problems: an error is set before it stops
            problems = [*self.follower.notes, *([self.follower.error] if self.follower.error else [])]
            for text in problems[told:]:
                self._put(SourceNote(self.follower.clock(), "journal", text))
            told = len(problems)
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
