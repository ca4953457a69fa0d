"""samplers/process.py's rules at the edges its mutation run found untested: when a sample has moved, bytes read as
increases, names cut by the kernel at 15 characters, totals over children that die at different samples, the
daemon note's list of pids, OOM traces only for a death that could be one, and the busiest thread's exact rate.
Real processes wherever the rule is about one; the clock is the test's own wherever a rate is computed.

The process-starting tests of this subject; the others: ``tests/unit/samplers/process/test_edges.py``.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from firstlight.cputime import TICK_S, reaches
from firstlight.samplers.oom import OomTraces
from firstlight.samplers.process import (
    ProcessTreeSampler,
    ThreadCpu,
    _task_cpu,
)
from firstlight.timeline import ProcessSample, ProcInfo, SourceNote
from firstlight.units.cgroup import CgroupSampler
from tests.support.common import wait_for
from tests.support.process_sampler import PY, end, popen, samples


def _stat_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return "gone"


def _cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _infos(pid: int) -> list[ProcInfo]:
    p = psutil.Process(pid)
    return [ProcInfo(pid, p.name(), _stat_state(pid), _cpu(pid), 0, p.create_time())]


def _clock(*times: float):
    it: Iterator[float] = iter(times)
    return lambda: next(it)


def _say(p: subprocess.Popen[str], line: str = "") -> None:
    assert p.stdin is not None
    p.stdin.write(line + "\n")
    p.stdin.flush()


def _line(p: subprocess.Popen[str]) -> str:
    assert p.stdout is not None
    return p.stdout.readline().strip()


READER = """
import sys
print("up", flush=True)
while sys.stdin.readline():
    with open(sys.argv[1], "rb") as f:
        while f.read(1 << 16):
            pass
    print("read", flush=True)
