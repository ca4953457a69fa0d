"""The samplers' idle back-off: slower while nothing moves, never above its cap, the base rate again on a change.

The process-starting tests of this subject; the others: ``tests/unit/samplers/test_base.py``.
"""

from __future__ import annotations

import subprocess
import sys

from firstlight.samplers.process import ProcessTreeSampler
from firstlight.timeline import ProcessSample
from tests.support.common import wait_for

SLEEPY_TREE = """
import subprocess, sys, time
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(kid.pid, flush=True)
sys.stdin.readline()
kid.kill(); kid.wait()
print("killed", flush=True)
time.sleep(600)
"""


def _last(sampler: ProcessTreeSampler) -> ProcessSample:
    s = sampler.sample()[-1]
    assert isinstance(s, ProcessSample)
    return s


def test_the_process_sampler_says_nothing_moved_in_a_sleeping_tree_and_that_a_dying_child_did():
    p = subprocess.Popen([sys.executable, "-c", SLEEPY_TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout is not None and p.stdin is not None
        kid = int(p.stdout.readline())
        sampler = ProcessTreeSampler(p.pid)
        wait_for(lambda: kid in {i.pid for i in _last(sampler).procs}, 30, "the child in the tree")
        # the child's interpreter start-up is CPU: a later pair of samples sees the tree asleep
        wait_for(lambda: _last(sampler) and not sampler.moved, 60, "a sample in which nothing moved")
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "killed"
        s = _last(sampler)
        assert [d.pid for d in s.died] == [kid]
        assert sampler.moved  # the tree lost a member: the base rate again
    finally:
        p.kill()
        p.wait()
