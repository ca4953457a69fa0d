"""The cgroup source on real processes, listed in a cgroup directory of our own (these machines have no
systemd to make one): processes outside each other's tree are all sampled, the unit's memory and device
reads come from memory.current and io.stat, and the end of the main process ends the attempt.

The in-process tests of this subject; the others: ``tests/e2e/units/test_cgroup.py``.
"""

from __future__ import annotations

from pathlib import Path

from firstlight.units.cgroup import CgroupSampler
from tests.support.units_cgroup import _cgroup, _sample


def test_an_empty_cgroup_is_no_process(tmp_path: Path):
    d = _cgroup(tmp_path, [])
    assert not _sample(CgroupSampler(d, interval=0.1)).alive
