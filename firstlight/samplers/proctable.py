"""``/proc/PID/stat`` read once, parsed once: what a sample needs of a process (parent, group, state, CPU, threads,
start, RSS) from one file, where psutil reads stat, statm and status for the same figures; and a process tree read
the cheaper way (:class:`TreeReader`), where psutil's ``children`` reads every process's stat on each call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

from firstlight.cputime import CLK_TCK

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# stat letters as psutil names them (ProcInfo.state)
STATES = {"R": "running", "S": "sleeping", "D": "disk-sleep", "T": "stopped", "t": "tracing-stop", "Z": "zombie",
          "X": "dead", "x": "dead", "K": "wake-kill", "W": "waking", "P": "parked", "I": "idle"}


@dataclass(frozen=True, slots=True)
class Stat:
    pid: int
    comm: str
    state: str  # the kernel's letter
    ppid: int
    pgrp: int
    cpu_seconds: float  # utime + stime
    threads: int
    start_ticks: int  # clock ticks after boot: with the pid, the process's identity
    rss_bytes: int

    @property
    def status(self) -> str:
        return STATES.get(self.state, self.state)


def parse_stat(pid: int, raw: bytes) -> Stat | None:
    head, _, rest = raw.rpartition(b")")
    f = rest.split()
    if len(f) < 22:
        return None
    return Stat(pid, head.partition(b"(")[2].decode(errors="replace"), f[0].decode(), int(f[1]), int(f[2]),
                (int(f[11]) + int(f[12])) / CLK_TCK, int(f[17]), int(f[19]), int(f[21]) * PAGE)


def read_stat(pid: int) -> Stat | None:
    """The process's stat, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return parse_stat(pid, fh.read())
    except (OSError, ValueError):
        return None


class Table:
    """Every process's stat at one moment: the parent of each, parsed in full only for the processes asked about."""

    def __init__(self, raw: dict[int, bytes]) -> None:
        self._raw = raw
        self._parsed: dict[int, Stat | None] = {}
        self.ppid: dict[int, int] = {}
        for pid, b in raw.items():
            rest = b[b.rfind(b")") + 4:]  # ") S PPID ..."
            try:
                self.ppid[pid] = int(rest[:rest.index(b" ")])
            except ValueError:
                continue

    def get(self, pid: int) -> Stat | None:
        if pid not in self._parsed:
            raw = self._raw.get(pid)
            try:
                self._parsed[pid] = None if raw is None else parse_stat(pid, raw)
            except ValueError:
                self._parsed[pid] = None
        return self._parsed[pid]

    def children_of(self, pid: int) -> list[int]:
        return [c for c, pp in self.ppid.items() if pp == pid]

    def descendants(self, roots: list[int]) -> list[int]:
        """Every process below ``roots`` (not the roots themselves), parents before children."""
        children: dict[int, list[int]] = {}
        for c, pp in self.ppid.items():
            children.setdefault(pp, []).append(c)
        out: list[int] = []
        seen = set(roots)
        todo = list(roots)
        while todo:
            for c in children.get(todo.pop(), ()):
                if c not in seen:
                    seen.add(c)
                    out.append(c)
                    todo.append(c)
        return out


def scan() -> Table:
    """Every process's stat, in one pass over /proc."""
    raw: dict[int, bytes] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return Table(raw)
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    raw[int(name)] = fh.read()
            except OSError:
                continue
    return Table(raw)


def _walk(roots: list[int], recursive: bool = True) -> tuple[list[int], int] | None:
    """Every process below ``roots`` from each thread's ``/proc/PID/task/TID/children`` (a fork from any thread
    lands in that thread's file), parents before children, and how many files that read: one per thread of the
    tree, where a scan reads one per process of the machine (thousands with the kernel's threads on a large
    host). None where the kernel has no such file (CONFIG_PROC_CHILDREN)."""
    files = 0
    out: list[int] = []
    seen = set(roots)
    todo = list(roots)
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone
        files += 1 + len(tids)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    kids = fh.read().split()
            except FileNotFoundError:
                if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                    continue  # the thread ended
                return None
            except OSError:
                continue
            for k in kids:
                c = int(k)
                if c not in seen:
                    seen.add(c)
                    out.append(c)
                    if recursive:
                        todo.append(c)
    return out, files


class TreeReader:
    """The descendants of some processes, read the cheaper way each time: the threads' children files (a read per
    thread of the tree) while that is fewer files than the machine has processes, else one scan of the table."""

    def __init__(self) -> None:
        self._tree_files = 0  # what the last walk read (or would have: the tree's threads, from the last scan)
        self._host = 0  # processes on the machine, counted every 10th call
        self._calls = 0
        self._children_files = True  # the kernel has them (CONFIG_PROC_CHILDREN)

    def below(self, roots: list[int], recursive: bool = True) -> tuple[list[int], Table | None]:
        """Every process below ``roots`` (``recursive=False``: their children), parents before children; the
        table, when one was read."""
        if self._calls % 10 == 0:
            self._host = process_count()
        self._calls += 1
        if self._children_files and self._tree_files < self._host:
            got = _walk(roots, recursive)
            if got is not None:
                self._tree_files = got[1]
                return got[0], None
            self._children_files = False
        table = scan()
        pids = table.descendants(roots) if recursive else [c for r in roots for c in table.children_of(r)]
        self._tree_files = sum(1 + st.threads for st in map(table.get, [*roots, *pids]) if st is not None)
        return pids, table


def process_count() -> int:
    """Processes on the machine (kernel threads included): what a scan reads."""
    try:
        return sum(1 for n in os.listdir("/proc") if n[:1].isdigit())
    except OSError:
        return 0


def last_pid() -> int | None:
    """The pid most recently created in this pid namespace (``/proc/loadavg``): while it stays the same, no
    process was created, so a tree can only have lost members."""
    try:
        with open("/proc/loadavg", "rb") as fh:
            return int(fh.read().split()[4])
    except (OSError, ValueError, IndexError):
        return None


class IoCounters(NamedTuple):
    """A process's cumulative reads (/proc/PID/io): ``chars`` by read() calls (the page cache's included),
    ``storage`` brought from storage (mapped pages faulted in included)."""

    chars: int
    storage: int


IO_DENIED = IoCounters(-1, -1)  # another user's process


def read_io(pid: int) -> IoCounters | None:
    """The process's read counters; ``IO_DENIED`` when not allowed, None once the process is gone."""
    try:
        with open(f"/proc/{pid}/io", "rb") as fh:
            raw = fh.read()
    except PermissionError:
        return IO_DENIED
    except OSError:
        return None
    rchar = rbytes = 0
    for line in raw.splitlines():
        if line.startswith(b"rchar:"):
            rchar = int(line[6:])
        elif line.startswith(b"read_bytes:"):
            rbytes = int(line[11:])
    return IoCounters(rchar, rbytes)
