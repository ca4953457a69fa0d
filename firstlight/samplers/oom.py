"""The kernel's OOM-kill traces of a server process: read, never judged (the judge decides what they mean).

Where the kernel and systemd leave them, in the formats they write:

* cgroup v2 ``memory.events`` of the server's cgroup: ``oom_kill N`` (``low 0`` / ``high 0`` / ``max 3`` /
  ``oom 1`` / ``oom_kill 1`` / ``oom_group_kill 0``, one ``key value`` a line);
* cgroup v1 ``memory.oom_control`` (``oom_kill_disable 0`` / ``under_oom 0`` / ``oom_kill 1``) of the memory
  controller's directory, and ``memory.failcnt`` (how often the limit was hit) where the kernel is too old to
  count kills (before 4.13);
* the unit's ``Result=oom-kill`` (systemd), given by the caller;
* the kernel log, where it is readable (``/dev/kmsg``: ``6,123,456,-;Out of memory: Killed process 4242 (x)``,
  ``Memory cgroup out of memory: Killed process 4242 ...``, ``oom-kill:constraint=...,task=x,pid=4242,...``).

Counters are read when the watch begins and again when the process is found gone: only an increase counts,
since a cgroup shared with earlier processes keeps their kills.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
KMSG = Path("/dev/kmsg")
MAX_KMSG_RECORDS = 20_000  # the kernel's ring buffer holds far fewer; bounds a file given in its place
_KILLED = re.compile(r"(?:Out of memory|Memory cgroup out of memory): Killed process (\d+) \(([^)]*)\)")
_OOM_KILL = re.compile(r"oom-kill:.*?\bpid=(\d+)")
_KMSG_PREFIX = re.compile(r"\d+,\d+,\d+(?:,[^;]*)?;")  # /dev/kmsg's "priority,sequence,microseconds,flags;"


def read_keyed(path: Path) -> dict[str, int]:
    """A ``key value`` file (``memory.events``, ``memory.oom_control``); empty when unreadable."""
    out: dict[str, int] = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def memory_dirs(pid: int, root: Path = CGROUP_ROOT, proc: Path = Path("/proc")) -> list[Path]:
    """The memory-accounting cgroup directories of a process, from ``/proc/PID/cgroup``: the v2 one
    (``0::/path``) and the v1 memory controller's (``N:memory:/path``), those that exist."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        _, _, rest = line.partition(":")
        controllers, _, rel = rest.partition(":")
        rel = rel.strip().lstrip("/")
        if controllers == "":
            d = root / rel
        elif "memory" in controllers.split(","):
            d = root / "memory" / rel
        else:
            continue
        if d.is_dir():
            found.append(d)
    return found


def counters(directory: Path) -> dict[str, int]:
    """The OOM counters of one cgroup directory, whichever version wrote them."""
    out: dict[str, int] = {}
    events = read_keyed(directory / "memory.events")
    if "oom_kill" in events:
        out["memory.events oom_kill"] = events["oom_kill"]
    control = read_keyed(directory / "memory.oom_control")
    if "oom_kill" in control:
        out["memory.oom_control oom_kill"] = control["oom_kill"]
    failcnt = read_int(directory / "memory.failcnt")
    if failcnt is not None and not out:
        # only where no oom_kill counter exists (v1 before Linux 4.13): it counts every time the limit was
        # hit, page-cache reclaim included, so beside a real kill counter it would only add noise
        out["memory.failcnt"] = failcnt
    return out


def kernel_log_kills(pids: Iterable[int], kmsg: Path = KMSG) -> list[str]:
    """Kernel log lines saying the OOM killer killed one of ``pids`` (empty where the log is unreadable)."""
    wanted = {int(p) for p in pids}
    if not wanted:
        return []
    found: list[str] = []
    for text in _kernel_messages(kmsg):
        m = _KILLED.search(text) or _OOM_KILL.search(text)
        if m is not None and int(m.group(1)) in wanted:
            found.append(text[:300])
    return found


