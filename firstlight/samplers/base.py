"""A sampler observes one signal source on its own clock and hands observations to a sink."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from firstlight.timeline import Observation

Sink = Callable[[Observation], None]


class Sampler:
    """Subclasses implement ``sample``; ``start`` runs it every ``interval`` seconds in a daemon thread."""

    name = "sampler"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> list[Observation]:
        raise NotImplementedError

    def start(self, sink: Sink) -> None:
        self._thread = threading.Thread(target=self._run, args=(sink,), name=f"firstlight-{self.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self, sink: Sink) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            for obs in self.sample():
                sink(obs)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))
