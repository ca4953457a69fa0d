"""The probing loop: climbs the ladder again and again in its own thread until a generation holds.

It probes at once after a change or a new log line (``wake``) and backs off to ``max_interval`` while nothing
changes, so READY is reported promptly without hammering a loading server. One thread climbs: never more than
one generation in flight. Each Probe is put on the sink the moment its rung is checked, not when the climb
ends (a generation may take up to --generation-timeout). Engine identification by endpoints runs once, in a
thread of its own within a fixed budget, so it never delays the climb. Nothing a server does can end this
thread: a failure inside a climb is a note, and the loop goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from firstlight.probes.ladder import Ladder
from firstlight.timeline import Level, Observation, Probe, SourceNote
from firstlight.wire import clean_text


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
        self.identifier: threading.Thread | None = None

    def start(self) -> None:
        self.thread.start()

    def _emit(self, p: Probe) -> None:
        if not self.stop.is_set():
            self.sink(p)

    def _run(self) -> None:
        interval = self.min_interval
        last: tuple[int, bool] | None = None
        while not self.stop.is_set():
            self.wake.clear()
            try:
                results = self.ladder.climb(sink=self._emit)
            except Exception as e:  # the ladder turns failures into probes; this is the last net
                results = []
                why = f"{type(e).__name__}: {clean_text(str(e), 160)}"
                self.sink(SourceNote(self.ladder.clock(), "probe", f"probe failed inside firstlight: {why}"))
            if self.stop.is_set():
                return
            top = max((p.level for p in results if p.ok), default=Level.NONE)
            if top == Level.GENERATION:
                return
            if self.identify and top >= Level.HTTP:
                self.identify = False
                self.identifier = threading.Thread(target=self._identify, name="firstlight-identify", daemon=True)
                self.identifier.start()
            state = (int(top), bool(results and results[-1].ok))
            interval = self.min_interval if state != last else min(self.max_interval, interval * 1.5)
            last = state
            self.wake.wait(interval)

    def _identify(self) -> None:
        try:
            found = self.ladder.identify()
        except Exception:  # best effort: the generic profile keeps working
            return
        if found is not None and not self.stop.is_set():
            self.sink(EngineIdentified(self.ladder.clock(), found[0], found[1]))
