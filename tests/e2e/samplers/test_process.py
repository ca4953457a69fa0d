"""samplers/process.py's rules, each against real processes: when the tree counts as gone and with which code, a
launcher that daemonized, totals that never go backwards, and the busiest thread. The clock given to the sampler
is the test's own where a rate is computed, so no figure depends on the machine's load.

The process-starting tests of this subject; the others: ``tests/unit/samplers/process/test_process.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from firstlight.preflight.pagecache import cached_bytes
from firstlight.samplers.process import HOT_PROCESS, ProcessTreeSampler, ThreadCpu, _task_cpu, zombie_exit_code
from firstlight.timeline import ProcessSample, ProcInfo, SourceNote
from tests.support.common import wait_for
from tests.support.process_sampler import PY, end, popen, samples

# A parent that starts a child and never reaps it: the child, once ended, stays a zombie with its wait status.
PARENT = """
import subprocess, sys
kid = subprocess.Popen([sys.executable, "-c", *sys.argv[1:]])
print(kid.pid, flush=True)
sys.stdin.readline()
"""


# The child: exits with the code written to the FIFO it reads (or sleeps until killed, given no FIFO). Its alarm
# ends it if its test died before opening the FIFO's writing end (the open would block forever).
CHILD = ("import signal, sys, time\nsignal.alarm(180)\n"
         "if len(sys.argv) > 1: sys.exit(int(open(sys.argv[1]).read()))\ntime.sleep(120)")


def state(pid: int) -> str:
    try:
        return str(psutil.Process(pid).status())
    except psutil.Error:
        return "gone"


@pytest.fixture
def unreaped(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """(a child's pid, its FIFO): a process that is not ours, whose parent never reaps it: ended, it stays a
    zombie holding its wait status."""
    fifo = tmp_path / "code"
    os.mkfifo(fifo)
    parent = popen(PARENT, CHILD, str(fifo))
    assert parent.stdout is not None
    yield int(parent.stdout.readline()), fifo
    end(parent)


# -- the end of the tree ----------------------------------------------------------------------------------------
def test_our_childs_exit_code_is_reported_once():
    p = popen("import sys; sys.stdin.readline(); sys.exit(3)")
    sampler = ProcessTreeSampler(p.pid, exit_code=p.poll, clock=lambda: 42.0)
    first = samples(sampler.sample())
    assert len(first) == 1 and first[0].alive and first[0].procs[0].pid == p.pid and first[0].t == 42.0
    # nothing to compare with yet: no busiest thread, said as zero and empty names
    assert (first[0].thread_top, first[0].thread_top_name, first[0].thread_top_state) == (0.0, "", "")
    assert p.stdin is not None
    p.stdin.write("\n")
    p.stdin.flush()
    p.wait()
    assert sampler.sample() == [ProcessSample(42.0, alive=False, exit_code=3)]
    assert sampler.sample() == []


def test_a_process_not_ours_that_exited_ends_with_the_code_its_zombie_holds(unreaped: tuple[int, Path]):
    kid, fifo = unreaped
    sampler = ProcessTreeSampler(kid, clock=lambda: 7.5)
    assert samples(sampler.sample())[0].alive
    fifo.write_text("7")
    wait_for(lambda: state(kid) == psutil.STATUS_ZOMBIE, 30, "the child to exit")
    assert zombie_exit_code(kid) == 7
    assert sampler.sample() == [ProcessSample(7.5, alive=False, exit_code=7)]


def test_a_process_not_ours_killed_by_a_signal_ends_with_minus_its_number(tmp_path: Path):
    parent = popen(PARENT, CHILD)
    try:
        assert parent.stdout is not None
        kid = int(parent.stdout.readline())
        sampler = ProcessTreeSampler(kid)
        assert samples(sampler.sample())[0].alive
        os.kill(kid, signal.SIGKILL)
        wait_for(lambda: state(kid) == psutil.STATUS_ZOMBIE, 30, "the child to die")
        assert zombie_exit_code(kid) == -signal.SIGKILL
        out = samples(sampler.sample())
        assert len(out) == 1 and not out[0].alive and out[0].exit_code == -signal.SIGKILL
    finally:
        end(parent)


def test_zombie_exit_code_is_none_for_a_live_or_reaped_process():
    assert zombie_exit_code(os.getpid()) is None
    p = subprocess.Popen([PY, "-c", "pass"])
    p.wait()
    assert zombie_exit_code(p.pid) is None


def test_a_launcher_that_exits_0_leaving_its_server_is_followed_to_the_server(tmp_path: Path):
    """The launcher exits 0 and leaves a process running: a note once, and the tree is that process."""
    fifo = tmp_path / "code"
    os.mkfifo(fifo)
    launcher = popen("import subprocess, sys; sys.stdin.readline(); "
                     "k = subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]]); "
                     "print(k.pid, flush=True); sys.stdin.readline()", CHILD, str(fifo))
    assert launcher.stdin is not None and launcher.stdout is not None
    server: list[psutil.Process] = []
    sampler = ProcessTreeSampler(launcher.pid, exit_code=launcher.poll, descendants=lambda: server,
                                 left_group=lambda tree: [(4242, "worker")], clock=lambda: 5.0)
    assert [type(o) for o in sampler.sample()] == [SourceNote, ProcessSample]  # the group note, then the sample
    launcher.stdin.write("\n")
    launcher.stdin.flush()
    kid = int(launcher.stdout.readline())
    server.append(psutil.Process(kid))
    launcher.stdin.write("\n")
    launcher.stdin.flush()
    assert launcher.wait() == 0
    out = sampler.sample()
    assert all(o.source == "process" and o.t == 5.0 for o in out if isinstance(o, SourceNote))
    notes = [o.message for o in out if isinstance(o, SourceNote)]
    assert notes[0] == (f"pid {launcher.pid} exited with code 0 and left 1 process(es) running (pid {kid}): a "
                        "launcher that daemonized the server; watching those")
    assert notes[1] == ("pid 4242 (worker) left the server's process group (setsid); it is still watched and will "
                        "be stopped with the server")
    s = samples(out)
    assert len(s) == 1 and s[0].alive and [i.pid for i in s[0].procs] == [kid] and s[0].root_state is None
    again = sampler.sample()
    assert len([o for o in again if isinstance(o, SourceNote)]) == 1  # the daemon note is said once
    fifo.write_text("5")
    wait_for(lambda: state(kid) in (psutil.STATUS_ZOMBIE, "gone"), 30, "the server to exit")
    end_ = sampler.sample()  # the tree is empty: the end (with the launcher's code, the one known)
    assert len(end_) == 1 and isinstance(end_[0], ProcessSample) and not end_[0].alive


def test_a_launcher_that_fails_with_processes_left_is_the_end(tmp_path: Path):
    launcher = popen("import subprocess, sys; k = subprocess.Popen([sys.executable, '-c', sys.argv[1]]); "
                     "print(k.pid, flush=True); sys.stdin.readline(); sys.exit(2)", CHILD)
    assert launcher.stdin is not None and launcher.stdout is not None
    kid = psutil.Process(int(launcher.stdout.readline()))
    try:
        sampler = ProcessTreeSampler(launcher.pid, exit_code=launcher.poll, descendants=lambda: [kid])
        assert samples(sampler.sample())[0].alive
        launcher.stdin.write("\n")
        launcher.stdin.flush()
        assert launcher.wait() == 2
        out = sampler.sample()
        assert len(out) == 1 and isinstance(out[0], ProcessSample) and not out[0].alive and out[0].exit_code == 2
    finally:
        kid.kill()


# -- totals over the tree ---------------------------------------------------------------------------------------
SPENDER = """
import subprocess, sys
kid = subprocess.Popen([sys.executable, "-c",
    "import sys, time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: pass\\n"
    "print('spent', flush=True)\\nsys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
print(kid.pid, flush=True)
print(kid.stdout.readline().strip(), flush=True)
sys.stdin.readline()
kid.stdin.write("\\n"); kid.stdin.flush(); kid.wait()
print("reaped", flush=True)
sys.stdin.readline()
"""


def test_cpu_of_a_child_that_exited_still_counts():
    p = popen(SPENDER)
    try:
        assert p.stdin is not None and p.stdout is not None
        kid = int(p.stdout.readline())
        assert p.stdout.readline().strip() == "spent"
        sampler = ProcessTreeSampler(p.pid, exit_code=p.poll)
        before = samples(sampler.sample())[0]
        kid_cpu = next(i.cpu_seconds for i in before.procs if i.pid == kid)
        assert kid_cpu >= 0.3 and before.cpu_seconds >= kid_cpu
        assert before.threads >= 2 and before.rss_bytes >= sum(i.rss_bytes for i in before.procs) > 0
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "reaped"
        after = samples(sampler.sample())[0]
        assert [d.pid for d in after.died] == [kid]
        assert [i.pid for i in after.procs] == [p.pid]
        assert after.cpu_seconds >= before.cpu_seconds  # the dead child's CPU is kept
        assert after.cpu_seconds - after.procs[0].cpu_seconds == pytest.approx(kid_cpu)  # its last count
        assert after.root_state is not None
        later = samples(sampler.sample())[0]
        assert later.died == () and later.cpu_seconds >= after.cpu_seconds  # counted once, kept
        assert later.cpu_seconds - later.procs[0].cpu_seconds == pytest.approx(
            after.cpu_seconds - after.procs[0].cpu_seconds)
    finally:
        end(p)


# -- the busiest thread -----------------------------------------------------------------------------------------
def _infos(pid: int) -> list[ProcInfo]:
    p = psutil.Process(pid)
    t = p.cpu_times()
    return [ProcInfo(pid, p.name(), p.status(), t.user + t.system, 0, p.create_time())]


def test_the_busiest_thread_of_a_hot_process_is_named_with_its_rate():
    spin = subprocess.Popen([PY, "-c", "while True: pass"])
    try:
        threads = ThreadCpu()
        cpu0 = _infos(spin.pid)
        assert threads.busiest(100.0, cpu0) == (0.0, "", "")  # nothing to compare with yet
        wait_for(lambda: _infos(spin.pid)[0].cpu_seconds - cpu0[0].cpu_seconds >= 0.2, 60, "the spinner to spin")
        assert threads.busiest(100.1, _infos(spin.pid)) == (0.0, "", "")  # hot: its threads read for next time
        tasks = {tid: cpu for tid, _, _, cpu in _task_cpu(spin.pid)}
        wait_for(lambda: sum(c for _, _, _, c in _task_cpu(spin.pid)) - sum(tasks.values()) >= 0.05, 60,
                 "more CPU")
        rate, name, st = threads.busiest(100.2, _infos(spin.pid))
        assert rate >= 0.5 and name == f"{psutil.Process(spin.pid).name()}/{psutil.Process(spin.pid).name()}"
        assert st in ("R", "S")
    finally:
        spin.kill()
        spin.wait()


def test_a_process_under_the_hot_threshold_has_its_threads_left_unread():
    idle = subprocess.Popen([PY, "-c", "import time; time.sleep(120)"])
    try:
        threads = ThreadCpu()
        info = _infos(idle.pid)[0]
        assert threads.busiest(10.0, [info]) == (0.0, "", "")
        warm = ProcInfo(info.pid, info.name, info.state, info.cpu_seconds + HOT_PROCESS * 0.99, 0, info.started)
        assert threads.busiest(11.0, [warm]) == (0.0, "", "")
        assert threads._thread_cpu == {}  # under the threshold: no thread read
        hot = ProcInfo(info.pid, info.name, info.state, warm.cpu_seconds + HOT_PROCESS, 0, info.started)
        threads.busiest(12.0, [hot])
        assert set(threads._thread_cpu) == {idle.pid}  # at the threshold: its one thread read
        assert threads.busiest(12.0, [hot]) == (0.0, "", "")  # no time passed: no rate
    finally:
        idle.kill()
        idle.wait()


# -- what each sample says ---------------------------------------------------------------------------------------
NAMED = """
import ctypes, sys
ctypes.CDLL(None).prctl(15, sys.argv[1].encode("latin-1"), 0, 0, 0)  # PR_SET_NAME: the kernel's comm
print("named", flush=True)
sys.exit(int(open(sys.argv[2]).read())) if len(sys.argv) > 2 else sys.stdin.readline()
"""


def test_task_cpu_reads_a_thread_name_with_parentheses_and_bytes_that_are_not_utf8():
    p = popen(NAMED, "w(\xff) x")
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "named"
        tasks = _task_cpu(p.pid)
        assert next((tid, comm) for tid, comm, _, _ in tasks) == (p.pid, "w(\ufffd) x")
        assert tasks[0][2] in ("R", "S")
        t = psutil.Process(p.pid).cpu_times()
        assert tasks[0][3] == pytest.approx(t.user + t.system, abs=0.02)  # utime + stime, in seconds
    finally:
        end(p)


def test_a_zombie_whose_name_has_a_parenthesis_still_gives_its_code(tmp_path: Path):
    fifo = tmp_path / "code"
    os.mkfifo(fifo)
    parent = popen(PARENT, NAMED, "a) b) c", str(fifo))
    try:
        assert parent.stdout is not None
        kid = int(parent.stdout.readline())
        fifo.write_text("6")
        wait_for(lambda: state(kid) == psutil.STATUS_ZOMBIE, 30, "the child to exit")
        assert zombie_exit_code(kid) == 6
    finally:
        end(parent)


def test_a_sample_names_each_process_with_its_start_and_counts_the_tree():
    p = popen("import subprocess, sys; k = subprocess.Popen([sys.executable, '-c', "
              "'import time; print(\"up\", flush=True); time.sleep(120)']); print(k.pid, flush=True); "
              "sys.stdin.readline()")
    try:
        assert p.stdout is not None
        kid = int(p.stdout.readline())
        assert p.stdout.readline().strip() == "up"  # both idle from here: their counters stand still
        sampler = ProcessTreeSampler(p.pid, interval=0.25)
        assert sampler.interval == 0.25
        s = samples(sampler.sample())[0]
        for info in s.procs:
            ps = psutil.Process(info.pid)
            assert info.name == ps.name() and info.started == ps.create_time()
        assert sorted(i.pid for i in s.procs) == sorted([p.pid, kid])
        assert s.cpu_seconds == pytest.approx(sum(i.cpu_seconds for i in s.procs))
        assert s.rss_bytes == sum(i.rss_bytes for i in s.procs)
        reads = [max(c.read_bytes, c.read_chars) for c in (psutil.Process(x).io_counters() for x in (p.pid, kid))]
        assert s.read_bytes == sum(reads)  # both idle: their counters stand still
    finally:
        end(p)


def test_io_counters_that_cannot_be_read_are_said_once_and_count_nothing(monkeypatch: pytest.MonkeyPatch):
    """An unprivileged user's view of another user's processes: /proc/PID/io refused (as root every process is
    readable, so the refusal is stood in for by the reader, as the sampler would get it)."""
    import firstlight.samplers.process as process_mod

    real = process_mod.read_io
    denied: set[int] = set()
    monkeypatch.setattr(process_mod, "read_io", lambda pid: process_mod.IO_DENIED if pid in denied else real(pid))
    p = popen("import sys; sys.stdin.readline()")
    try:
        denied.add(p.pid)
        sampler = ProcessTreeSampler(p.pid, clock=lambda: 3.0)
        out = sampler.sample()
        assert out[0] == SourceNote(3.0, "process", "cannot read I/O counters of some processes (permission); "
                                                    "bytes read are undercounted")
        assert samples(out)[0].read_bytes == 0
        assert [type(o) for o in sampler.sample()] == [ProcessSample]  # said once
        denied.clear()
        assert [type(o) for o in ProcessTreeSampler(p.pid).sample()] == [ProcessSample]
    finally:
        end(p)


_MAPPED_AFTER_READ = """
import mmap, os, sys
cached, cold = sys.argv[1], sys.argv[2]
with open(cached, "rb") as f:  # read() calls answered by the page cache: rchar only
    while f.read(1 << 20):
        pass
print("read", flush=True)
sys.stdin.readline()
fd = os.open(cold, os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)  # pages faulted in from storage: read_bytes only
total = sum(m[i] for i in range(0, len(m), 4096))
print("mapped", flush=True)
sys.stdin.readline()
"""


def test_weights_mapped_after_reads_from_the_page_cache_count_in_full(tmp_path: Path):
    """A loader that faults in 32 MiB of evicted weights after 64 MiB of read() calls answered by the page cache
    (vLLM's worker: Python read first, the safetensors mapped after) read 96 MiB: the mapped bytes are not hidden
    behind the read() total (the larger of the two running totals showed none of them)."""
    cached, cold = tmp_path / "cached.bin", tmp_path / "cold.bin"
    cached.write_bytes(os.urandom(64 << 20))
    cold.write_bytes(os.urandom(32 << 20))
    for f in (cached, cold):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            if f == cold:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            else:
                os.read(fd, 64 << 20)
        finally:
            os.close(fd)
    assert cached_bytes(cold) == 0 and cached_bytes(cached) == 64 << 20
    p = popen(_MAPPED_AFTER_READ, str(cached), str(cold))
    try:
        assert p.stdout is not None and p.stdin is not None
        sampler = ProcessTreeSampler(p.pid)
        assert p.stdout.readline().strip() == "read"
        first = samples(sampler.sample())[0].read_bytes
        assert first >= 64 << 20
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "mapped"
        io = psutil.Process(p.pid).io_counters()
        assert io.read_bytes >= 32 << 20 and io.read_chars > io.read_bytes  # the case: mapped less than read()
        assert samples(sampler.sample())[0].read_bytes - first >= 32 << 20
    finally:
        end(p)


# -- samplers/process.py: bytes read by children that exited still count --------------------------------------
READER = """
import sys
with open(sys.argv[1], "rb") as f:
    while f.read(1 << 20):
        pass
print("read", flush=True)
sys.stdin.readline()
"""


ROOT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdin=subprocess.PIPE)
print(child.pid, flush=True)
sys.stdin.readline()
child.stdin.close()  # the child exits; it stays a zombie (never waited for), so our own counters keep out its I/O
sys.stdin.readline()
"""


def test_bytes_read_by_a_child_that_exited_still_count(tmp_path: Path):
    data = tmp_path / "weights.bin"
    size = 64 << 20
    with open(data, "wb") as f:
        f.truncate(size)
    p = subprocess.Popen([sys.executable, "-c", ROOT, READER, str(data)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdin is not None
        child = int(p.stdout.readline())
        assert p.stdout.readline().strip() == "read"
        sampler = ProcessTreeSampler(p.pid, interval=0.1)
        before = sampler.sample()[-1]
        assert isinstance(before, ProcessSample) and before.read_bytes >= size
        p.stdin.write("exit\n")
        p.stdin.flush()

        def died() -> ProcessSample | None:
            s = sampler.sample()[-1]
            return s if isinstance(s, ProcessSample) and any(d.pid == child for d in s.died) else None

        after = wait_for(died, 30, "the reading child to exit")
        assert after.read_bytes >= size, f"{after.read_bytes} bytes: the exited child's reads were dropped"
        assert child not in {i.pid for i in after.procs}
    finally:
        p.kill()
        p.wait()
