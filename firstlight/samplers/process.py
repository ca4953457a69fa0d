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

from firstlight.cputime import CLK_TCK, rate_reaches
from firstlight.deaths import wait_status_code
from firstlight.samplers.base import Sampler
from firstlight.samplers.oom import OomTraces
from firstlight.samplers.proctable import IO_DENIED, IoCounters, Stat, TreeReader, last_pid, read_io, read_stat
from firstlight.timeline import Observation, ProcessSample, ProcInfo, SourceNote


class ProcessTreeSampler(Sampler):
    """Alive, state, CPU time, RSS, bytes read, threads, children appearing and dying.

    CPU time and bytes read are cumulative over the tree: a child that exits keeps its last count, so the
    totals never go backwards. ``exit_code`` asks whoever can know it (the launcher, for a child of ours).

    Cost: each member's figures from its ``/proc/PID/stat`` and ``/proc/PID/io``
    (:mod:`firstlight.samplers.proctable`), the threads of busy members only; the process table (for the tree)
    is read once a tick, and only after a process was created anywhere; psutil objects are kept by pid and start
    time. ``moved`` says whether anything changed since the previous sample (membership, a state, bytes read, RSS
    by ``MOVED_RSS_BYTES``, CPU at ``MOVED_CPU_CORES``), for the idle back-off
    (:class:`firstlight.samplers.base.Backoff`).
    """

    name = "process"

    name = "process"
    tree_from_table = True  # the tree is what the process table has below the root (a unit's cgroup lists its own)

    def __init__(self, pid: int, interval: float = 1.0,
                 exit_code: Callable[[], int | None] | None = None,
                 clock: Callable[[], float] = time.time,
                 descendants: Callable[[], list[psutil.Process]] | None = None,
                 left_group: Callable[[list[psutil.Process]], list[tuple[int, str]]] | None = None,
                 oom: OomTraces | None = None) -> None:
        """``descendants``: the tree below the root (default: the root's children, recursively);
        ``left_group``: processes of the given tree that left the server's process group since the last call;
        ``oom``: the kernel's OOM-kill traces, read when the process is found gone."""
        super().__init__(interval)
        self._oom = oom
        self._descendants = descendants
        self._left_group = left_group or (lambda procs: [])
        self._daemon_noted = False
        self.pid = pid
        self.clock = clock
        self._exit_code = exit_code or (lambda: None)
        self._root: psutil.Process | None = None
        self._procs: dict[int, tuple[int, psutil.Process]] = {}  # pid -> (start ticks, process)
        self._names: dict[tuple[int, int, str], str] = {}  # (pid, start ticks, comm) -> name
        self._last: dict[int, ProcInfo] = {}
        self._gone_cpu = 0.0
        self._gone_read = 0
        self._io: dict[int, IoCounters] = {}  # pid -> its counters at the last sample
        self._read: dict[int, int] = {}  # pid -> bytes it has read, as this sampler counts them
        self._io_denied_noted = False
        self._dead = False
        self._threads = ThreadCpu()
        self._boot: float | None = None
        self._tree = TreeReader()
        self._zombies: tuple[ProcInfo, ...] = ()  # the tree's unreaped descendants at the last read
        self._below: tuple[int, list[psutil.Process]] | None = None  # (last pid created, descendants) of the last read
        self._was: tuple[float, float, int, int, tuple[tuple[int, str], ...]] | None = None  # t, cpu, read, rss, who

    def sample(self) -> list[Observation]:
        now = self.clock()
        if self._dead:
            return []
        out: list[Observation] = []
        root = self._root_process()
        members, root_alive, below = self._tree_members(root)
        if not members or (root is not None and not root_alive and self._exit_code() not in (0, None)):
            self._dead = True
            code = self._exit_code()
            if code is None:
                code = zombie_exit_code(self.pid)
            traces: tuple[str, ...] = ()
            if self._oom is not None and (code is None or code < 0):
                traces = self._oom.evidence(self._last)
            return [ProcessSample(now, alive=False, exit_code=code, oom=traces)]
        if not root_alive and not self._daemon_noted:
            self._daemon_noted = True
            pids = ", ".join(f"{p.pid}" for p, _ in members[:8])
            out.append(SourceNote(now, "process", f"pid {self.pid} exited with code 0 and left {len(members)} "
                                                  f"process(es) running (pid {pids}): a launcher that daemonized "
                                                  "the server; watching those"))
        for pid, name in self._left_group(below):
            out.append(SourceNote(now, "process", f"pid {pid} ({name}) left the server's process group (setsid); "
                                                  "it is still watched and will be stopped with the server"))
        infos: list[ProcInfo] = []
        cpu = rss = threads = 0.0
        io_now: dict[int, IoCounters] = {}
        root_state = None
        for p, st in members:
            got = read_io(p.pid)
            if got is None:
                continue  # gone since its stat was read
            try:
                info = ProcInfo(p.pid, self._name(p, st), st.status, st.cpu_seconds, st.rss_bytes, p.create_time())
            except psutil.Error:
                continue
            io_now[p.pid] = got
            threads += st.threads
            infos.append(info)
            cpu += info.cpu_seconds
            rss += info.rss_bytes
            if p.pid == self.pid:
                root_state = info.state
        seen = {i.pid for i in infos}
        died = tuple(info for pid, info in self._last.items() if pid not in seen)
        for info in died:
            self._gone_cpu += info.cpu_seconds
            self._gone_read += self._read.pop(info.pid, 0)
            self._procs.pop(info.pid, None)
            self._io.pop(info.pid, None)
        if died:
            self._names = {k: v for k, v in self._names.items() if k[0] in seen}
        self._last = {i.pid: i for i in infos}
        for pid, io in io_now.items():
            self._read[pid] = self._read.get(pid, 0) + _bytes_read(self._io.get(pid), io)
        self._io.update(io_now)
        if any(io == IO_DENIED for io in io_now.values()) and not self._io_denied_noted:
            self._io_denied_noted = True
            out.append(SourceNote(now, "process", "cannot read I/O counters of some processes (permission); "
                                                  "bytes read are undercounted"))
        total_read = self._gone_read + sum(self._read[pid] for pid in io_now)
        top, top_name, top_state = self._threads.busiest(now, infos)
        total_cpu = cpu + self._gone_cpu
        self.moved = self._moved(now, total_cpu, total_read, int(rss), infos)
        out.append(ProcessSample(now, alive=True, cpu_seconds=total_cpu, rss_bytes=int(rss),
                                 read_bytes=total_read, threads=int(threads), procs=tuple(infos),
                                 root_state=root_state, died=died, thread_top=top, thread_top_name=top_name,
                                 thread_top_state=top_state, zombies=self._zombies))
        return out

    def _moved(self, now: float, cpu: float, read: int, rss: int, infos: list[ProcInfo]) -> bool:
        """Anything the judge could call progress, or a change it reports, since the previous sample."""
        who = tuple((i.pid, i.state) for i in infos)
        was, self._was = self._was, (now, cpu, read, rss, who)
        if was is None or now <= was[0]:
            return True
        return (who != was[4] or read != was[2] or abs(rss - was[3]) >= MOVED_RSS_BYTES
                or rate_reaches(cpu - was[1], now - was[0], MOVED_CPU_CORES))

    def _tree_members(self, root: psutil.Process | None
                      ) -> tuple[list[tuple[psutil.Process, Stat]], bool, list[psutil.Process]]:
        """Live processes of the tree with their stat: the root (while it lives) and its descendants; whether the
        root lives; the descendants. While no process was created anywhere (``last_pid``) and the root lives, the
        descendants are the last ones still alive: the process table is read again only after a fork. The
        descendants that exited and wait to be reaped (zombies: not members) go to ``self._zombies``."""
        members: list[tuple[psutil.Process, Stat]] = []
        root_st = read_stat(root.pid) if root is not None else None
        root_alive = root is not None and root_st is not None and root_st.state not in _GONE and self._is(root, root_st)
        if root is not None and root_st is not None and root_alive:
            members.append((root, root_st))
        last = last_pid() if self.tree_from_table else None
        read: dict[int, Stat | None] = {}  # stats read with the tree
        if root_alive and last is not None and self._below is not None and self._below[0] == last:
            below = self._below[1]
        else:
            try:
                if self._descendants is not None:
                    below = self._descendants()
                elif root is None:
                    below = []
                elif self.tree_from_table:
                    pids, table = self._tree.below([root.pid])
                    read = {pid: table.get(pid) if table is not None else read_stat(pid) for pid in pids}
                    below = [p for p in (self._process(pid, st) for pid, st in read.items()) if p is not None]
                else:
                    below = root.children(recursive=True)
            except psutil.Error:
                below = []
            self._below = (last, below) if last is not None else None
        zombies: list[ProcInfo] = []
        for p in below:
            st = read[p.pid] if p.pid in read else read_stat(p.pid)
            if st is not None and st.state == "Z" and p is not root:  # exited, its parent has not waited for it
                zombies.append(ProcInfo(p.pid, st.comm, st.status, st.cpu_seconds, 0))
            if st is None or st.state in _GONE:
                continue
            q = self._process(p.pid, st, p)
            if q is not None and q is not root:
                members.append((q, st))
        self._zombies = tuple(zombies)
        return members, root_alive, below

    def _is(self, p: psutil.Process, st: Stat) -> bool:
        """Whether ``st`` describes the process ``p`` (not a newer one that took its pid)."""
        if self._boot is None:
            self._boot = psutil.boot_time()
        try:
            return abs(p.create_time() - (self._boot + st.start_ticks / CLK_TCK)) < 1.0
        except psutil.Error:
            return False

    def _process(self, pid: int, st: Stat | None, given: psutil.Process | None = None) -> psutil.Process | None:
        """The psutil process of ``pid`` while it is the process ``st`` describes (created once, kept)."""
        if st is None:
            return None
        known = self._procs.get(pid)
        if known is not None:
            if known[0] == st.start_ticks:
                return known[1]
            if given is known[1]:
                return None  # that process is gone: its pid is another's now
        if given is None:
            try:
                given = psutil.Process(pid)
            except psutil.Error:
                return None
        self._procs[pid] = (st.start_ticks, given)
        return given

    def _name(self, p: psutil.Process, st: Stat) -> str:
        """psutil's name: the kernel's comm, or the command line's first word where comm was cut at 15 chars."""
        if len(st.comm) < 15:
            return st.comm
        key = (p.pid, st.start_ticks, st.comm)
        name = self._names.get(key)
        if name is None:
            try:
                name = p.name()
            except psutil.Error:
                name = st.comm
            self._names[key] = name
        return name

    def _root_process(self) -> psutil.Process | None:
        if self._root is None:
            try:
                self._root = psutil.Process(self.pid)
            except psutil.Error:
                return None
        return self._root


