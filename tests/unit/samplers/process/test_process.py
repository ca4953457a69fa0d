"""samplers/process.py's rules, each against real processes: when the tree counts as gone and with which code, a
launcher that daemonized, totals that never go backwards, and the busiest thread. The clock given to the sampler
is the test's own where a rate is computed, so no figure depends on the machine's load.

The in-process tests of this subject; the others: ``tests/e2e/samplers/test_process.py``.
"""

from __future__ import annotations

import os

import psutil

from firstlight.samplers.process import _task_cpu


def test_task_cpu_reads_each_threads_name_state_and_time():
    tasks = _task_cpu(os.getpid())
    assert tasks and all(isinstance(tid, int) and st and cpu >= 0 for tid, _, st, cpu in tasks)
    me = next(t for t in tasks if t[0] == os.getpid())
    assert me[1] == psutil.Process().name() and me[2] == "R"  # the thread reading its own stat is running
    assert _task_cpu(2**22 + 12345) == []