"""


def test_an_idle_process_has_not_moved_and_one_that_read_has(tmp_path: Path):
    """A real idle process: its read total stands still and the sample has not moved; it reads a file: moved."""
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(256 << 10))
    p = popen(READER, str(data))
    try:
        assert _line(p) == "up"
        wait_for(lambda: _stat_state(p.pid) == "S", 30, "the process to wait")
        sampler = ProcessTreeSampler(p.pid, clock=_clock(1000.0, 2000.0, 3000.0))
        first = samples(sampler.sample())[0]
        assert sampler.moved
        second = samples(sampler.sample())[0]
        assert second.read_bytes == first.read_bytes and sampler.moved is False
        _say(p)
        assert _line(p) == "read"
        wait_for(lambda: _stat_state(p.pid) == "S", 30, "the process to wait again")
        third = samples(sampler.sample())[0]
        assert third.read_bytes - second.read_bytes >= 256 << 10 and sampler.moved is True
    finally:
        end(p)


# -- names ---------------------------------------------------------------------------------------------------------
LONG_ROOT = """
import os, subprocess, sys
kid = subprocess.Popen([sys.argv[2], "-c", "import time; time.sleep(120)"])
short = subprocess.Popen(["sleep", "120"])
print(kid.pid, short.pid, flush=True)
sys.stdin.readline()
os.execv(sys.argv[1], [sys.argv[3], "-c", "import sys; print('again', flush=True); sys.stdin.readline()"])
"""


def test_a_name_cut_at_15_characters_is_the_full_name_read_once_per_process(tmp_path: Path):
    """A comm of 15 characters (cut by the kernel) is replaced by psutil's full name, read once per process and
    kept while that process lives, also across the death of another member; a shorter comm is the name."""
    root_exe, kid_exe = tmp_path / "python_long_name_server", tmp_path / "python_long_name_worker"
    root_exe.symlink_to(PY)
    kid_exe.symlink_to(PY)
    p = subprocess.Popen([str(root_exe), "-c", LONG_ROOT, str(root_exe), str(kid_exe),
                          str(tmp_path / "python_long_name_other")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    kids = list(map(int, _line(p).split()))
    kid, short = kids
    try:
        sampler = ProcessTreeSampler(p.pid)
        first = {i.pid: i.name for i in samples(sampler.sample())[0].procs}
        assert first == {p.pid: "python_long_name_server", kid: "python_long_name_worker", short: "sleep"}
        os.kill(short, signal.SIGKILL)
        wait_for(lambda: _stat_state(short) in ("Z", "gone"), 30, "the short-named child to die")
        second = samples(sampler.sample())[0]
        assert [d.pid for d in second.died] == [short]
        _say(p)  # the root execs itself again under another argv[0]: the same comm, pid and start
        assert _line(p) == "again"
        assert psutil.Process(p.pid).name() == "python_long_name_other"
        third = samples(sampler.sample())[0]
        assert {i.pid: i.name for i in third.procs} == {p.pid: "python_long_name_server",
                                                         kid: "python_long_name_worker"}
    finally:
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        end(p)


# -- the end, and what is said on the way ------------------------------------------------------------------------
def _cgroup_with_a_kill(tmp_path: Path) -> OomTraces:
    d = tmp_path / "llm.service"
    d.mkdir()
    events = d / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
    traces = OomTraces(directories=[d], kmsg=tmp_path / "no-kmsg")
    events.write_text("low 0\nhigh 0\nmax 1\noom 1\noom_kill 1\noom_group_kill 0\n")
    return traces


def test_oom_traces_are_read_for_a_death_by_signal_and_not_for_an_exit_0(tmp_path: Path):
    """A tree that ends with exit code 0 carries no OOM traces, even where the cgroup counted a kill; one killed by
    a signal carries them."""
    traces = _cgroup_with_a_kill(tmp_path)
    clean = popen("import sys; sys.stdin.readline()")
    sampler = ProcessTreeSampler(clean.pid, exit_code=clean.poll, clock=lambda: 9.0, oom=traces)
    assert samples(sampler.sample())[0].alive
    _say(clean)
    assert clean.wait() == 0
    assert sampler.sample() == [ProcessSample(9.0, alive=False, exit_code=0)]
    killed = popen("import sys; sys.stdin.readline()")
    sampler = ProcessTreeSampler(killed.pid, exit_code=killed.poll, clock=lambda: 9.0, oom=traces)
    assert samples(sampler.sample())[0].alive
    end(killed)
    d = tmp_path / "llm.service"
    assert sampler.sample() == [ProcessSample(9.0, alive=False, exit_code=-signal.SIGKILL,
                                              oom=(f"{d / 'memory.events'}: oom_kill 0 -> 1",))]


def test_the_daemon_note_lists_the_first_eight_pids_left_running():
    """A launcher that exits 0 leaving nine processes: the note counts nine and lists the first eight pids."""
    launcher = popen("import sys; sys.stdin.readline()")
    left = [subprocess.Popen(["sleep", "120"]) for _ in range(9)]
    try:
        tree = [psutil.Process(k.pid) for k in left]
        sampler = ProcessTreeSampler(launcher.pid, exit_code=launcher.poll, descendants=lambda: tree,
                                     clock=lambda: 4.0)
        assert [type(o) for o in sampler.sample()] == [ProcessSample]
        _say(launcher)
        assert launcher.wait() == 0
        out = sampler.sample()
        pids = ", ".join(str(k.pid) for k in left[:8])
        assert out[0] == SourceNote(4.0, "process", f"pid {launcher.pid} exited with code 0 and left 9 process(es) "
                                                    f"running (pid {pids}): a launcher that daemonized the server; "
                                                    "watching those")
        assert sorted(i.pid for i in samples(out)[0].procs) == sorted(k.pid for k in left)
    finally:
        for k in left:
            end(k)  # type: ignore[arg-type]
        end(launcher)


SETSID = """
import subprocess, sys
kid = subprocess.Popen(["sleep", "120"], start_new_session=True)
print(kid.pid, flush=True)
sys.stdin.readline()
kid.kill()
"""


def test_left_group_is_asked_about_the_tree_read_this_sample():
    """The processes that left the server's process group are found in the tree this sample read."""
    p = popen(SETSID)
    try:
        kid = int(_line(p))
        root_group = os.getpgid(p.pid)
        sampler = ProcessTreeSampler(
            p.pid, clock=lambda: 2.0,
            left_group=lambda tree: [(q.pid, q.name()) for q in tree if os.getpgid(q.pid) != root_group])
        out = sampler.sample()
        assert out[0] == SourceNote(2.0, "process", f"pid {kid} (sleep) left the server's process group (setsid); "
                                                    "it is still watched and will be stopped with the server")
        assert sorted(i.pid for i in samples(out)[0].procs) == sorted([p.pid, kid])
    finally:
        _say(p)
        end(p)


# -- the tree ------------------------------------------------------------------------------------------------------
SPAWNER = """
import subprocess, sys
kids = []
while sys.stdin.readline():
    kids.append(subprocess.Popen(["sleep", "120"]))
    print(kids[-1].pid, flush=True)
"""


