"""Log sources: the launched server's stdout/stderr pipes, or a log file followed across rotation.

Each line is stamped on arrival. Bytes are split on ``\\n``; a ``\\r`` inside a line is a progress-bar redraw,
and each redraw is handed on as its own observation (marked ``redraw``) so that progress is seen live.
Invalid UTF-8 is replaced, never fatal; a line without a newline is cut at ``MAX_LINE`` bytes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from firstlight.samplers.base import Sink
from firstlight.timeline import LogLine, SourceNote

MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class Segment:
    text: str
    lineno: int
    final: bool  # True: the line ended with \n (or the source ended); False: a \r redraw


class LineSplitter:
    """Incremental bytes -> lines. Feed chunks as they come; ``close`` flushes the tail."""

    def __init__(self) -> None:
        self._buf = b""
        self.lineno = 0

    def feed(self, data: bytes) -> Iterator[Segment]:
        self._buf += data
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                break
            line, self._buf = self._buf[:nl], self._buf[nl + 1:]
            yield from self._line(line, final=True)
        # Redraws of the current, unfinished line: hand on all but the last piece now.
        cr = self._buf.rfind(b"\r")
        if cr >= 0:
            done, self._buf = self._buf[:cr], self._buf[cr + 1:]
            for piece in done.split(b"\r"):
                if piece.strip():
                    yield Segment(_decode(piece), self.lineno + 1, final=False)
        if len(self._buf) > MAX_LINE:
            line, self._buf = self._buf[:MAX_LINE], self._buf[MAX_LINE:]
            yield from self._line(line, final=True)

    def close(self) -> Iterator[Segment]:
        if self._buf:
            line, self._buf = self._buf, b""
            yield from self._line(line, final=True)

    def _line(self, line: bytes, final: bool) -> Iterator[Segment]:
        self.lineno += 1
        pieces = [p for p in line.split(b"\r") if p.strip()]
        for i, piece in enumerate(pieces):
            yield Segment(_decode(piece), self.lineno, final=final and i == len(pieces) - 1)


def _decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace").rstrip()


def iter_segments(stream: BinaryIO, chunk: int = 1 << 20) -> Iterator[Segment]:
    """All segments of a binary stream, in bounded memory (for replaying files)."""
    splitter = LineSplitter()
    while True:
        data = stream.read(chunk)
        if not data:
            break
        yield from splitter.feed(data)
    yield from splitter.close()


class PipeReader:
    """Reads a child's pipe in a thread; each segment becomes a LogLine, final lines go to ``echo``."""

    def __init__(self, pipe: IO[bytes], stream: str, sink: Sink, echo: Callable[[str, str], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.pipe, self.stream, self.sink, self.echo, self.clock = pipe, stream, sink, echo, clock
        self.thread = threading.Thread(target=self._run, name=f"firstlight-{stream}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        splitter = LineSplitter()
        fd = self.pipe.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            self._emit(splitter.feed(data))
        self._emit(splitter.close())

    def _emit(self, segments: Iterator[Segment]) -> None:
        for seg in segments:
            self.sink(LogLine(self.clock(), seg.text, self.stream, seg.lineno))
            if seg.final and self.echo is not None:
                self.echo(self.stream, seg.text)


class FileFollower:
    """Follows a log file like ``tail -F``: from its start, across rotation (a new inode) and truncation."""

    name = "log"

    def __init__(self, path: Path, sink: Sink, interval: float = 0.2, clock: Callable[[], float] = time.time,
                 echo: Callable[[str, str], None] | None = None) -> None:
        self.path, self.sink, self.interval, self.clock, self.echo = path, sink, interval, clock, echo
        self._stop = threading.Event()
        self._pass = threading.Condition()
        self._passes = 0
        self.thread = threading.Thread(target=self._run, name="firstlight-logfile", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()

    def sync(self, timeout: float) -> None:
        """Return once everything written to the file so far has been read (one full pass after this call)."""
        with self._pass:
            target = self._passes + 2
            self._pass.wait_for(lambda: self._passes >= target or not self.thread.is_alive(), timeout)

    def _note(self, message: str) -> None:
        self.sink(SourceNote(self.clock(), "log", message))

    def _run(self) -> None:
        f: BinaryIO | None = None
        ino: int | None = None
        pos = 0
        splitter = LineSplitter()
        missing_noted = False
        while not self._stop.is_set():
            try:
                st = self.path.stat()
            except OSError:
                st = None
                if not missing_noted:
                    self._note(f"{self.path} does not exist (yet); waiting for it")
                    missing_noted = True
            if st is not None and (f is None or st.st_ino != ino or st.st_size < pos):
                if f is not None:
                    self._drain(f, splitter)
                    self._emit(splitter.close())
                    f.close()
                    how = "rotated" if st.st_ino != ino else "truncated"
                    self._note(f"{self.path} was {how}; following the new file")
                try:
                    f = open(self.path, "rb")  # noqa: SIM115 - held open across iterations
                except OSError as e:
                    self._note(f"cannot open {self.path}: {e.strerror}")
                    f = None
                else:
                    ino, pos, splitter = st.st_ino, 0, LineSplitter()
                    if missing_noted:
                        self._note(f"{self.path} appeared")
                        missing_noted = False
            if f is not None:
                pos += self._drain(f, splitter)
            with self._pass:
                self._passes += 1
                self._pass.notify_all()
            self._stop.wait(self.interval)
        if f is not None:
            f.close()

    def _drain(self, f: BinaryIO, splitter: LineSplitter) -> int:
        n = 0
        while True:
            data = f.read(1 << 20)
            if not data:
                return n
            n += len(data)
            self._emit(splitter.feed(data))

    def _emit(self, segments: Iterator[Segment]) -> None:
        for seg in segments:
            self.sink(LogLine(self.clock(), seg.text, "file", seg.lineno))
            if seg.final and self.echo is not None:
                self.echo("file", seg.text)
