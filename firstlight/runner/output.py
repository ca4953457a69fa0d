"""stderr that never blocks the run: a pager paused, a log shipper stalled, Ctrl-S on a terminal.

A write to a pipe nobody reads blocks once the pipe's 64 KiB are full; on the main thread that froze the
verdict loop: no judging, ``/readyz`` stuck at 503 while the server answered, stop signals waiting. Here every
write goes into a bounded buffer that a writer thread empties into the real stream. When the buffer is full,
a write is dropped whole and counted; once the reader drains it again, one line says how much was lost.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import IO

LIMIT_BYTES = 1 << 20  # what waits for a stalled reader; beyond it, writes are dropped and counted
EXIT_WAIT_S = 2.0  # at exit, how long a stalled reader is waited for before what is left is dropped


class BoundedOutput(io.TextIOBase):
    """A text stream over ``raw`` whose ``write`` never blocks (see the module's docstring)."""

    def __init__(self, raw: IO[str], limit: int = LIMIT_BYTES) -> None:
        super().__init__()
        self.raw, self.limit = raw, limit
        try:
            self._fd: int | None = raw.fileno()
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            self._fd = None  # an in-memory stream (a test's capture): written with its own write()
        self._encoding = getattr(raw, "encoding", None) or "utf-8"
        self._chunks: deque[str] = deque()
        self._size = 0
        self._cond = threading.Condition()
        self._writing = False
        self._broken = False
        self.dropped_writes = self.dropped_lines = self.dropped_bytes = 0
        self._reported = 0  # dropped writes already said
        self._thread = threading.Thread(target=self._run, name="firstlight-stderr", daemon=True)
        self._thread.start()

    # -- the file-like surface ------------------------------------------------------------------------------
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    def isatty(self) -> bool:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            return bool(self.raw.isatty())
        return False

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("fileno")
        return self._fd

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):  # a text stream (click probes with bytes to tell binary from text)
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s.encode(self._encoding, "replace"))
        with self._cond:
            if self._broken:
                return len(s)
            if self._size + n > self.limit:
                self.dropped_writes += 1
                self.dropped_lines += max(s.count("\n"), 1)
                self.dropped_bytes += n
                return len(s)
            self._chunks.append(s)
            self._size += n
            self._cond.notify()
        return len(s)

    def say_dropped(self) -> None:
        """Have the writer say what was dropped (it says so before its next chunk): at the end of a run."""
        with self._cond:
            if self.dropped_writes > self._reported:
                self._chunks.append("")
                self._cond.notify()

    def flush(self) -> None:
        """Nothing to do here: the writer thread flushes; :meth:`drain` waits for it, with a deadline."""

    def drain(self, timeout: float) -> bool:
        """Wait until everything written so far is out, at most ``timeout``; False when the reader stalls."""
        deadline = time.monotonic() + timeout
        with self._cond:
            return self._cond.wait_for(lambda: self._broken or (not self._chunks and not self._writing),
                                       max(deadline - time.monotonic(), 0))

    # -- the writer thread ----------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._chunks))
                text = "".join(self._chunks)
                self._chunks.clear()
                self._size = 0
                self._writing = True
                note = self._drop_note()
            try:
                self._emit(note + text)
            except (OSError, ValueError):  # the reader went away: nothing more is written
                with self._cond:
                    self._broken = True
            finally:
                with self._cond:
                    self._writing = False
                    self._cond.notify_all()

    def _drop_note(self) -> str:
        if self.dropped_writes == self._reported:
            return ""
        self._reported = self.dropped_writes
        return (f"firstlight: {self.dropped_lines} lines ({self.dropped_bytes} bytes) of output were dropped so "
                "far: stderr was not being read\n")

    def _emit(self, text: str) -> None:
        if self._fd is None:
            self.raw.write(text)
            self.raw.flush()
            return
        data = memoryview(text.encode(self._encoding, "replace"))
        while data:
            n = os.write(self._fd, data)  # blocks only this thread
            data = data[n:]


@contextlib.contextmanager
def nonblocking_stderr(wait_s: float = EXIT_WAIT_S) -> Iterator[BoundedOutput]:
    """``sys.stderr`` replaced by a :class:`BoundedOutput` over it for the block; at its end, a stalled reader
    is waited for at most ``wait_s``."""
    old = sys.stderr
    with contextlib.suppress(OSError, ValueError):
        old.flush()
    out = BoundedOutput(old)
    sys.stderr = out
    try:
        yield out
    finally:
        out.say_dropped()
        out.drain(wait_s)
        sys.stderr = old
