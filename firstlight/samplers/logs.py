"""Log sources: the launched server's stdout/stderr pipes, or a log file (or FIFO) followed across rotation.

Each line is stamped on arrival. ``firstlight.logtext.LineSplitter`` cuts the bytes: a ``\\r`` redraw of a
progress bar is handed on at once (so progress is seen live), invalid UTF-8 is replaced, never fatal, an
endless line is cut so memory stays bounded, and a container's or journald's framing is peeled off
(``firstlight.framing``). What is echoed is the peeled line too. Only finished lines are echoed to the terminal.

A log flood must neither starve firstlight nor block the server. So a pipe is read by a thread that only
moves bytes into a bounded buffer (``max_pending`` bytes; beyond it the oldest bytes are dropped, whole lines,
and counted), and a second thread splits lines and hands them to the sink, waiting while the consumer's
``backlog`` (its queue length) is above ``MAX_BACKLOG``. The server's writes therefore never wait on
firstlight; what the consumer cannot take is dropped, the newest lines kept (a fatal error comes last), and a
``SourceNote`` says how many lines were dropped. A followed file is paced the same way and skips ahead, with
the same count, when it falls more than ``max_pending`` bytes behind.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, BinaryIO

from firstlight.framing import peel
from firstlight.logtext import LineEvent, LineSplitter

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]
from firstlight.samplers.base import Guard, Sink
from firstlight.timeline import LogLine, Observation, SourceNote
from firstlight.timestamps import TimestampParser  # the replay's parser: the same formats

READ_BYTES = 1 << 20  # one read() of a pipe
DELIVER_BYTES = 64 << 10  # bytes split and handed on per step, between two looks at the consumer's backlog
MAX_PENDING_BYTES = 8 << 20  # bytes read but not yet handed on; beyond it the oldest are dropped
KEEP_BYTES = 2 << 20  # what a drop keeps: the newest bytes
# A file truncated under us (logrotate's copytruncate): the bytes written after our last read went to the copy; a
# sibling named after the file (NAME.1, NAME-20261206) whose bytes before that offset end as the last ones read is
# that copy, and the rest is read from it. TAIL_BYTES: how much of what was read identifies it.
TAIL_BYTES = 256
MAX_BACKLOG = 5000  # observations waiting in the consumer's queue before a source waits (and then drops)
NOTE_EVERY_S = 10.0  # at most one "lines dropped" note per source this often (the first one at once)
AGAIN_S = 0.5  # a pipe's reader that raised starts again after this: a pipe nobody reads would stop the server

Echo = Callable[[str, str], None]


class _Numbering:
    """Line numbers as a person counts them: redraws share the number of the line they redraw."""

    def __init__(self) -> None:
        self.n = 0

    def number(self, events: list[LineEvent]) -> list[tuple[str, bool, int]]:
        """A line stands for as many of the log's own lines as its framing joined (CRI partial records)."""
        out = []
        for e in events:
            out.append((e.text, e.final, self.n + 1))
            if e.final:
                self.n += max(e.lines, 1)
        return out


def _unbound(obs: Observation) -> None:
    raise RuntimeError("a log source delivered before it was started")


class _Delivery:
    """Bytes of one stream -> numbered LogLines to the sink (final ones echoed), paced by the consumer."""

    def __init__(self, stream: str, echo: Echo | None, clock: Callable[[], float],
                 backlog: Callable[[], int] | None, keep: Callable[[LineEvent], bool] | None = None) -> None:
        self.stream, self.echo, self.clock, self.backlog, self.keep = stream, echo, clock, backlog, keep
        self.sink: Sink = _unbound  # the source's ``start`` gives the sink
        self.splitter = LineSplitter()
        self.lines = _Numbering()
        self.dropped_lines = 0  # in total, for the report
        self.dropped_bytes = 0
        self._unreported = 0
        self._last_note = 0.0

    def wait_for_room(self, stop: threading.Event | None = None, limit_s: float | None = None) -> bool:
        """Wait while the consumer is behind; False when it still is after ``limit_s``."""
        if self.backlog is None:
            return True
        deadline = None if limit_s is None else time.monotonic() + limit_s
        while self.backlog() > MAX_BACKLOG:
            if (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() > deadline):
                return False
            time.sleep(0.01)
        return True

    def feed(self, data: bytes) -> None:
        self._emit(self.lines.number(self._kept(self.splitter.feed_lines(data))))

    def flush(self) -> None:
        self._emit(self.lines.number(self._kept(self.splitter.flush_lines())))
        if self._unreported:
            self._note()

    def _kept(self, events: list[LineEvent]) -> list[LineEvent]:
        return events if self.keep is None else [e for e in events if self.keep(e)]

    def dropped(self, lines: int, nbytes: int) -> None:
        """Bytes were dropped unread: count them, keep the numbering true, drop the half line before them."""
        self.lines.n += lines
        self.splitter = LineSplitter()
        self.dropped_lines += lines
        self.dropped_bytes += nbytes
        self._unreported += lines
        if time.monotonic() - self._last_note >= NOTE_EVERY_S or not self._last_note:
            self._note()

    def _note(self) -> None:
        self._last_note = time.monotonic()
        self._unreported = 0
        self.sink(SourceNote(self.clock(), "log", f"log flood: {self.dropped_lines} lines "
                                                  f"({self.dropped_bytes / 2**20:.1f} MiB) of {self.stream} dropped "
                                                  "so far (the server logs faster than firstlight can judge; the "
                                                  "newest lines are kept and the server is never slowed)"))

    def _emit(self, events: list[tuple[str, bool, int]]) -> None:
        for text, final, lineno in events:
            self.sink(LogLine(self.clock(), text, self.stream, lineno, final))
            if final and self.echo is not None:
                self.echo(self.stream, text)