# a sample "moved" (the idle back-off starts over) at this much CPU since the previous sample (in cores: a fifth of
# the judge's busy threshold, so a back-off never hides weak progress) or this RSS change (bytes)
MOVED_CPU_CORES = 0.02
MOVED_RSS_BYTES = 1 << 20
_GONE = ("Z", "X", "x")  # a zombie or dead: not a member
# cores: only a process that used this much CPU since the last sample has its threads read (a CPU-bound thread gets
# at least this on a machine with 10 runnable threads a core; an idle or I/O-bound tree costs nothing more)
HOT_PROCESS = 0.1


def _bytes_read(was: IoCounters | None, now: IoCounters) -> int:
    """What a process read since its last sample: the larger of its read() calls (the page cache's too) and what
    came from storage (mapped pages faulted in too), each as its own increase. The larger of the two running
    totals would hide a mapped load behind the read() calls before it: vLLM's worker had read 180 MB of Python by
    read() when it faulted in 270 MB of weights, and only the last 90 MB showed."""
    if now == IO_DENIED:
        return 0
    if was is None or was == IO_DENIED:  # first seen: all it read before
        return max(now.chars, now.storage)
    return max(now.chars - was.chars, now.storage - was.storage, 0)


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
            if (prev is None or now <= prev[0]
                    or not rate_reaches(info.cpu_seconds - prev[1], now - prev[0], HOT_PROCESS)):
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
        out.append((int(tid), comm, fields[0].decode(), (int(fields[11]) + int(fields[12])) / CLK_TCK))
    return out


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
