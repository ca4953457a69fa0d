"""The probing loop: climbs the ladder again and again in its own thread until a generation holds.

It probes at once after a change or a new log line (``wake``) and backs off to ``max_interval`` while nothing
changes, so READY is reported promptly without hammering a loading server. One thread: never more than one
generation in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from firstlight.probes.ladder import Ladder
from firstlight.timeline import Level, Observation


@dataclass(frozen=True)
class EngineIdentified(Observation):
    """The server's engine-specific endpoints said who it is (for the session to pick a profile; the judge
    ignores it)."""

    engine: str = "generic"
    how: str = ""
    kind: ClassVar[str] = "engine"


class LadderLoop:

    def __init__(self, ladder: Ladder, sink: Callable[[Observation], None], min_interval: float,
                 max_interval: float, identify: bool = False) -> None:
        self.ladder, self.sink = ladder, sink
        self.identify = identify  # engine unknown: ask its endpoints once HTTP answers
        self.min_interval, self.max_interval = min_interval, max_interval
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="firstlight-ladder", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        interval = self.min_interval
        last: tuple[int, bool] | None = None
        while not self.stop.is_set():
            self.wake.clear()
            results = self.ladder.climb()
            if self.stop.is_set():
                return
            for p in results:
                self.sink(p)
            top = max((p.level for p in results if p.ok), default=Level.NONE)
            if top == Level.GENERATION:
                return
            if self.identify and top >= Level.HTTP:
                self.identify = False
                found = self.ladder.identify()
                if found is not None:
                    self.sink(EngineIdentified(time.time(), found[0], found[1]))
            state = (int(top), bool(results and results[-1].ok))
            interval = self.min_interval if state != last else min(self.max_interval, interval * 1.5)
            last = state
            self.wake.wait(interval)