def _drop_oldest(buf: bytearray, keep: int) -> tuple[int, int]:
    """Cut ``buf`` down to about its newest ``keep`` bytes at a line boundary; (lines, bytes) dropped."""
    cut = buf.find(b"\n", len(buf) - keep)
    cut = len(buf) - keep if cut < 0 else cut + 1
    lines = buf.count(b"\n", 0, cut)
    del buf[:cut]
    return lines, cut


class PipeReader:
    """Reads a child's pipe; each segment becomes a LogLine, final lines go to ``echo``.

    ``backlog``: how many observations the consumer has not taken yet (e.g. its queue's ``qsize``); while it
    is above ``MAX_BACKLOG`` lines wait in the bounded buffer. ``thread`` ends once every line is handed on.
    ``dropped_lines`` counts what a flood cost. ``keep``: which lines are the source's (others are not handed on
    nor numbered: a container's log read across a restart keeps one start's lines).
    """

    def __init__(self, pipe: IO[bytes], stream: str, echo: Echo | None = None,
                 clock: Callable[[], float] = time.time, backlog: Callable[[], int] | None = None,
                 max_pending: int = MAX_PENDING_BYTES, keep: Callable[[LineEvent], bool] | None = None) -> None:
        self.pipe, self.stream, self.name = pipe, stream, stream
        self.max_pending = max(max_pending, 2 * DELIVER_BYTES)
        self.delivery = _Delivery(stream, echo, clock, backlog, keep)
        self._pending = bytearray()
        self._dropped = (0, 0)
        self._eof = False
        self._cond = threading.Condition()
        self.guard = Guard("log", f"{stream} reader", clock=clock)
        self.reader = threading.Thread(target=self._guarded, args=(self._read,), name=f"firstlight-{stream}-read",
                                       daemon=True)
        self.thread = threading.Thread(target=self._guarded, args=(self._deliver,), name=f"firstlight-{stream}",
                                       daemon=True)

    @property
    def dropped_lines(self) -> int:
        return self.delivery.dropped_lines

    def start(self, sink: Sink) -> None:
        self.delivery.sink = sink
        _widen_pipe(self.pipe)
        self.reader.start()
        self.thread.start()

    def stop(self) -> None:
        """Nothing to stop: the pipe ends with the server, and every line it wrote is still handed on."""

    def sync(self, timeout: float) -> None:
        """Once the server is gone: wait (bounded) until every line it wrote is handed on."""
        self.thread.join(timeout=timeout)

    def _guarded(self, loop: Callable[[], None]) -> None:
        """Each loop picks up where it stopped (its state is the reader's), so one that raised starts again."""
        self.guard.run(loop, self.delivery.sink, again_s=AGAIN_S)

    def _read(self) -> None:
        """Only moves bytes: never waits on anything but the pipe, so the server never waits on us."""
        fd = self.pipe.fileno()
        keep = min(KEEP_BYTES, self.max_pending // 2)
        while True:
            try:
                data = os.read(fd, READ_BYTES)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self._eof = True
                    self._cond.notify()
                    return
                self._pending += data
                if len(self._pending) > self.max_pending:
                    lines, nbytes = _drop_oldest(self._pending, keep)
                    self._dropped = (self._dropped[0] + lines, self._dropped[1] + nbytes)
                self._cond.notify()

    def _deliver(self) -> None:
        d = self.delivery
        while True:
            d.wait_for_room(limit_s=None if not self._eof else 2.0)
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending) or self._eof)
                chunk = bytes(self._pending[:DELIVER_BYTES])
                del self._pending[:DELIVER_BYTES]
                dropped, self._dropped = self._dropped, (0, 0)
                done = self._eof and not self._pending
            if dropped[1]:
                d.dropped(*dropped)
            if chunk:
                d.feed(chunk)
            if done:
                d.flush()
                return


