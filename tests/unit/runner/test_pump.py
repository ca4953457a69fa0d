"""The pump between the sources' queue and the judge: a process's exit is heard after its last lines, and a
busy queue is drained for its budget, not for the idle wait."""

from __future__ import annotations

import queue
import threading
import time

from firstlight.runner.pump import Pump, drain
from firstlight.timeline import Interrupted, LogLine, Observation, ProcessSample, SourceNote

CHECK_S = 60


def pump(q: queue.Queue[Observation], fed: list[Observation], left: list[Observation] | None = None) -> Pump:
    return Pump(q, fed.append, lambda: list(left or []), lambda: None)  # type: ignore[arg-type, return-value]


def test_an_exit_is_fed_after_the_lines_the_logs_still_held_and_before_anything_else() -> None:
    q: queue.Queue[Observation] = queue.Queue()
    exit_sample = ProcessSample(3.0, alive=False, exit_code=1)
    line = LogLine(2.0, "RuntimeError: CUDA out of memory", "stderr", 7)
    stop = Interrupted(2.5, "SIGTERM")
    note = SourceNote(2.6, "gpu", "nvidia-smi failed")
    fed: list[Observation] = []
    q.put(exit_sample)
    pump(q, fed, [line, note, stop])._drain_for(CHECK_S, CHECK_S)
    assert fed == [line, stop, exit_sample, note]


def test_a_busy_queue_is_drained_for_its_budget_not_for_the_idle_wait() -> None:
    q: queue.Queue[Observation] = queue.Queue()
    fed: list[Observation] = []
    done = threading.Event()

    def produce() -> None:  # an observation every 20 ms, for far longer than the budget
        n = 0
        while not done.is_set():
            q.put(SourceNote(float(n), "test", "tick"))
            n += 1
            time.sleep(0.02)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        before = time.monotonic()
        pump(q, fed)._drain_for(0.3, CHECK_S)
        took = time.monotonic() - before
    finally:
        done.set()
        t.join(CHECK_S)
    assert fed and took < CHECK_S / 4  # the budget after the first observation (0.3 s), never the idle 60 s


def test_an_interruption_ends_the_drain_at_once_and_drain_takes_what_is_queued() -> None:
    q: queue.Queue[Observation] = queue.Queue()
    fed: list[Observation] = []
    stop = Interrupted(1.0, "SIGINT")
    after = SourceNote(1.1, "test", "after the stop")
    q.put(stop)
    q.put(after)
    pump(q, fed)._drain_for(CHECK_S, CHECK_S)
    assert fed == [stop] and drain(q) == [after] and drain(q) == []