def test_a_child_started_after_a_sample_is_a_member_of_the_next():
    """A process created since the last sample (a fork: the tree is read again) is a member of the next."""
    p = popen(SPAWNER)
    try:
        sampler = ProcessTreeSampler(p.pid)
        assert [i.pid for i in samples(sampler.sample())[0].procs] == [p.pid]
        _say(p)
        kid = int(_line(p))
        assert sorted(i.pid for i in samples(sampler.sample())[0].procs) == sorted([p.pid, kid])
        _say(p)
        kid2 = int(_line(p))
        assert sorted(i.pid for i in samples(sampler.sample())[0].procs) == sorted([p.pid, kid, kid2])
    finally:
        for q in psutil.Process(p.pid).children():
            q.kill()
        end(p)


def test_without_children_files_the_tree_comes_from_a_scan_of_the_table():
    """Where the kernel has no /proc/PID/task/TID/children (or the tree is larger than the machine's process count),
    the tree is read from one scan of the process table, each member with the stat the scan read."""
    p = popen(SPAWNER)
    try:
        _say(p)
        kid = int(_line(p))
        sampler = ProcessTreeSampler(p.pid)
        sampler._tree._children_files = False  # stands in for a kernel without CONFIG_PROC_CHILDREN
        s = samples(sampler.sample())[0]
        assert sorted(i.pid for i in s.procs) == sorted([p.pid, kid])
        assert {i.pid: i.name for i in s.procs}[kid] == "sleep"
    finally:
        for q in psutil.Process(p.pid).children():
            q.kill()
        end(p)


def test_a_tree_that_cannot_be_listed_leaves_the_root_alone():
    """A descendants reader that fails (its process gone: psutil.NoSuchProcess) gives an empty tree below a live
    root: the root alone is sampled."""
    gone = subprocess.Popen([PY, "-c", "pass"])
    gone.wait()
    p = popen("import sys; sys.stdin.readline()")
    try:
        sampler = ProcessTreeSampler(p.pid, descendants=lambda: psutil.Process(gone.pid).children(recursive=True))
        s = samples(sampler.sample())
        assert len(s) == 1 and s[0].alive and [i.pid for i in s[0].procs] == [p.pid]
    finally:
        end(p)


def test_a_cgroup_sampler_takes_the_cgroups_processes_as_the_tree(tmp_path: Path):
    """A sampler whose tree is its root's children (a unit's cgroup): every process in cgroup.procs is a member."""
    p = popen("import sys; sys.stdin.readline()")
    other = popen("import sys; sys.stdin.readline()")
    try:
        (tmp_path / "cgroup.procs").write_text(f"{p.pid}\n{other.pid}\n")
        sampler = CgroupSampler(tmp_path, main_pid=p.pid)
        s = samples(sampler.sample())[0]
        assert sorted(i.pid for i in s.procs) == sorted([p.pid, other.pid])
    finally:
        end(other)
        end(p)


# -- totals over children that die at different samples ---------------------------------------------------------
TWO_KIDS = """
import subprocess, sys
kid = ("import os, sys, time\\nwith open(sys.argv[1], 'rb') as f:\\n    while f.read(1 << 16): pass\\n"
       "t = time.process_time()\\nwhile time.process_time() - t < 0.05: pass\\n"
       "os.write(1, b'ready\\\\n')\\nsys.exit(int(open(sys.argv[2]).read()))")
kids = [subprocess.Popen([sys.executable, "-c", kid, sys.argv[1], f]) for f in sys.argv[2:]]
print(*(k.pid for k in kids), flush=True)
sys.stdin.readline()  # never reaps them: each stays a zombie, its reads out of this process's counters
"""


def test_cpu_and_bytes_of_children_that_die_at_different_samples_all_count(tmp_path: Path):
    """Two children each read 4 MiB and spend CPU, then die one sample apart: the tree's CPU and bytes read never
    go backwards, each dead child keeping its last count."""
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(4 << 20))
    fifos = [tmp_path / "one", tmp_path / "two"]
    for f in fifos:
        os.mkfifo(f)
    p = popen(TWO_KIDS, str(data), *map(str, fifos))
    try:
        kids = list(map(int, _line(p).split()))
        assert [_line(p), _line(p)] == ["ready", "ready"]
        sampler = ProcessTreeSampler(p.pid)
        first = samples(sampler.sample())[0]
        assert sorted(i.pid for i in first.procs) == sorted([p.pid, *kids]) and first.read_bytes >= 8 << 20
        seen = [first]
        for kid, fifo in zip(kids, fifos, strict=True):
            fifo.write_text("0")
            wait_for(lambda k=kid: _stat_state(k) == "Z", 30, "the child to exit")
            s = samples(sampler.sample())[0]
            assert [d.pid for d in s.died] == [kid]
            seen.append(s)
        for was, now in itertools.pairwise(seen):
            assert now.cpu_seconds >= was.cpu_seconds - 1e-9  # (the same counts summed in another order)
            assert now.read_bytes >= was.read_bytes
        assert [i.pid for i in seen[2].procs] == [p.pid]
    finally:
        end(p)


