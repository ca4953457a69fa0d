"""The unit's processes, found through its cgroup: every process systemd started for it (TP workers, compile
children, helpers that left the process tree with setsid), not only the descendants of one PID.

It is the process-tree sampler (``samplers/process.py``) with a different membership: the root is the unit's
MainPID and its "children" are the other processes in the cgroup (``cgroup.procs``, sub-cgroups included),
so each process is read exactly as there (CPU, RSS, state, bytes read, threads, who died). On top, for the
unit as a whole, where the cgroup v2 files are there:

* ``memory.current``: the memory charged to the unit, page cache included (a load that reads weights through
  the page cache grows it), reported as the sample's memory;
* ``io.stat``: bytes read from devices (``rbytes``, summed over devices). It counts device reads only, so it
  tells a cold load from a page-cache-hot one; the sample's bytes read are the larger of it and the
  per-process count, so the judge's disk-progress rule sees both kinds of load.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from firstlight.samplers.oom import OomTraces
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.timeline import Observation, ProcessSample, SourceNote

CGROUP_ROOT = Path("/sys/fs/cgroup")
MAX_CGROUP_DIRS = 256  # sub-cgroups walked per sample (a Delegate=yes unit may create some)


def cgroup_dir(control_group: str, root: Path = CGROUP_ROOT) -> Path | None:
    """The directory of a unit's ControlGroup (``/system.slice/x.service``): the unified (v2) hierarchy,
    else the hybrid layout's ``unified`` or ``systemd`` mount; None when none holds it."""
    rel = control_group.strip().lstrip("/")
    if not rel:
        return None
    for base in (root, root / "unified", root / "systemd"):
        d = base / rel
        if (d / "cgroup.procs").is_file():
            return d
    return None


def read_pids(directory: Path) -> list[int]:
    """Every process in the cgroup and its sub-cgroups, in the kernel's order (no duplicates)."""
    seen: dict[int, None] = {}
    dirs = [directory]
    walked = 0
    while dirs and walked < MAX_CGROUP_DIRS:
        d = dirs.pop(0)
        walked += 1
        try:
            text = (d / "cgroup.procs").read_text()
        except OSError:
            continue
        for tok in text.split():
            if tok.isdigit():
                seen.setdefault(int(tok), None)
        try:
            dirs.extend(sorted(p for p in d.iterdir() if p.is_dir()))
        except OSError:
            pass
    return list(seen)


def read_memory_current(directory: Path) -> int | None:
    try:
        return int((directory / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None


def read_io_rbytes(directory: Path) -> int | None:
    """Bytes read from devices by the cgroup (``io.stat`` lines ``MAJ:MIN rbytes=N wbytes=N rios=N ...``)."""
    try:
        text = (directory / "io.stat").read_text()
    except OSError:
        return None
    total = 0
    for line in text.splitlines():
        for tok in line.split()[1:]:
            key, _, value = tok.partition("=")
            if key == "rbytes" and value.isdigit():
                total += int(value)
    return total


class _CgroupRoot(psutil.Process):
    """The main process, whose "children" are the other processes of the cgroup."""

    def __init__(self, pid: int, members: Callable[[], list[int]]) -> None:
        super().__init__(pid)
        self._members = members

    def children(self, recursive: bool = False) -> list[psutil.Process]:
        out = []
        for pid in self._members():
            if pid == self.pid:
                continue
            try:
                out.append(psutil.Process(pid))
            except psutil.Error:
                continue
        return out


class CgroupSampler(ProcessTreeSampler):
    """ProcessSample observations of every process in a unit's cgroup.

    ``main_pid``: the unit's MainPID (from ``systemctl show``); when it exits the attempt is over, as it is
    for systemd. Without it (a journal file watched with a cgroup directory given), the first process in
    the cgroup is the root, another one takes over when it exits, and the attempt is over when the cgroup
    is empty.
    """

    name = "cgroup"
    tree_from_table = False  # its root's "children" are the cgroup's processes

    def __init__(self, directory: Path, main_pid: int | None = None, interval: float = 1.0,
                 exit_code: Callable[[], int | None] | None = None,
                 clock: Callable[[], float] = time.time, oom: OomTraces | None = None) -> None:
        super().__init__(main_pid or 0, interval, exit_code, clock, oom=oom)
        self.directory = directory
        self.main_pid = main_pid
        self._pids: list[int] = []
        self._described = False

    def _members(self) -> list[int]:
        return self._pids

    def _root_process(self) -> psutil.Process | None:
        self._pids = read_pids(self.directory)
        root = self._root
        if root is not None and (self.main_pid is not None or (root.pid in self._pids and _running(root))):
            return root
        candidates = [self.main_pid] if self.main_pid is not None else self._pids
        for pid in candidates:
            try:
                new = _CgroupRoot(pid, self._members)
            except psutil.Error:
                continue
            if self.main_pid is not None or _running(new):
                self._root, self.pid = new, pid
                return new
        return root  # gone (or never there): the sample says so

    def sample(self) -> list[Observation]:
        out: list[Observation] = []
        if not self._described:
            self._described = True
            out.append(self._describe())
        for obs in super().sample():
            if isinstance(obs, ProcessSample) and obs.alive:
                obs = self._unit_totals(obs)
            out.append(obs)
        return out

    def _unit_totals(self, s: ProcessSample) -> ProcessSample:
        memory = read_memory_current(self.directory)
        device_reads = read_io_rbytes(self.directory)
        return dataclasses.replace(
            s, rss_bytes=memory if memory is not None else s.rss_bytes,
            read_bytes=max(s.read_bytes, device_reads or 0))

    def _describe(self) -> SourceNote:
        has_memory = (self.directory / "memory.current").is_file()
        has_io = (self.directory / "io.stat").is_file()
        what = [f"cgroup {self.directory}: every process in cgroup.procs"]
        what.append("memory from memory.current (page cache included)" if has_memory
                    else "no memory.current (cgroup v1?): memory is the processes' RSS")
        what.append("device reads from io.stat" if has_io
                    else "no io.stat (cgroup v1, or the io controller is off): reads counted per process")
        return SourceNote(self.clock(), "cgroup", "; ".join(what))


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False

