"""Process-tree sampler: the server process and every descendant (TP workers, schedulers, compilers).

For a server firstlight launched, the tree comes from the launcher (``ServerProcess.descendants``): it includes
the processes firstlight adopted as a child subreaper, so a worker that double-forked with ``setsid``, or the
daemon of a launcher script that exited 0, is still sampled; processes that left the process group are
reported once each.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import psutil

from firstlight.deaths import wait_status_code
from firstlight.samplers.base import Sampler
from firstlight.samplers.oom import OomTraces
from firstlight.timeline import Observation, ProcessSample, ProcInfo, SourceNote


class ProcessTreeSampler(Sampler):
    """Alive, state, CPU time, RSS, bytes read, threads, children appearing and dying.

    CPU time and bytes read are cumulative over the tree: a child that exits keeps its last count, so the
    totals never go backwards. ``exit_code`` asks whoever can know it (the launcher, for a child of ours).
    """

    name = "process"

    def __init__(self, pid: int, interval: float = 1.0,
                 exit_code: Callable[[], int | None] | None = None,
                 clock: Callable[[], float] = time.time,
                 descendants: Callable[[], list[psutil.Process]] | None = None,
                 left_group: Callable[[], list[tuple[int, str]]] | None = None,
                 oom: OomTraces | None = None) -> None:
        """``descendants``: the tree below the root (default: the root's children, recursively);
        ``left_group``: processes that left the server's process group since the last call;
        ``oom``: the kernel's OOM-kill traces, read when the process is found gone."""
        super().__init__(interval)
        self._oom = oom
        self._descendants = descendants
        self._left_group = left_group or (lambda: [])
        self._daemon_noted = False
        self.pid = pid
        self.clock = clock
        self._exit_code = exit_code or (lambda: None)
        self._root: psutil.Process | None = None
        self._procs: dict[int, psutil.Process] = {}
        self._last: dict[int, ProcInfo] = {}
        self._gone_cpu = 0.0
        self._gone_read = 0
        self._last_read: dict[int, int] = {}
        self._io_denied_noted = False
        self._dead = False
        self._threads = ThreadCpu()

    def sample(self) -> list[Observation]:
        now = self.clock()
        if self._dead:
            return []
        out: list[Observation] = []
        root = self._root_process()
        members = self._tree_members(root)
        if not members or (root is not None and not _alive(root) and self._exit_code() not in (0, None)):
            self._dead = True
            code = self._exit_code()
            if code is None:
                code = zombie_exit_code(self.pid)
            traces: tuple[str, ...] = ()
            if self._oom is not None and (code is None or code < 0):
                traces = self._oom.evidence(self._last)
            return [ProcessSample(now, alive=False, exit_code=code, oom=traces)]
        if (root is None or not _alive(root)) and not self._daemon_noted:
            self._daemon_noted = True
            pids = ", ".join(f"{p.pid}" for p in members[:8])
            out.append(SourceNote(now, "process", f"pid {self.pid} exited with code 0 and left {len(members)} "
                                                  f"process(es) running (pid {pids}): a launcher that daemonized "
                                                  "the server; watching those"))
        for pid, name in self._left_group():
            out.append(SourceNote(now, "process", f"pid {pid} ({name}) left the server's process group (setsid); "
                                                  "it is still watched and will be stopped with the server"))
        infos: list[ProcInfo] = []
        cpu = rss = threads = 0.0
        read_now: dict[int, int] = {}
        root_state = None
        for p in members:
            p = self._procs.setdefault(p.pid, p)
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    info = ProcInfo(p.pid, p.name(), p.status(), t.user + t.system, p.memory_info().rss,
                                    p.create_time())
                    threads += p.num_threads()
                    read_now[p.pid] = self._read(p)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            except psutil.AccessDenied:
                continue
            infos.append(info)
            cpu += info.cpu_seconds
            rss += info.rss_bytes
            if p.pid == self.pid:
                root_state = info.state
        seen = {i.pid for i in infos}
        died = tuple(info for pid, info in self._last.items() if pid not in seen)
        for info in died:
            self._gone_cpu += info.cpu_seconds
            self._gone_read += self._last_read.get(info.pid, 0)
            self._procs.pop(info.pid, None)
            self._last_read.pop(info.pid, None)
        self._last = {i.pid: i for i in infos}
        self._last_read.update(read_now)
        if any(v < 0 for v in read_now.values()) and not self._io_denied_noted:
            self._io_denied_noted = True
            out.append(SourceNote(now, "process", "cannot read I/O counters of some processes (permission); "
                                                  "bytes read are undercounted"))
        total_read = self._gone_read + sum(max(0, v) for v in read_now.values())
        top, top_name, top_state = self._threads.busiest(now, infos)
        out.append(ProcessSample(now, alive=True, cpu_seconds=cpu + self._gone_cpu, rss_bytes=int(rss),
                                 read_bytes=total_read, threads=int(threads), procs=tuple(infos),
                                 root_state=root_state, died=died, thread_top=top, thread_top_name=top_name,
                                 thread_top_state=top_state))
        return out

    def _tree_members(self, root: psutil.Process | None) -> list[psutil.Process]:
        """Live processes of the tree: the root (while it lives) and its descendants."""
        members = [root] if root is not None and _alive(root) else []
        try:
            if self._descendants is not None:
                below = self._descendants()
            elif members:
                below = members[0].children(recursive=True)
            else:
                below = []
        except psutil.Error:
            below = []
        return members + [p for p in below if _alive(p)]

    def _root_process(self) -> psutil.Process | None:
        if self._root is None:
            try:
                self._root = psutil.Process(self.pid)
            except psutil.Error:
                return None
            self._procs[self.pid] = self._root
        return self._root

    @staticmethod
    def _read(p: psutil.Process) -> int:
        """Bytes read: storage reads, or read() calls where larger (a file in the page cache)."""
        try:
            io = p.io_counters()
        except (psutil.AccessDenied, AttributeError, NotImplementedError):
            return -1
        return max(io.read_bytes, getattr(io, "read_chars", 0))


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# cores: only a process that used this much CPU since the last sample has its threads read (a CPU-bound thread gets
# at least this on a machine with 10 runnable threads a core; an idle or I/O-bound tree costs nothing more)
HOT_PROCESS = 0.1


class ThreadCpu:
    """The busiest thread of the tree since the previous sample (``/proc/PID/task/*/stat``): its CPU in cores and
    its state now. On a loaded machine a CPU-bound thread gets a fraction of a core but is always ``R``."""

    def __init__(self) -> None:
        self._proc_cpu: dict[int, tuple[float, float]] = {}  # pid -> (t, cpu s)
        self._thread_cpu: dict[int, tuple[float, float]] = {}  # tid -> (t, cpu s)

    def busiest(self, now: float, infos: list[ProcInfo]) -> tuple[float, str, str]:
        top = 0.0  # nothing busy
        name = state = ""
        seen: dict[int, tuple[float, float]] = {}
        threads: dict[int, tuple[float, float]] = {}
        for info in infos:
            prev = self._proc_cpu.get(info.pid)
            seen[info.pid] = (now, info.cpu_seconds)
            if prev is None or now <= prev[0] or (info.cpu_seconds - prev[1]) / (now - prev[0]) < HOT_PROCESS:
                continue
            for tid, comm, st, cpu_s in _task_cpu(info.pid):
                threads[tid] = (now, cpu_s)
                last = self._thread_cpu.get(tid)
                if last is not None and now > last[0]:
                    rate = (cpu_s - last[1]) / (now - last[0])
                    if rate > top:
                        top, name, state = rate, f"{info.name}/{comm}", st
        self._proc_cpu = seen
        self._thread_cpu = threads
        return round(top, 3), name, state


def _task_cpu(pid: int) -> list[tuple[int, str, str, float]]:
    """(tid, thread name, state, CPU seconds) of each thread of ``pid``."""
    out: list[tuple[int, str, str, float]] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        head, _, rest = raw.rpartition(b")")
        fields = rest.split()
        if len(fields) < 13:
            continue
        comm = head.partition(b"(")[2].decode(errors="replace")
        out.append((int(tid), comm, fields[0].decode(), (int(fields[11]) + int(fields[12])) / _CLK_TCK))
    return out


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def zombie_exit_code(pid: int) -> int | None:
    """How a process that is not our child ended, while its parent has not reaped it yet (a zombie): the
    wait status in ``/proc/PID/stat`` (field 52, Linux 3.5+), as a Popen-style code; None once reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if len(fields) < 50 or fields[0] != b"Z" or not fields[49].isdigit():
        return None
    return wait_status_code(int(fields[49]))