# -- the busiest thread --------------------------------------------------------------------------------------------
SPIN_THREAD = """
import ctypes, sys, threading
def spin():
    ctypes.CDLL(None).prctl(15, b"spinner", 0, 0, 0)
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
print("up", flush=True)
sys.stdin.readline()
"""


def _spin_then_stop(pid: int, more: float) -> None:
    """Let ``pid`` run until it spent ``more`` CPU seconds, then stop it and wait until every thread is stopped."""
    cpu = _cpu(pid)
    os.kill(pid, signal.SIGCONT)
    wait_for(lambda: _cpu(pid) - cpu >= more, 60, "the spinner to spin")
    os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: all(st == "T" for _, _, st, _ in _task_cpu(pid)), 30, "the spinner to stop")


def test_the_samples_busiest_thread_is_its_exact_rate_name_and_state():
    """The busiest thread: its CPU seconds since the last sample over the clock's seconds since it, rounded to
    3 decimals, named process/thread, with its state now (whatever the clock's origin)."""
    p = popen(SPIN_THREAD)
    try:
        assert _line(p) == "up"
        os.kill(p.pid, signal.SIGSTOP)
        wait_for(lambda: all(st == "T" for _, _, st, _ in _task_cpu(p.pid)), 30, "the spinner to stop")
        times = (0.001, 0.004, 0.007)
        sampler = ProcessTreeSampler(p.pid, clock=_clock(*times))
        samples(sampler.sample())
        _spin_then_stop(p.pid, 0.05)
        second = samples(sampler.sample())[0]
        assert (second.thread_top, second.thread_top_name, second.thread_top_state) == (0.0, "", "")
        before = {comm: cpu for _, comm, _, cpu in _task_cpu(p.pid)}["spinner"]
        _spin_then_stop(p.pid, 0.05)
        after = {comm: cpu for _, comm, _, cpu in _task_cpu(p.pid)}["spinner"]
        while round((after - before) * 100) % 3 == 0:  # a whole number of cores: spin a tick more
            _spin_then_stop(p.pid, 0.01)
            after = {comm: cpu for _, comm, _, cpu in _task_cpu(p.pid)}["spinner"]
        third = samples(sampler.sample())[0]
        exact = (after - before) / (times[2] - times[1])
        rate = round(exact, 3)
        assert rate not in (round(exact), round(exact, 4))  # the third decimal kept, the fourth dropped
        assert third.thread_top == rate
        assert third.thread_top_name == f"{psutil.Process(p.pid).name()}/spinner"
        assert third.thread_top_state == "T"
    finally:
        os.kill(p.pid, signal.SIGCONT)
        end(p)


def test_task_cpu_counts_system_time_too():
    """A thread's CPU is its user time plus its system time (not its children's)."""
    p = popen("import os, sys, time\nt = time.process_time()\nfd = os.open('/dev/zero', os.O_RDONLY)\n"
              "while os.times().system < 0.2: os.read(fd, 1 << 20)\nprint('done', flush=True)\nsys.stdin.readline()")
    try:
        assert _line(p) == "done"
        t = psutil.Process(p.pid).cpu_times()
        assert t.system >= 0.2 and t.children_user == t.children_system == 0
        me = next(task for task in _task_cpu(p.pid) if task[0] == p.pid)
        assert me[3] == pytest.approx(t.user + t.system, abs=0.05)
    finally:
        end(p)


