"""Start after start: the one loop that watches a server's starts in turn.

Three kinds of watch see more than one start: the sidecar (``watch --serve-readiness``: the engine's next start
after it ended, found by its process or its port; :mod:`firstlight.runner.rewatch`), a systemd unit (``--unit
--max-attempts``: each invocation that ``Restart=`` begins; :mod:`firstlight.units.watch`) and a container
(``--container --max-attempts``: each start its restart policy makes; :mod:`firstlight.containers.watch`). Each
supplies the three things that differ, as a :class:`Starts`: how the next start is found, how one start is
watched (one Session, one verdict, one run in the history) and what follows a verdict. This loop owns the rest:
the order of those steps and the stop signals between sessions (a session takes them while it runs).
"""

from __future__ import annotations

import enum
import signal
import threading
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Generic, Protocol, TypeVar

from firstlight.assessment import Assessment, Event
from firstlight.report.base import ForwardingReporter, Reporter
from firstlight.result import RunResult
from firstlight.runner.guard import install_stop_handlers
from firstlight.runner.outcome import Outcome
from firstlight.vocab import INTERRUPTED

S = TypeVar("S")


class Step(enum.Enum):
    """What follows one start's verdict."""

    NEXT = "next"  # wait for the start after this one
    AGAIN = "again"  # the same start, watched again as a new run (no verdict within --timeout, still running)
    END = "end"  # no start is worth waiting for: the watch ends with this verdict


class Starts(Protocol[S]):
    """The part of a watch that differs by what is watched. ``stop`` is set by a stop signal between sessions:
    every wait of ``next_start`` and ``after`` ends when it is set."""

    stop: threading.Event

    def next_start(self, previous: S | None) -> S | None:
        """Wait for the start after ``previous`` (None: the first one); None when none comes."""
        ...

    def watch(self, start: S) -> Outcome:
        """One start's session, to its verdict."""
        ...

    def after(self, start: S, outcome: Outcome) -> tuple[Step, Outcome]:
        """What follows the verdict (serving checks until the engine goes; systemd's next attempt), and the
        outcome as it stands then."""
        ...


@dataclass
class Loop(Generic[S]):
    """Runs ``starts`` start after start until one says END, none comes, or a stop signal arrives."""

    starts: Starts[S]
    signal: str | None = field(default=None, init=False)  # the stop signal's name, when one ended the loop
    count: int = field(default=0, init=False)  # starts watched (an AGAIN counts again)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signal.Signals(signum).name
        self.starts.stop.set()

    def run(self) -> Outcome | None:
        """The last start's outcome (None: no start was watched). A start's own ``interrupted`` verdict ends
        the loop at once."""
        restore = install_stop_handlers(self._on_signal)  # none off the main thread (library use)
        stop, last = self.starts.stop, None
        try:
            previous: S | None = None
            start: S | None = None
            while not stop.is_set():
                if start is None:
                    start = self.starts.next_start(previous)
                    if start is None:
                        break
                self.count += 1
                last = self.starts.watch(start)
                if last.verdict == INTERRUPTED:
                    break
                step, last = self.starts.after(start, last)
                if step is Step.END:
                    break
                if step is Step.NEXT:
                    previous, start = start, None
        finally:
            restore()
        return last


class HeldReporter(ForwardingReporter):
    """Passes everything on but an attempt's verdict and summary, which the watch releases once it knows whether
    another attempt follows, and the close, which is the watch's (a unit's attempts, a container's)."""

    def verdict(self, result: RunResult) -> None:
        pass

    def summary(self, result: RunResult) -> None:
        pass

    def close(self) -> None:
        pass


class Attempt(Protocol):
    """What an attempt's report reads of it (a unit's, a container's)."""

    number: int
    verdict: str
    phase: str
    failure: str | None
    hint: str | None
    evidence: list[dict[str, Any]]
    ended_at: float | None


def report_attempt(reporter: Reporter, assessment: Assessment | None, a: Attempt, name: str,
                   ident: dict[str, Any], next_one: str, max_attempts: int, now: float) -> None:
    """A failed or hung attempt that another follows: an ``attempt`` event with its verdict and evidence (a plain
    message where no assessment was made). ``name``: how the message names it; ``ident``: its identity in the
    event's data (``invocation``, ``started_at``); ``next_one``: what the watch waits for now."""
    first = a.evidence[0]["value"] if a.evidence else ""
    message = (f"attempt {a.number} ({name}) {a.verdict} in phase {a.phase}"
               + (f" [{a.failure}]" if a.failure else "") + (f": {first}" if first else "")
               + f"; watching {next_one} ({a.number + 1} of at most {max_attempts})")
    data = {"attempt": a.number, **ident, "verdict": a.verdict, "failure": a.failure, "hint": a.hint,
            "evidence": a.evidence}
    if assessment is not None:
        reporter.event(Event(a.ended_at or now, "attempt", message, data), assessment)
    else:
        reporter.message(message)
