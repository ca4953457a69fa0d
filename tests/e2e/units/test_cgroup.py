"""The cgroup source on real processes, listed in a cgroup directory of our own (these machines have no
systemd to make one): processes outside each other's tree are all sampled, the unit's memory and device
reads come from memory.current and io.stat, and the end of the main process ends the attempt.

The process-starting tests of this subject; the others: ``tests/unit/units/test_cgroup.py``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstlight.timeline import ProcessSample, SourceNote
from firstlight.units.cgroup import CgroupSampler, cgroup_dir, read_io_rbytes, read_pids
from tests.support.units_cgroup import _cgroup, _sample

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait(10)


def test_every_process_of_the_cgroup_with_the_units_memory_and_device_reads(tmp_path: Path, procs):
    procs += [subprocess.Popen(SLEEPER) for _ in range(3)]  # siblings: none is a child of another
    pids = [p.pid for p in procs]
    d = _cgroup(tmp_path, pids, memory=7 << 30, rbytes=(3 << 30, 1 << 30))
    assert cgroup_dir("/system.slice/llm.service", tmp_path / "sys" / "fs" / "cgroup") == d
    s = CgroupSampler(d, main_pid=pids[0], interval=0.1)
    first = s.sample()
    note = next(o for o in first if isinstance(o, SourceNote))
    assert "memory.current" in note.message and "io.stat" in note.message
    sample = next(o for o in first if isinstance(o, ProcessSample))
    assert sample.alive and sorted(p.pid for p in sample.procs) == sorted(pids)
    assert sample.root_state is not None
    assert sample.rss_bytes == 7 << 30  # the unit's memory.current
    assert sample.read_bytes >= 4 << 30  # io.stat's device reads, summed over devices


def test_a_subcgroup_counts_and_a_v1_cgroup_falls_back_to_the_processes(tmp_path: Path, procs):
    procs += [subprocess.Popen(SLEEPER) for _ in range(2)]
    d = _cgroup(tmp_path, [procs[0].pid], memory=None)
    (d / "worker").mkdir()
    (d / "worker" / "cgroup.procs").write_text(f"{procs[1].pid}\n")
    assert read_pids(d) == [procs[0].pid, procs[1].pid]
    assert read_io_rbytes(d) is None
    s = CgroupSampler(d, main_pid=None, interval=0.1)
    first = s.sample()
    assert "no memory.current" in next(o for o in first if isinstance(o, SourceNote)).message
    sample = next(o for o in first if isinstance(o, ProcessSample))
    assert {p.pid for p in sample.procs} == {procs[0].pid, procs[1].pid}
    assert sample.rss_bytes == sum(p.rss_bytes for p in sample.procs)


def test_the_main_process_exiting_ends_the_attempt_with_systemds_code(tmp_path: Path, procs):
    procs += [subprocess.Popen(SLEEPER) for _ in range(2)]
    d = _cgroup(tmp_path, [p.pid for p in procs])
    s = CgroupSampler(d, main_pid=procs[0].pid, interval=0.1, exit_code=lambda: 1)
    assert _sample(s).alive
    procs[0].kill()
    procs[0].wait(10)
    gone = s.sample()
    assert gone == [ProcessSample(gone[0].t, alive=False, exit_code=1)]
    assert s.sample() == []  # said once


def test_without_a_main_pid_another_process_takes_over_until_the_cgroup_is_empty(tmp_path: Path, procs):
    procs += [subprocess.Popen(SLEEPER) for _ in range(2)]
    d = _cgroup(tmp_path, [p.pid for p in procs])
    s = CgroupSampler(d, main_pid=None, interval=0.1)
    assert _sample(s).alive
    procs[0].kill()
    procs[0].wait(10)
    (d / "cgroup.procs").write_text(f"{procs[1].pid}\n")  # the kernel drops a dead process from the list
    after = _sample(s)
    assert after.alive and [p.pid for p in after.procs] == [procs[1].pid]
    assert [p.pid for p in after.died] == [procs[0].pid]
    procs[1].kill()
    procs[1].wait(10)
    (d / "cgroup.procs").write_text("")
    assert not _sample(s).alive
