"""The process table read from /proc: a real tree, read through the threads' children files and by a scan."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil

from firstlight.samplers.proctable import TreeReader, read_io, read_stat
from tests.support.common import wait_for

# a child forked from the main thread, one from another thread (it lands in that thread's children file), and a
# grandchild
TREE = """
import subprocess, sys, threading, time
sleep = [sys.executable, "-c", "import subprocess, sys, time; time.sleep(600)"]
nest = [sys.executable, "-c", "import subprocess, sys, time; k = subprocess.Popen(sys.argv[1:]); time.sleep(600)",
        *sleep]
kids = [subprocess.Popen(nest)]
threading.Thread(target=lambda: kids.append(subprocess.Popen(sleep))).start()
time.sleep(600)
"""


def test_the_tree_is_the_same_from_the_threads_children_files_and_from_a_scan():
    p = subprocess.Popen([sys.executable, "-c", TREE])
    try:
        wait_for(lambda: len(psutil.Process(p.pid).children(recursive=True)) == 3, 30, "3 descendants")
        expected = {c.pid for c in psutil.Process(p.pid).children(recursive=True)}
        walked, table = TreeReader().below([p.pid])
        assert table is None  # a handful of threads: fewer files than the machine's processes
        scanning = TreeReader()
        scanning._children_files = False  # a kernel without CONFIG_PROC_CHILDREN
        scanned, table = scanning.below([p.pid])
        assert table is not None
        assert set(walked) == set(scanned) == expected
        direct = {c.pid for c in psutil.Process(p.pid).children()}
        assert set(TreeReader().below([p.pid], recursive=False)[0]) == direct
        assert set(scanning.below([p.pid], recursive=False)[0]) == direct
        for order in (walked, scanned):  # parents before children
            assert all(order.index(psutil.Process(c).ppid()) < order.index(c) for c in order
                       if psutil.Process(c).ppid() != p.pid)
    finally:
        for c in psutil.Process(p.pid).children(recursive=True):
            c.kill()
        p.kill()
        p.wait()


def test_a_process_stat_matches_psutil_and_a_gone_one_reads_as_none():
    me = psutil.Process()
    st = read_stat(os.getpid())
    assert st is not None
    assert st.ppid == me.ppid() and st.threads == me.num_threads()
    assert abs(st.cpu_seconds - sum(me.cpu_times()[:2])) < 0.5
    assert st.rss_bytes > 0 and st.status == "running"
    io = me.io_counters()
    got = read_io(os.getpid())
    assert got is not None and got.chars >= io.read_chars and got.storage >= io.read_bytes
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert read_stat(p.pid) is None and read_io(p.pid) is None
