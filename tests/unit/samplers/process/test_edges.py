"""samplers/process.py's rules at the edges its mutation run found untested: when a sample has moved, bytes read as
increases, names cut by the kernel at 15 characters, totals over children that die at different samples, the
daemon note's list of pids, OOM traces only for a death that could be one, and the busiest thread's exact rate.
Real processes wherever the rule is about one; the clock is the test's own wherever a rate is computed.

The in-process tests of this subject; the others: ``tests/e2e/samplers/test_process_edges.py``.
"""

from __future__ import annotations

import os

import pytest

from firstlight.samplers.process import (
    MOVED_CPU_CORES,
    MOVED_RSS_BYTES,
    ProcessTreeSampler,
    _bytes_read,
)
from firstlight.samplers.proctable import IoCounters
from firstlight.timeline import ProcInfo


# -- _bytes_read: what a process read since its last sample ------------------------------------------------------
def test_bytes_read_since_the_last_sample_is_the_larger_increase_of_the_two_counters():
    """Bytes read since the last sample: the larger of the read() increase and the storage increase."""
    assert _bytes_read(IoCounters(100, 10), IoCounters(150, 10)) == 50  # read() calls only
    assert _bytes_read(IoCounters(100, 40), IoCounters(100, 90)) == 50  # mapped pages faulted in only
    assert _bytes_read(IoCounters(100, 40), IoCounters(130, 90)) == 50
    assert _bytes_read(IoCounters(100, 40), IoCounters(170, 60)) == 70


def test_bytes_read_is_zero_when_neither_counter_grew_and_never_negative():
    """Nothing read since the last sample counts 0; counters lower than before (another process on that pid) too."""
    assert _bytes_read(IoCounters(100, 40), IoCounters(100, 40)) == 0
    assert _bytes_read(IoCounters(100, 40), IoCounters(90, 30)) == 0


def test_bytes_read_of_a_process_first_seen_is_all_it_read_before():
    """A process first seen (or first readable) counts everything it read before: the larger running total."""
    assert _bytes_read(None, IoCounters(100, 40)) == 100
    assert _bytes_read(IoCounters(-1, -1), IoCounters(30, 70)) == 70


# -- _moved: whether anything changed since the previous sample --------------------------------------------------
def _a(state: str = "S", pid: int = 10) -> ProcInfo:
    return ProcInfo(pid, "x", state, 0.0, 0, 1.0)


@pytest.fixture
def mover() -> ProcessTreeSampler:
    return ProcessTreeSampler(os.getpid())


def test_the_first_sample_and_a_sample_at_the_same_time_have_moved(mover: ProcessTreeSampler):
    """With nothing to compare with (no previous sample, or no time since it) a sample has moved."""
    assert mover._moved(100.0, 1.0, 5000, 3 << 20, [_a()]) is True
    assert mover._moved(100.0, 1.0, 5000, 3 << 20, [_a()]) is True


def test_a_sample_where_nothing_changed_has_not_moved(mover: ProcessTreeSampler):
    """Same members and states, same bytes read, same RSS, no CPU: not moved."""
    mover._moved(100.0, 1.0, 5000, 3 << 20, [_a()])
    assert mover._moved(110.0, 1.0, 5000, 3 << 20, [_a()]) is False


def test_cpu_under_the_threshold_has_not_moved(mover: ProcessTreeSampler):
    """CPU since the last sample is counted in cores (CPU seconds over the seconds between samples)."""
    mover._moved(100.0, 1.0, 0, 0, [_a()])
    assert mover._moved(110.0, 1.1, 0, 0, [_a()]) is False  # 0.01 core


def test_cpu_at_the_threshold_has_moved(mover: ProcessTreeSampler):
    """CPU at exactly MOVED_CPU_CORES since the last sample has moved."""
    mover._moved(100.0, 0.0, 0, 0, [_a()])
    assert mover._moved(101.0, MOVED_CPU_CORES, 0, 0, [_a()]) is True


def test_rss_changed_by_the_threshold_either_way_has_moved(mover: ProcessTreeSampler):
    """RSS grown or shrunk by exactly MOVED_RSS_BYTES has moved, with nothing else changed."""
    mover._moved(100.0, 0.0, 0, 5 << 20, [_a()])
    assert mover._moved(200.0, 0.0, 0, (5 << 20) + MOVED_RSS_BYTES, [_a()]) is True
    assert mover._moved(300.0, 0.0, 0, 5 << 20, [_a()]) is True
    assert mover._moved(400.0, 0.0, 0, (5 << 20) + MOVED_RSS_BYTES - 1, [_a()]) is False


def test_a_byte_read_alone_has_moved(mover: ProcessTreeSampler):
    """One more byte read, nothing else changed: moved."""
    mover._moved(100.0, 0.0, 0, 0, [_a()])
    assert mover._moved(200.0, 0.0, 1, 0, [_a()]) is True


def test_a_state_or_member_change_alone_has_moved(mover: ProcessTreeSampler):
    """A member changing state, or a member appearing, with nothing else changed: moved."""
    mover._moved(100.0, 0.0, 0, 0, [_a("S")])
    assert mover._moved(200.0, 0.0, 0, 0, [_a("R")]) is True
    assert mover._moved(300.0, 0.0, 0, 0, [_a("R"), _a("S", 11)]) is True
    assert mover._moved(400.0, 0.0, 0, 0, [_a("R"), _a("S", 11)]) is False


def test_the_default_interval_is_one_second():
    """A sampler made without an interval samples every second."""
    assert ProcessTreeSampler(os.getpid()).interval == 1.0