def test_an_idle_process_before_a_hot_one_does_not_hide_it():
    """The busiest thread is looked for in every hot process, whatever idle ones come before it."""
    idle = popen("import sys; sys.stdin.readline()")
    spin = subprocess.Popen([PY, "-c", "while True: pass"])
    try:
        threads = ThreadCpu()
        threads.busiest(10.0, _infos(idle.pid) + _infos(spin.pid))
        c = _cpu(spin.pid)
        wait_for(lambda: _cpu(spin.pid) - c >= 0.05, 60, "the spinner to spin")
        assert threads.busiest(10.1, _infos(idle.pid) + _infos(spin.pid)) == (0.0, "", "")
        c = _cpu(spin.pid)
        wait_for(lambda: _cpu(spin.pid) - c >= 0.05, 60, "the spinner to spin more")
        rate, name, st = threads.busiest(10.2, _infos(idle.pid) + _infos(spin.pid))
        assert rate > 0 and name == f"{psutil.Process(spin.pid).name()}/{psutil.Process(spin.pid).name()}"
        assert st in ("R", "S")
    finally:
        end(idle)
        spin.kill()
        spin.wait()


def test_a_process_turning_hot_has_its_threads_named_from_the_sample_after():
    """A process is hot by the CPU it used since the last sample (not its total): an idle one with CPU spent long
    ago is not; once hot its threads are read, and named from the next sample on."""
    p = popen("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.1: pass\n"
              "print('up', flush=True)\nsys.stdin.readline()\nwhile True: pass")
    try:
        assert _line(p) == "up"
        wait_for(lambda: _stat_state(p.pid) == "S", 30, "the process to wait")
        threads = ThreadCpu()
        assert reaches(_infos(p.pid)[0].cpu_seconds + TICK_S, 0.1)  # ticks, not process_time's nanoseconds
        assert threads.busiest(10.0, _infos(p.pid)) == (0.0, "", "")
        assert threads.busiest(11.0, _infos(p.pid)) == (0.0, "", "")  # idle since: not hot
        c = _cpu(p.pid)
        _say(p)
        wait_for(lambda: _cpu(p.pid) - c >= 0.05, 60, "the process to spin")
        assert threads.busiest(11.1, _infos(p.pid)) == (0.0, "", "")  # hot: threads read for the next time
    finally:
        end(p)


ENDING_THREAD = """
import os, sys, threading
def spin():
    while not os.path.exists(sys.argv[1]):
        pass
t = threading.Thread(target=spin)
t.start()
print("up", flush=True)
sys.stdin.readline()
"""


def test_a_hot_process_whose_busy_thread_ended_names_no_thread(tmp_path: Path):
    """Only a thread that used CPU since the last sample is named: a hot process whose spinning thread ended,
    leaving an idle one, has no busiest thread."""
    stop = tmp_path / "stop"
    p = popen(ENDING_THREAD, str(stop))
    try:
        assert _line(p) == "up"
        threads = ThreadCpu()
        threads.busiest(10.0, _infos(p.pid))
        c = _cpu(p.pid)
        wait_for(lambda: _cpu(p.pid) - c >= 0.05, 60, "the thread to spin")
        assert threads.busiest(10.1, _infos(p.pid)) == (0.0, "", "")
        assert len(threads._thread_cpu) == 2  # both threads read
        c = _cpu(p.pid)
        wait_for(lambda: _cpu(p.pid) - c >= 0.05, 60, "the thread to spin more")
        stop.touch()
        wait_for(lambda: len(_task_cpu(p.pid)) == 1, 30, "the thread to end")
        assert threads.busiest(10.2, _infos(p.pid)) == (0.0, "", "")
    finally:
        end(p)


SAME_TICK = """
import subprocess, sys
def ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])  # starttime, in clock ticks since boot
for _ in range(500):
    a, b = subprocess.Popen(["sleep", "120"]), subprocess.Popen(["sleep", "120"])
    if ticks(a.pid) == ticks(b.pid):
        print(a.pid, b.pid, flush=True)
        break
    for k in (a, b):
        k.kill()
        k.wait()
else:
    print("none", flush=True)
sys.stdin.readline()
"""


def test_two_children_started_in_the_same_clock_tick_are_each_sampled_as_themselves():
    """Processes are told apart by pid and start: two children started in the same clock tick are two members."""
    p = popen(SAME_TICK)
    try:
        got = _line(p)
        assert got != "none", "no two children started in the same tick in 500 tries"
        a, b = map(int, got.split())
        s = samples(ProcessTreeSampler(p.pid).sample())[0]
        assert sorted(i.pid for i in s.procs) == sorted([p.pid, a, b])
        assert {i.pid: i.started for i in s.procs if i.pid in (a, b)} == {
            a: psutil.Process(a).create_time(), b: psutil.Process(b).create_time()}
    finally:
        for q in psutil.Process(p.pid).children():
            q.kill()
        end(p)
