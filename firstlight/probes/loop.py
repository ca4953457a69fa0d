"""The probing loop: climbs the ladder again and again in its own thread until a generation holds.

It probes at once after a change or a new log line (``wake``) and backs off to ``max_interval`` while nothing
changes, so READY is reported promptly without hammering a loading server. One thread climbs: never more than
one generation in flight. Each Probe goes to the sink the moment its rung is checked, not when the climb ends
(a generation may take up to --generation-timeout). When the engine is unknown, the loop climbs no higher
than HTTP until the engine-specific endpoints were asked, all at once within a fixed budget
(:mod:`firstlight.probes.identify`), so the engine is named before READY and endpoints that never answer delay
it by that budget at most. Nothing a server does ends this thread: a failure inside a climb is a note, and the
loop goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from firstlight.engines.profile import Endpoints
from firstlight.probes.ladder import Ladder
from firstlight.samplers.base import Guard
from firstlight.timeline import Level, Observation, Probe, SourceNote
from firstlight.wire import clean_text

BACKOFF = 1.5  # each quiet round (nothing changed) polls this much later, up to the maximum period


def next_interval(interval: float, changed: bool, min_interval: float, max_interval: float) -> float:
    """The polling period after a climb: the minimum after a change, else backed off by ``BACKOFF``."""
    return min_interval if changed else min(max_interval, interval * BACKOFF)


@dataclass(frozen=True)
class EngineIdentified(Observation):
    """The server's engine-specific endpoints said who it is (for the session to pick a profile; the judge
    ignores it)."""

    engine: str = "generic"
    how: str = ""
    kind: ClassVar[str] = "engine"


class LadderLoop:

    name = "probe"

    def __init__(self, ladder: Ladder, min_interval: float, max_interval: float, identify: bool = False) -> None:
        self.ladder = ladder
        self.sink: Callable[[Observation], None] = lambda obs: None  # ``start`` gives the sink
        self.identify = identify  # engine unknown: ask its endpoints once HTTP answers
        self.min_interval, self.max_interval = min_interval, max_interval
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self._endpoints: Endpoints | None = None  # learnt by the session, applied by this thread between climbs
        self._lock = threading.Lock()
        self._guard = Guard("probe", "the probing loop", clock=ladder.clock)
        self.thread = threading.Thread(target=self._run, name="firstlight-ladder", daemon=True)

    def start(self, sink: Callable[[Observation], None]) -> None:
        self.sink = sink
        self.thread.start()

    def stop(self) -> None:
        """No climb after this one: the thread ends at its next check (a climb under way ends by its deadline)."""
        self.stopped.set()
        self.wake.set()

    def sync(self, timeout: float) -> None:
        """Nothing to wait for: each probe goes to the sink as it is known."""

    def use_endpoints(self, endpoints: Endpoints) -> None:
        """From the session's thread: the ladder takes them before its next climb (never during one)."""
        with self._lock:
            self._endpoints = endpoints
        self.wake.set()

    def _emit(self, p: Probe) -> None:
        if not self.stopped.is_set():
            self.sink(p)

    def _climb(self, top: Level = Level.GENERATION) -> list[Probe]:
        """One climb, its probes sunk as they come; whatever escapes the ladder is a note, never the end."""
        try:
            return self.ladder.climb(top, sink=self._emit)
        except Exception as e:  # the ladder turns failures into probes; this is the last net
            why = f"{type(e).__name__}: {clean_text(str(e), 160)}"
            self.sink(SourceNote(self.ladder.clock(), "probe", f"probe failed inside firstlight: {why}"))
            return []

    def _identify_first(self) -> list[Probe]:
        """Engine unknown: climb no higher than HTTP until it answers, then ask the engine-specific endpoints who
        it is (within the identification budget), before any generation. The climb's probes."""
        results = self._climb(Level.HTTP)
        if not any(p.ok and p.level >= Level.HTTP for p in results):
            return results
        self.identify = False
        try:
            found = self.ladder.identify()
        except Exception:  # best effort: the generic profile keeps working
            found = None
        if found is not None and not self.stopped.is_set():
            self.sink(EngineIdentified(self.ladder.clock(), found[0], found[1]))
        return results

    def _take_endpoints(self) -> None:
        with self._lock:
            endpoints, self._endpoints = self._endpoints, None
        if endpoints is not None:
            self.ladder.use_endpoints(endpoints)

    def _run(self) -> None:
        """The climbs, under the guard of every thread, until READY or ``stop``; then the ladder's connections
        are closed (nothing else uses them)."""
        try:
            self._guard.run(self._climbs, self.sink, stop=self.stopped, again_s=self.max_interval)
        finally:
            self.ladder.close()

    def _climbs(self) -> None:
        interval = self.min_interval
        last: tuple[int, bool] | None = None
        while not self.stopped.is_set():
            self.wake.clear()
            self._take_endpoints()
            if self.identify:  # backs off like any climb while the port refuses (it polled at min_interval)
                results = self._identify_first()
                if not self.identify:
                    continue  # HTTP answered: climb on at once
            else:
                results = self._climb()
            if self.stopped.is_set():
                return
            top = max((p.level for p in results if p.ok), default=Level.NONE)
            if top == Level.GENERATION:
                return
            state = (int(top), bool(results and results[-1].ok))
            interval = next_interval(interval, state != last, self.min_interval, self.max_interval)
            last = state
            self.wake.wait(interval)
