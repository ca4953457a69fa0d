"""The samplers' idle back-off: slower while nothing moves, never above its cap, the base rate again on a change.

The in-process tests of this subject; the others: ``tests/e2e/test_sampler_backoff.py``.
"""

from __future__ import annotations

import threading

from firstlight.samplers.base import IDLE_CAP_S, Backoff, Sampler, idle_cap
from firstlight.timeline import Observation
from tests.support.common import wait_for


def test_backoff_doubles_while_idle_up_to_its_cap_and_is_the_base_again_after_a_change():
    b = Backoff(1.0, 4.0)
    assert [b.after(False) for _ in range(5)] == [2.0, 4.0, 4.0, 4.0, 4.0]  # never above the cap
    assert b.after(True) == 1.0  # a sample that moved: the base rate at once
    assert b.after(False) == 2.0
    b.reset()  # a nudge (a log line, a probe's change)
    assert b.interval == 1.0
    assert Backoff(1.0, 0.5).after(False) == 1.0  # a cap below the base: no back-off at all


def test_the_cap_is_far_below_the_stall_timeout():
    assert idle_cap(None) == IDLE_CAP_S == 4.0
    assert idle_cap(120) == 4.0
    assert idle_cap(20) == 2.0  # the units' stall timeout: a tenth of it
    assert all(idle_cap(t) <= t / 10 for t in (1, 5, 20, 40, 120, 3600))


class Scripted(Sampler):
    """Says it moved or not as the test tells it; counts its samples."""

    def __init__(self, interval: float) -> None:
        super().__init__(interval)
        self.samples = 0
        self.idle = threading.Event()  # set: nothing moves
        self.seen = threading.Condition()

    def sample(self) -> list[Observation]:
        with self.seen:
            self.samples += 1
            self.seen.notify_all()
        self.moved = not self.idle.is_set()
        return []


def test_a_backed_off_sampler_samples_again_as_soon_as_it_is_nudged():
    s = Scripted(0.01)
    s.backoff = Backoff(0.01, 3600.0)  # a cap no test waits out: only the nudge can bring the next sample
    s.backoff.interval = 1800.0  # backed off already: the next idle sample waits an hour
    s.idle.set()
    s.start(lambda obs: None)
    try:
        wait_for(lambda: s.samples >= 1 and s.backoff is not None and s.backoff.interval == 3600, 60,
                 "a sample, then the hour-long wait")
        before = s.samples
        s.nudge()
        wait_for(lambda: s.samples > before, 30, "a sample right after the nudge")
        assert s.backoff.interval < 3600  # the back-off started over from the base
    finally:
        s.stop()


def test_a_moving_sampler_never_backs_off():
    s = Scripted(0.01)
    s.backoff = Backoff(0.01, 3600.0)
    s.start(lambda obs: None)
    try:
        wait_for(lambda: s.samples >= 20, 60, "20 samples")
        assert s.backoff.interval == 0.01
    finally:
        s.stop()
