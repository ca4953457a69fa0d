"""The samplers' idle back-off: slower while nothing moves, never above its cap, the base rate again on a change.

The in-process tests of this subject; the others: ``tests/e2e/samplers/test_base.py``.
"""

from __future__ import annotations

import queue
import threading

from firstlight.samplers.base import IDLE_CAP_S, Backoff, Guard, Sampler, idle_cap
from firstlight.timeline import CollectorStat, Observation, SourceNote, WeightsTotal
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


# -- a sample that raises is reported, never a silent thread death -----------------------------------------
class Flaky(Sampler):
    """Raises on the samples it is told to, returns one observation otherwise."""

    name = "flaky"

    def __init__(self, fail: list[bool]) -> None:
        super().__init__(0.01)
        self.plan = list(fail)
        self.done = threading.Event()

    def sample(self) -> list[Observation]:
        if not self.plan:
            self.done.set()
            return []
        if self.plan.pop(0):
            raise OSError(5, "Input/output error")
        return [WeightsTotal(self.clock(), 1, 1)]


def _run(plan: list[bool]) -> tuple[list[Observation], Flaky]:
    got: queue.Queue[Observation] = queue.Queue()
    s = Flaky(plan)
    s.start(got.put)
    assert s.done.wait(30), "the sampler's thread died"
    s.stop()
    out = []
    while not got.empty():
        out.append(got.get())
    return out, s


def test_a_sample_that_raises_is_one_failed_note_and_the_sampler_goes_on():
    out, s = _run([True, True, True, False])
    notes = [o for o in out if isinstance(o, SourceNote)]
    assert [n.failed for n in notes] == [True, False]  # one note for three identical failures, then "works again"
    assert notes[0].source == "flaky" and "OSError" in notes[0].message and "Input/output error" in notes[0].message
    assert notes[1].message == "sampler works again"
    assert sum(isinstance(o, WeightsTotal) for o in out) == 1 and s.failures == 3


def test_a_new_error_is_reported_again():
    class Two(Flaky):
        def sample(self) -> list[Observation]:
            if len(self.plan) == 2:
                self.plan.pop()
                raise ValueError("first")
            if len(self.plan) == 1:
                self.plan.pop()
                raise KeyError("second")
            self.done.set()
            return []

    got: queue.Queue[Observation] = queue.Queue()
    s = Two([True, True])
    s.start(got.put)
    assert s.done.wait(30)
    s.stop()
    notes = []
    while not got.empty():
        notes.append(got.get())
    failed = [n for n in notes if isinstance(n, SourceNote) and n.failed]
    assert [("ValueError" in n.message, "KeyError" in n.message) for n in failed] == [(True, False), (False, True)]


def test_each_sample_is_counted_with_its_outcome_and_wall_time():
    s = Flaky([False, True, True])
    assert s.stat() == CollectorStat("sampler", "flaky")  # before the first sample: nothing known, not "failed"
    outcomes = []
    for _ in range(3):
        s._sample_reported(lambda obs: None)
        st = s.stat()
        outcomes.append((st.runs, st.failures, st.success))
        assert st.duration_s is not None and 0 <= st.duration_s < 5
    assert outcomes == [(1, 0, True), (2, 1, False), (3, 2, False)]
    assert s.failures == 2 and s.stat().errors == 0  # a sampler's failure is its own: no separate error count
    s._sample_reported(lambda obs: None)  # the plan is done: a sample that works again
    assert (s.stat().runs, s.stat().success) == (4, True)


def test_a_failed_samples_note_words_time_and_idle_state():
    class Raises(Sampler):
        name = "raiser"

        def __init__(self, errors: list[Exception | None]) -> None:
            super().__init__(0.01)
            self.errors = errors
            self.clock = lambda: 1234.5

        def sample(self) -> list[Observation]:
            e = self.errors.pop(0)
            if e is not None:
                raise e
            return []

    s = Raises([RuntimeError(), ValueError("x" * 300), None])
    (empty,) = s._sample_reported(lambda obs: None)
    assert isinstance(empty, SourceNote) and (empty.t, empty.source, empty.failed) == (1234.5, "raiser", True)
    assert empty.message == ("sampler failed: RuntimeError: no message; its signal is missing until it samples "
                             "again")
    assert s.moved is False  # a failed sample saw nothing move: the idle back-off applies
    (long,) = s._sample_reported(lambda obs: None)
    assert long.message == f"sampler failed: ValueError: {'x' * 200}; its signal is missing until it samples again"
    s.moved = True
    (back,) = s._sample_reported(lambda obs: None)
    assert (back.t, back.source, back.message, back.failed) == (1234.5, "raiser", "sampler works again", False)
    assert s.moved is True  # a sample that worked leaves ``moved`` to the sampler


def test_a_first_sample_that_works_says_nothing_and_a_nudge_without_backoff_is_a_no_op():
    s = Flaky([False])
    out = s._sample_reported(lambda obs: None)
    assert [type(o) for o in out] == [WeightsTotal]  # no "works again" before anything failed
    assert s.backoff is None
    s.nudge()  # no back-off to reset: nothing happens, nothing raises
    assert not s._nudged.is_set()


def test_the_samplers_thread_is_a_named_daemon():
    s = Flaky([])
    s.start(lambda obs: None)
    try:
        assert s._thread is not None and s._thread.name == "firstlight-flaky" and s._thread.daemon
    finally:
        s.stop()


def test_every_kind_of_source_has_the_one_shape():
    import inspect

    from firstlight.probes.loop import LadderLoop
    from firstlight.samplers.gpu import GpuSampler
    from firstlight.samplers.logs import FileFollower, PipeReader
    from firstlight.samplers.models_sse import ModelsSSE
    from firstlight.samplers.process import ProcessTreeSampler
    from firstlight.units.journal.follow import JournalSource

    for kind in (GpuSampler, ProcessTreeSampler, FileFollower, PipeReader, ModelsSSE, LadderLoop, JournalSource):
        assert list(inspect.signature(kind.start).parameters) == ["self", "sink"], kind
        assert list(inspect.signature(kind.stop).parameters) == ["self"], kind
        assert list(inspect.signature(kind.sync).parameters) == ["self", "timeout"], kind


def test_the_guard_says_an_escape_once_per_error_and_starts_a_loop_again():
    """The one guard of every thread: a loop that raises is reported (a failed note, a failure in its book), the
    same error twice is said once, and a loop that may start again does, until it returns."""
    notes: list[SourceNote] = []
    runs: list[int] = []

    def loop() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise KeyError("nobody foresaw this")

    g = Guard("log", "stdout reader", clock=lambda: 7.0)
    g.run(loop, notes.append, again_s=0.0)
    assert len(runs) == 3 and g.book.failures == 2
    assert [(n.t, n.source, n.message, n.failed) for n in notes] == [
        (7.0, "log", "stdout reader failed: KeyError: 'nobody foresaw this'; started again in 0s", True)]

    once = Guard("log", "log file reader")
    once.run(lambda: [][0], notes.append)  # not started again: its signal is missing from then on
    assert notes[-1].failed and notes[-1].message.endswith("it has stopped: its signal is missing from here on")
    assert once.step(lambda: 1, notes.append) == 1 and notes[-1].message == "log file reader works again"