def kernel_log_cgroup_kills(cgroup_word: str, kmsg: Path = KMSG) -> list[str]:
    """Kernel log lines of OOM kills in a cgroup whose path holds ``cgroup_word`` (a container's id: podman's
    ``libpod-ID``, Docker's ``docker-ID.scope`` or ``/docker/ID``): the ``oom-kill:`` line, which names the
    cgroup, and the ``Killed process PID`` line of the PID it names. For a process that died before its PID
    was seen."""
    if len(cgroup_word) < 12:  # a short word would match other cgroups
        return []
    texts = _kernel_messages(kmsg)
    pids = set()
    found: list[str] = []
    for text in texts:
        m = _OOM_KILL.search(text)
        if m is not None and cgroup_word in text:
            pids.add(int(m.group(1)))
            found.append(text[:300])
    for text in texts:
        m = _KILLED.search(text)
        if m is not None and int(m.group(1)) in pids:
            found.append(text[:300])
    return found


def _kernel_messages(kmsg: Path) -> list[str]:
    """Each record's message: its first line (the rest is the record's KEY=value dictionary), without /dev/kmsg's
    prefix; a plain log file's lines (dmesg's, a saved kmsg) as they are, whatever ``;`` the message holds."""
    out = []
    for record in _kmsg_records(kmsg):
        first = record.split("\n", 1)[0]
        prefix = _KMSG_PREFIX.match(first)
        out.append((first[prefix.end():] if prefix else first).strip())
    return out


def _kmsg_records(path: Path) -> list[str]:
    """Every record /dev/kmsg holds now, without blocking (a plain file given instead: its lines)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    records: list[str] = []
    try:
        if not os.path.isfile(path):  # /dev/kmsg: a fresh descriptor starts at the oldest record kept
            while len(records) < MAX_KMSG_RECORDS:
                try:
                    chunk = os.read(fd, 8192)  # one record per read
                except OSError as e:
                    if e.errno == errno.EPIPE:  # overwritten while reading: go on with the next one
                        continue
                    break  # EAGAIN: no more; EPERM/EINVAL: not readable here
                if not chunk:
                    break
                records.append(chunk.decode("utf-8", "replace"))
        else:
            data = os.read(fd, 16 << 20).decode("utf-8", "replace")
            records = data.splitlines()[:MAX_KMSG_RECORDS]
    finally:
        os.close(fd)
    return records


class OomTraces:
    """Reads a server's OOM counters when the watch begins; ``evidence()`` says what changed by its end.

    ``directories``: the cgroup directories to read (a unit's own), else those of ``pid`` found in /proc;
    ``unit_result``: systemd's Result for the unit (``oom-kill`` is a trace); ``kmsg``: the kernel log."""

    def __init__(self, pid: int | None = None, directories: list[Path] | None = None,
                 unit_result: Callable[[], str | None] | None = None, kmsg: Path = KMSG,
                 root: Path = CGROUP_ROOT, proc: Path = Path("/proc")) -> None:
        self.pid = pid
        if directories is None:
            directories = memory_dirs(pid, root, proc) if pid is not None else []
        self.directories = directories
        self.unit_result = unit_result
        self.kmsg = kmsg
        self.before = {d: counters(d) for d in directories}

    def evidence(self, pids: Iterable[int] = ()) -> tuple[str, ...]:
        out: list[str] = []
        for d, before in self.before.items():
            after = counters(d)
            for key, value in after.items():
                was = before.get(key)
                if was is not None and value > was:
                    file, _, field = key.partition(" ")
                    what = f"{field} {was} -> {value}" if field else f"{was} -> {value} (the memory limit was hit)"
                    out.append(f"{d / file}: {what}")
        if self.unit_result is not None:
            with contextlib.suppress(Exception):  # a systemctl that cannot answer leaves the other traces
                if self.unit_result() == "oom-kill":
                    out.append("systemd: Result=oom-kill")
        all_pids = {*pids, *([self.pid] if self.pid is not None else [])}
        out += [f"kernel log: {line}" for line in kernel_log_kills(all_pids, self.kmsg)]
        return tuple(out)
