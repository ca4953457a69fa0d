"""Log sources: the launched server's stdout/stderr pipes, or a log file followed across rotation.

Each line is stamped on arrival. ``firstlight.logtext.LineSplitter`` cuts the bytes: a ``\\r`` redraw of a
progress bar is handed on at once (so progress is seen live), invalid UTF-8 is replaced, never fatal, and
an endless line is cut so memory stays bounded. Only finished lines are echoed to the terminal.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, BinaryIO

from firstlight.logtext import LineSplitter
from firstlight.samplers.base import Sink
from firstlight.timeline import LogLine, SourceNote


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
        lines = _Numbering()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            self._emit(lines.number(splitter.feed_events(data)))
        self._emit(lines.number(splitter.flush_events()))

    def _emit(self, events: list[tuple[str, bool, int]]) -> None:
        for text, final, lineno in events:
            self.sink(LogLine(self.clock(), text, self.stream, lineno, final))
            if final and self.echo is not None:
                self.echo(self.stream, text)


class _Numbering:
    """Line numbers as a person counts them: redraws share the number of the line they redraw."""

    def __init__(self) -> None:
        self.n = 0

    def number(self, events: list[tuple[str, bool]]) -> list[tuple[str, bool, int]]:
        out = []
        for text, final in events:
            out.append((text, final, self.n + 1))
            if final:
                self.n += 1
        return out


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
        splitter, lines = LineSplitter(), _Numbering()
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
                    self._drain(f, splitter, lines)
                    self._emit(lines.number(splitter.flush_events()))
                    f.close()
                    how = "rotated" if st.st_ino != ino else "truncated"
                    self._note(f"{self.path} was {how}; following the new file")
                try:
                    f = open(self.path, "rb")  # noqa: SIM115 - held open across iterations
                except OSError as e:
                    self._note(f"cannot open {self.path}: {e.strerror}")
                    f = None
                else:
                    ino, pos, splitter, lines = st.st_ino, 0, LineSplitter(), _Numbering()
                    if missing_noted:
                        self._note(f"{self.path} appeared")
                        missing_noted = False
            if f is not None:
                pos += self._drain(f, splitter, lines)
            with self._pass:
                self._passes += 1
                self._pass.notify_all()
            self._stop.wait(self.interval)
        if f is not None:
            f.close()

    def _drain(self, f: BinaryIO, splitter: LineSplitter, lines: _Numbering) -> int:
        n = 0
        while True:
            data = f.read(1 << 20)
            if not data:
                return n
            n += len(data)
            self._emit(lines.number(splitter.feed_events(data)))

    def _emit(self, events: list[tuple[str, bool, int]]) -> None:
        for text, final, lineno in events:
            self.sink(LogLine(self.clock(), text, "file", lineno, final))
            if final and self.echo is not None:
                self.echo("file", text)
