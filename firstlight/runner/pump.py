"""The pump: the only reader of the observation queue and the only caller of the judge.

It takes what the sources put on the queue, feeds the judge in arrival order and tells the reporters what
happened. It assesses within ``ASSESS_EVERY_S`` of an observation whatever else arrives (a flood of log lines can
delay neither a verdict nor a signal), and every ``IDLE_ASSESS_S`` while nothing arrives (the timeouts, judged in
seconds, are late by that much at most; waking 20 times a second for nothing cost 0.7 % of a core). A process
exit waits until the process's last lines (often the root cause) are read.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

from firstlight.assessment import Assessment
from firstlight.timeline import Interrupted, LogLine, Observation, ProcessSample

ASSESS_EVERY_S = 0.05
IDLE_ASSESS_S = 0.25


class Pump:
    def __init__(self, q: queue.Queue[Observation], feed: Callable[[Observation], None],
                 settle_logs: Callable[[], list[Observation]], assess: Callable[[], Assessment],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.q = q
        self.feed = feed  # one observation into the judge (and the record, the reporters)
        self.settle_logs = settle_logs  # after an exit: everything the log sources still hold
        self.assess = assess
        self.clock = clock

    def run(self) -> Assessment:
        """Until the judge's verdict is final."""
        while True:
            self._drain_for(ASSESS_EVERY_S, IDLE_ASSESS_S)
            a = self.assess()
            if a.final:
                return a

    def _drain_for(self, budget: float, idle: float) -> None:
        """Until ``budget`` after the first observation, or ``idle`` if none comes."""
        deadline = self.clock() + idle
        first = True
        while True:
            left = deadline - self.clock()
            if left <= 0:
                return
            try:
                obs = self.q.get(timeout=left)
            except queue.Empty:
                return
            if first:
                first, deadline = False, min(deadline, self.clock() + budget)
            if isinstance(obs, ProcessSample) and not obs.alive:
                self._exit_after_logs(obs)
                return
            self.feed(obs)
            if isinstance(obs, Interrupted):
                return

    def _exit_after_logs(self, exit_sample: ProcessSample) -> None:
        """The process is gone, but its last lines may still be in a pipe or a file: the judge hears them before
        it hears of the exit; anything else waits its turn."""
        later: list[Observation] = []
        for obs in self.settle_logs():
            if isinstance(obs, LogLine | Interrupted):
                self.feed(obs)
            else:
                later.append(obs)
        self.feed(exit_sample)
        for obs in later:
            self.feed(obs)


def drain(q: queue.Queue[Observation]) -> list[Observation]:
    """Everything queued right now."""
    out: list[Observation] = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out
