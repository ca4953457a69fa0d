"""What keeps a run sound when its surroundings fail: an output whose reader went away, a ``--record`` disk that
fills, the signals that end a run.

A run must end with the server stopped and a verdict, whatever happens to firstlight's own outputs. So a
reporter that cannot write (``firstlight up ... 2>&1 | head -n 3``: BrokenPipeError) is silenced, alone: its
stream is pointed at /dev/null so that nothing else (a warning, the interpreter's final flush) fails on it,
and the other reporters go on. A record file that cannot be written becomes one warning. SIGHUP and SIGQUIT
end a run as SIGINT and SIGTERM do.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from types import FrameType
from typing import IO, Any

from firstlight.report.base import ForwardingReporter, Reporter, Reporters
from firstlight.runner.launcher import STOP_SIGNALS

# What writing to a stream whose reader is gone (or whose disk is full) raises.
_OUTPUT_ERRORS = (OSError, ValueError)


def silence(stream: Any) -> None:
    """Point a broken stream's file descriptor at /dev/null: later writes, and its final flush, succeed."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)


class GuardedReporter(ForwardingReporter):
    """One reporter that stops writing, without raising, once its output fails."""

    def __init__(self, inner: Reporter) -> None:
        super().__init__(inner)
        self.lost: str | None = None  # why it stopped writing

    def forward(self, name: str, *args: Any) -> None:
        if self.lost is not None:
            return
        try:
            getattr(self.inner, name)(*args)
        except _OUTPUT_ERRORS as e:
            self.lost = f"{type(e).__name__}: {e}"
            silence(getattr(self.inner, "stream", None))


def guard_reporter(reporter: Reporter) -> Reporters:
    """Each reporter guarded on its own: a closed stderr silences the console, not the JSON on stdout."""
    inner = reporter.reporters if isinstance(reporter, Reporters) else (reporter,)
    return Reporters(*(r if isinstance(r, GuardedReporter) else GuardedReporter(r) for r in inner))


class RecordFile:
    """``--record``: observations as JSON Lines. The first write that fails (a full disk, a closed pipe) is
    one warning, and recording stops; the run goes on."""

    def __init__(self, f: IO[str], warn: Callable[[str], None]) -> None:
        self.f: IO[str] | None = f
        self.warn = warn
        self.name = getattr(f, "name", "the record file")

    def _failed(self, e: Exception) -> None:
        f, self.f = self.f, None
        reason = getattr(e, "strerror", None) or str(e)
        with contextlib.suppress(*_OUTPUT_ERRORS):
            if f is not None:
                f.close()
        self.warn(f"warning: --record {self.name}: cannot write ({reason}); recording stopped, the run goes on")

    def write(self, text: str) -> None:
        if self.f is None:
            return
        try:
            self.f.write(text)
        except _OUTPUT_ERRORS as e:
            self._failed(e)

    def flush(self) -> None:
        if self.f is None:
            return
        try:
            self.f.flush()
        except _OUTPUT_ERRORS as e:
            self._failed(e)

    def close(self) -> None:
        if self.f is None:
            return
        try:
            self.f.close()
            self.f = None
        except _OUTPUT_ERRORS as e:
            self._failed(e)


def install_stop_handlers(handler: Callable[[int, FrameType | None], None],
                          signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Callable[[], None]:
    """``handler`` for every signal that ends a run (SIGINT, SIGTERM, SIGHUP, SIGQUIT; ``signals``: some of them);
    returns the undo. The one installer of the package: the session, the sidecar's loop, a unit's attempts and
    the checks before launch all take their signals through it."""
    old = {}
    for s in signals:
        with contextlib.suppress(ValueError, OSError):  # not the main thread, or not on this platform
            old[s] = signal.signal(s, handler)

    def restore() -> None:
        for s, h in old.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(s, h)

    return restore
