"""Samplers observe real things: a real process tree, real files, a recorded NVML snapshot.

The process-starting tests of this subject; the others: ``tests/unit/samplers/test_samplers.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from firstlight.samplers.process import ProcessTreeSampler
from firstlight.timeline import ProcessSample
from tests.support.common import wait_for

TREE = """
import os, subprocess, sys, time
path = sys.argv[1]
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
with open(path, "rb") as f:
    while f.read(1 << 20):
        pass
print("read", flush=True)
sys.stdin.readline()  # the test has sampled the whole tree: now one worker dies
kids[0].kill(); kids[0].wait()
print("killed", flush=True)
time.sleep(60)
"""


def test_process_tree_sampler_sees_children_reads_and_a_dying_worker(tmp_path: Path):
    data = tmp_path / "weights.bin"
    with open(data, "wb") as f:
        f.truncate(32 << 20)
    p = subprocess.Popen([sys.executable, "-c", TREE, str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        sampler = ProcessTreeSampler(p.pid, interval=0.1)
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "read"
        s = sampler.sample()[-1]
        assert isinstance(s, ProcessSample) and s.alive
        assert len(s.procs) == 4 and s.threads >= 4
        assert s.read_bytes >= 32 << 20
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "killed"
        died = wait_for(lambda: [d for x in sampler.sample() if isinstance(x, ProcessSample) for d in x.died], 10,
                        "the dead worker")
        assert len(died) == 1
        s2 = sampler.sample()[-1]
        assert isinstance(s2, ProcessSample) and s2.read_bytes >= s.read_bytes  # totals never go backwards
    finally:
        p.kill()
        p.wait()
    out = sampler.sample()
    assert isinstance(out[0], ProcessSample) and not out[0].alive
    assert sampler.sample() == []  # says it once