PIPE_BYTES = 1 << 20  # the kernel's pipe buffer we ask for: 20 ms of a 50 MB/s flood before the writer waits


def _widen_pipe(pipe: IO[bytes]) -> None:
    """Ask for a 1 MiB pipe buffer (Linux ``F_SETPIPE_SZ``; 64 KiB by default): the reader thread needs the GIL
    for each read, and a bigger buffer lets the server write on while it waits for it."""
    setsz = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setsz is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fcntl.fcntl(pipe.fileno(), setsz, PIPE_BYTES)


def _is_stream(mode: int) -> bool:
    """A FIFO, socket or character device: no size, no seeking, no rotation."""
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class FileFollower:
    """Follows a log file like ``tail -F``: across rotation (a new inode) and truncation.

    A file that already exists is read from where it ended when the watch began (``start_size``: where the
    caller saw it end before this start began, such as a sidecar that waited for the start; by default its size
    when this follower is made, before its thread looks): an append-mode log holds earlier
    runs, whose "CUDA out of memory" must not fail this start; ``from_start`` reads it whole. With ``since``
    (the watched process's start time) it is read from the first line the log's own timestamps place at or
    after that moment, so the lines this run printed before firstlight attached count too; a log without
    dates (llama.cpp) cannot say, and is read from where it ended. A file that appears later, or replaces a
    rotated one, is read from its start. A FIFO is read as its lines arrive.
    """

    name = "log"

    def __init__(self, path: Path, interval: float = 0.2, clock: Callable[[], float] = time.time,
                 echo: Echo | None = None, from_start: bool = False, backlog: Callable[[], int] | None = None,
                 max_pending: int = MAX_PENDING_BYTES, since: float | None = None,
                 start_size: int | None = None) -> None:
        self.path, self.interval, self.clock = path, interval, clock
        self.from_start, self.since = from_start, since
        self.start_size = start_size if start_size is not None else regular_file_size(path)
        self._start_told = start_size is not None  # the caller knew where this start's lines begin
        self._tail = b""  # the last bytes read (TAIL_BYTES): what finds a truncated file's copy
        self.max_pending = max_pending
        self.delivery = _Delivery("file", echo, clock, backlog)
        self._stop = threading.Event()
        self._pass = threading.Condition()
        self._passes = 0
        self._ended = threading.Event()  # the writer is gone: a last line without its newline is whole
        self.guard = Guard("log", "log file reader", clock=clock)
        self.thread = threading.Thread(target=self._run, name="firstlight-logfile", daemon=True)

    @property
    def dropped_lines(self) -> int:
        return self.delivery.dropped_lines

    def start(self, sink: Sink) -> None:
        self.delivery.sink = sink
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()

    def writer_ended(self) -> None:
        """The process writing the file has ended: what it left without a newline (a last line, an unfinished CRI
        partial record) is delivered at the next pass instead of waiting for an end that never comes."""
        self._ended.set()

    def sync(self, timeout: float) -> None:
        """Return once everything written to the file so far has been read (one full pass after this call)."""
        with self._pass:
            target = self._passes + 2
            self._pass.wait_for(lambda: self._passes >= target or not self.thread.is_alive(), timeout)

    def _note(self, message: str) -> None:
        self.delivery.sink(SourceNote(self.clock(), "log", message))

    def _pass_done(self) -> None:
        with self._pass:
            self._passes += 1
            self._pass.notify_all()

    def _run(self) -> None:
        # not started again after an escape: where it would start reading again is not known
        try:
            self.guard.run(self._follow, self.delivery.sink)
        finally:
            with self._pass:
                self._passes += 2
                self._pass.notify_all()

    def _follow(self) -> None:
        try:
            st = os.stat(self.path)
        except OSError:
            st = None
        if st is not None and _is_stream(st.st_mode):
            self._run_stream()
        else:
            self._run_file(existing=st is not None)

    def _run_stream(self) -> None:
        """A FIFO: non-blocking, so that opening waits for no writer and a stop is seen within ``interval``."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            self._note(f"cannot open {self.path}: {e.strerror}")
            return
        d = self.delivery
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([fd], [], [], self.interval)
                data = b""
                if readable:
                    with contextlib.suppress(BlockingIOError):
                        data = os.read(fd, READ_BYTES)
                if data:
                    d.wait_for_room(self._stop)
                    d.feed(data)
                    continue
                if self._ended.is_set():
                    d.flush()
                self._pass_done()
                if readable:  # end of file: no writer now; one may come
                    self._stop.wait(self.interval)
        finally:
            os.close(fd)
            d.flush()

    def _run_file(self, existing: bool) -> None:
        f: BinaryIO | None = None
        ino: int | None = None
        pos = 0
        missing_noted = False
        first = existing and not self.from_start
        while not self._stop.is_set():
            try:
                st = self.path.stat()
            except OSError:
                st = None
                if not missing_noted:
                    self._note(f"{self.path} does not exist (yet); waiting for it")
                    missing_noted = True
            if st is not None and (f is None or st.st_ino != ino or st.st_size < pos or not self._same_tail(f, pos)):
                if f is not None:
                    if st.st_ino == ino:  # truncated in place: what came after our last read is in the copy
                        self._note(f"{self.path} was truncated; {self._from_copy(pos)}; following it from its "
                                   "start")
                    else:  # renamed: the old file's last lines are read from it first
                        self._drain(f, pos)
                        self._note(f"{self.path} was rotated; following the new file")
                    self.delivery.flush()
                    f.close()
                try:
                    f = open(self.path, "rb")  # noqa: SIM115 - held open across iterations
                except OSError as e:
                    self._note(f"cannot open {self.path}: {e.strerror}")
                    f = None
                else:
                    ino, pos, self._tail = st.st_ino, 0, b""
                    self.delivery.splitter, self.delivery.lines = LineSplitter(), _Numbering()
                    if first:
                        pos = self._start_offset(f, st)
                    if missing_noted:
                        self._note(f"{self.path} appeared")
                        missing_noted = False
                first = False
            if f is not None:
                pos = self._drain(f, pos)
            if self._ended.is_set():
                self.delivery.flush()
            self._pass_done()
            self._stop.wait(self.interval)
        if f is not None:
            f.close()

    def _start_offset(self, f: BinaryIO, st: os.stat_result) -> int:
        """Where this run's lines begin in a file that existed before firstlight attached."""
        if self.since is not None and st.st_mtime >= self.since - 1:
            found = run_start_offset(f, st.st_size, self.since, self.clock())
            if found is None:  # byte 0 would replay an earlier run's crash as this run's
                self._note(f"{self.path}: no dates in its lines to tell this run's from earlier ones; "
                           + self._start_told_words())
            else:
                if found < st.st_size:
                    self._note(f"{self.path}: this run's lines start at byte {found} (by the log's own "
                               "timestamps)")
                    f.seek(found)
                    return found
        if self.start_size is not None and self.start_size > st.st_size:  # truncated since: all of it is new
            self._note(f"{self.path} was truncated after the watch began: reading it from its start")
            return 0
        return self._skip_to_end(f, st.st_size if self.start_size is None else self.start_size)

    def _start_told_words(self) -> str:
        if not self._start_told:
            return "reading from where it ended when the watch began"
        if self.start_size:
            return f"reading from where it ended before this start began (byte {self.start_size})"
        return "reading it whole: it was empty or absent before this start began"

    def _skip_to_end(self, f: BinaryIO, size: int) -> int:
        """Start after the last complete line already in the file (a half-written one is read whole)."""
        start = max(0, size - 65536)
        f.seek(start)
        tail = f.read(size - start)
        nl = tail.rfind(b"\n")
        pos = start + nl + 1 if nl >= 0 else (0 if start == 0 else size)
        f.seek(pos)
        if pos:
            self._note(f"{self.path} already holds {pos} bytes: reading only what is written from now on "
                       "(--log-from-start reads it all)")
        return pos

    def _drain(self, f: BinaryIO, pos: int) -> int:
        d = self.delivery
        while not self._stop.is_set():
            if not d.wait_for_room(self._stop, limit_s=self.interval):
                pos = self._skip_ahead(f, pos)
                continue
            data = f.read(DELIVER_BYTES)
            if not data:
                return pos
            pos += len(data)
            self._tail = (self._tail + data)[-TAIL_BYTES:]
            d.feed(data)
        return pos

    def _same_tail(self, f: BinaryIO, pos: int) -> bool:
        """The file still holds, just before ``pos``, the last bytes read from it: else it was truncated and
        written again past ``pos`` between two looks (copytruncate under a fast writer), which its size alone
        cannot show."""
        if not self._tail:
            return True
        try:
            return os.pread(f.fileno(), len(self._tail), pos - len(self._tail)) == self._tail
        except OSError:
            return True

    def _from_copy(self, pos: int) -> str:
        """The bytes after ``pos`` (our last read) of a file truncated in place, read from its rotated copy when
        one is found (its bytes before ``pos`` end as ours did): what was done, as the note says it."""
        tail = self._tail
        if not tail:
            return "nothing had been read from it"
        for copy in _copies(self.path):
            try:
                with open(copy, "rb") as c:
                    size = os.fstat(c.fileno()).st_size
                    if size < pos:
                        continue
                    c.seek(pos - len(tail))
                    if c.read(len(tail)) != tail:
                        continue
                    got = self._drain(c, pos) - pos
            except OSError:
                continue
            return (f"the {got} bytes written after the last read were read from its copy {copy.name}" if got
                    else f"nothing was written after the last read (its copy {copy.name} ends there)")
        return ("no copy of it ends as the last read did: lines written between the last read and the truncation, "
                "if any, are lost")

    def _skip_ahead(self, f: BinaryIO, pos: int) -> int:
        """The consumer is behind: when the file has run over ``max_pending`` bytes ahead of us, count the
        lines in between (a fast byte count) and continue near its end."""
        try:
            size = os.fstat(f.fileno()).st_size
        except OSError:
            return pos
        if size - pos <= self.max_pending:
            return pos
        target = size - min(KEEP_BYTES, self.max_pending // 2)
        lines = nbytes = 0
        last = self._tail
        while pos < target:
            data = f.read(min(READ_BYTES, target - pos))
            if not data:
                break
            pos += len(data)
            nbytes += len(data)
            lines += data.count(b"\n")
            last = (last + data)[-TAIL_BYTES:]
        rest = f.readline()  # finish the line the skip ended in
        pos += len(rest)
        self._tail = (last + rest)[-TAIL_BYTES:]  # skipped, but read: what the file must still hold before pos
        self.delivery.dropped(lines + 1 if rest.endswith(b"\n") else lines, nbytes + len(rest))
        return pos


def _copies(path: Path) -> list[Path]:
    """A log's rotated copies, as logrotate names them (``NAME.1``, ``NAME-DATE``; not compressed ones), the
    newest first."""
    try:
        found = [p for p in path.parent.iterdir()
                 if p.name != path.name and p.name.startswith((path.name + ".", path.name + "-"))
                 and not p.name.endswith((".gz", ".xz", ".bz2", ".zst")) and p.is_file()]
    except OSError:
        return []
    return sorted(found, key=_mtime, reverse=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # gone since it was listed
        return 0.0


SCAN_BYTES = 8 << 20  # how much of an existing log's end is searched for this run's first line
CLOCK_TICK = 0.01  # a process start time is known to 1/CLK_TCK: a line stamped in that tick is this run's


def regular_file_size(path: Path) -> int | None:
    """The size of a regular file now (where a watch beginning now starts reading it); None otherwise."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def run_start_offset(f: BinaryIO, size: int, since: float, now: float, slack: float = 2.0) -> int | None:
    """Offset of the first line whose own timestamp lies in [since, now + slack], read either as UTC or as
    local time (engines print both); ``size`` when lines have timestamps but none is that recent; None when
    no line of the scanned end has a timestamp with a date. No slack before ``since``: a crash 100 ms before
    a restart (systemd's default RestartSec) is the previous run's, and a second-resolution stamp of this
    run's first second is given up rather than let it in."""
    parser = TimestampParser()
    start = max(0, size - SCAN_BYTES)
    f.seek(start)
    data = f.read(size - start)
    if start:
        data = data[data.find(b"\n") + 1:]
        start = size - len(data)
    offset, dated = start, False
    for raw in data.splitlines(keepends=True):
        framed = peel(raw[:4096].decode("utf-8", "replace").rstrip("\r\n"))  # a runtime's time is the truest
        ts = framed.ts if framed.ts is not None else parser.parse(framed.text[:512])
        if ts is not None and ts > 10 * 86400:  # a date, not llama.cpp's elapsed time
            dated = True
            local = ts + time.altzone if time.localtime(ts).tm_isdst > 0 else ts + time.timezone
            if any(since - CLOCK_TICK <= t <= now + slack for t in (ts, local)):
                return offset
        offset += len(raw)
    return size if dated else None
