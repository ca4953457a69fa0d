"""A sampler observes one signal source on its own clock and hands observations to a sink."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from firstlight.timeline import CollectorBook, CollectorStat, Observation, SourceNote

Sink = Callable[[Observation], None]


class Source(Protocol):
    """Every kind of source a watch runs, in one shape: a sampler, a log file or pipe, the engine's own stream, the
    readiness ladder, a unit's journal. ``start`` begins observing on its own thread and hands each observation to
    ``sink``; ``stop`` ends it (promptly; it may still be finishing a read); ``sync`` returns once what it has seen
    so far is delivered, or after ``timeout`` seconds."""

    name: str

    def start(self, sink: Sink) -> None: ...
    def stop(self) -> None: ...
    def sync(self, timeout: float) -> None: ...

# the idle back-off's ceiling: far below any stall timeout (default 120 s), so a stall is judged as late as that
IDLE_CAP_S = 4.0


class Backoff:
    """The idle back-off of a sampler: after a sample in which nothing moved the interval doubles, up to ``cap``;
    after a sample that moved, or a nudge from outside (a log line, a probe's answer), it is ``base`` again.

    A signal that starts moving is seen at most ``cap`` late (``cap`` is well under the stall timeout: see
    :func:`idle_cap`), and from then on at the base rate.
    """

    def __init__(self, base: float, cap: float) -> None:
        self.base = base
        self.cap = max(base, cap)
        self.interval = base

    def after(self, moved: bool) -> float:
        """The wait before the next sample, given whether this one saw anything move."""
        self.interval = self.base if moved else min(self.cap, self.interval * 2)
        return self.interval

    def reset(self) -> None:
        self.interval = self.base


def idle_cap(stall_timeout: float | None) -> float:
    """The back-off's ceiling for a watch judged on ``stall_timeout``: IDLE_CAP_S, and at most a tenth of it."""
    return IDLE_CAP_S if stall_timeout is None else min(IDLE_CAP_S, stall_timeout / 10)


T = TypeVar("T")


class Guard:
    """The one net under every thread of a watch, sampler or loop: what escapes it (a bug, an answer of the OS or
    of a server nobody foresaw) is counted in its collector's book and said in a note marked ``failed``, once per
    distinct error, never a thread that dies silently. The first step that works again says so too. The judge
    then knows the signal is missing rather than still (firstlight.judge: no ``hung`` from a signal it no longer
    gets).

    ``step`` guards one step of a loop that goes on (a sample, a poll of the members); ``run`` guards a thread's
    whole loop (a log reader, the journal, the engine's own stream), starting it again after ``again_s`` where
    that is safe, else saying that its signal is missing from then on."""

    def __init__(self, name: str, doing: str = "sampler", clock: Callable[[], float] = time.time) -> None:
        """``name``: the source its notes come from; ``doing``: what failed, in the note's words."""
        self.name, self.doing, self.clock = name, doing, clock
        self.failure: str | None = None  # the last escape's one line, while it keeps failing
        self.book = CollectorBook("sampler", name)  # its steps: how many, how many raised, how long (a sampler's
        # book is the exporter's; a loop's counts its escapes)

    def failed(self, e: BaseException, duration_s: float, until: str) -> SourceNote | None:
        """Count an escape; the note that says it (None: the same error as the last one, already said)."""
        self.book.record(False, duration_s)
        text = f"{type(e).__name__}: {str(e)[:200] or 'no message'}"
        if text == self.failure:
            return None
        self.failure = text
        return SourceNote(self.clock(), self.name, f"{self.doing} failed: {text}; {until}", failed=True)

    def worked(self, duration_s: float) -> SourceNote | None:
        """Count a step that worked; the note that says it works again (None: it had not failed)."""
        self.book.record(True, duration_s)
        if self.failure is None:
            return None
        self.failure = None
        return SourceNote(self.clock(), self.name, f"{self.doing} works again")

    def step(self, fn: Callable[[], T], report: Callable[[SourceNote], None],
             until: str = "its signal is missing until it works again") -> T | None:
        """``fn()``, or None when it raised (reported)."""
        t0 = time.monotonic()
        value: T | None = None
        try:
            value = fn()
        except Exception as e:
            note = self.failed(e, time.monotonic() - t0, until)
        else:
            note = self.worked(time.monotonic() - t0)
        if note is not None:
            report(note)
        return value

    def run(self, loop: Callable[[], None], report: Callable[[SourceNote], None], *,
            stop: threading.Event | None = None, again_s: float | None = None) -> None:
        """A thread's loop until it returns or ``stop``; an escape is reported, and the loop started again after
        ``again_s`` (None: it stays stopped, its signal missing from then on)."""
        until = ("it has stopped: its signal is missing from here on" if again_s is None else
                 f"started again in {again_s:g}s")
        while True:
            t0 = time.monotonic()
            try:
                loop()
                return
            except Exception as e:
                note = self.failed(e, time.monotonic() - t0, until)
                if note is not None:
                    report(note)
            if again_s is None:
                return
            if stop is None:
                time.sleep(again_s)
            elif stop.wait(again_s):
                return


class Sampler:
    """Subclasses implement ``sample``; ``start`` runs it every ``interval`` seconds in a daemon thread.

    A subclass that sets ``moved`` in ``sample`` (False: nothing it watches changed) backs off while idle, once
    ``backoff`` is set (:class:`Backoff`); ``nudge`` brings it back to ``interval`` at once."""

    name = "sampler"

    def __init__(self, interval: float) -> None:
        self.clock: Callable[[], float] = time.time
        self.interval = interval
        self.moved = True
        self.backoff: Backoff | None = None
        self._stop = threading.Event()
        self._nudged = threading.Event()  # a nudge or the stop: ends a backed-off wait early
        self._thread: threading.Thread | None = None
        self.guard = Guard(self.name, clock=lambda: self.clock())  # its samples: how many raised, how long

    @property
    def failure(self) -> str | None:
        """The last exception of ``sample``, while it keeps failing."""
        return self.guard.failure

    @property
    def failures(self) -> int:
        """Samples that raised, in all."""
        return self.guard.book.failures

    def stat(self) -> CollectorStat:
        """Its samples so far: how many, how many raised, the last one's outcome and wall time."""
        return self.guard.book.stat()

    def sample(self) -> list[Observation]:
        raise NotImplementedError

    def start(self, sink: Sink) -> None:
        self._thread = threading.Thread(target=self._run, args=(sink,), name=f"firstlight-{self.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._nudged.set()

    def sync(self, timeout: float) -> None:
        """Nothing to wait for: each sample goes to the sink as it is taken."""

    def nudge(self) -> None:
        """Something moved elsewhere: the next sample within ``interval`` of the last one, not after a backed-off
        wait. Cheap when not backed off (one flag test), as it is called for every log line."""
        b = self.backoff
        if b is not None and b.interval > b.base:
            b.reset()
            self._nudged.set()

    def _run(self, sink: Sink) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.moved = True
            for obs in self._sample_reported(sink):
                sink(obs)
            wait = self.backoff.after(self.moved) if self.backoff is not None else self.interval
            deadline = t0 + wait
            while not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if self._nudged.wait(left):
                    self._nudged.clear()
                    deadline = min(deadline, t0 + self.interval)

    def _sample_reported(self, sink: Sink) -> list[Observation]:
        """``sample`` under the guard: a sampler that raises says so in a note marked ``failed`` and keeps trying
        at its idle back-off; the first sample that works again says so too."""
        notes: list[Observation] = []
        observations = self.guard.step(self.sample, notes.append, "its signal is missing until it samples again")
        if observations is None:
            self.moved = False
            return notes
        return [*notes, *observations]
