"""Who a process is, for the evidence of the GPU, port and stale-server checks: name, command line, and
the systemd unit it runs under (from /proc/PID/cgroup), so the fix can say ``systemctl stop UNIT`` rather
than ``kill PID`` for a service that would be restarted. NVML reports host PIDs: inside a container a PID
may not exist in our PID namespace, and the evidence says so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil

from firstlight.redact import Redactor

_CMDLINE_MAX = 200


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    visible: bool
    name: str = ""
    cmdline: str = ""
    unit: str | None = None  # a systemd service, when the process runs under one

    def describe(self) -> str:
        if not self.visible:
            return f"PID {self.pid} (not visible from here: NVML reports host PIDs, so it runs in another " \
                   "PID namespace, e.g. outside this container)"
        unit = f", unit {self.unit}" if self.unit else ""
        cmd = self.cmdline if len(self.cmdline) <= _CMDLINE_MAX else self.cmdline[:_CMDLINE_MAX] + "..."
        return f"PID {self.pid} {self.name}{unit}: {cmd}"

    def stop_hint(self) -> str:
        if not self.visible:
            return f"stop PID {self.pid} where it runs (on the host: `kill {self.pid}`)"
        if self.unit:
            return f"systemctl stop {self.unit}"
        return f"kill {self.pid}"


def unit_from_cgroup(text: str) -> str | None:
    """The innermost ``*.service`` in a /proc/PID/cgroup file (v2 ``0::/system.slice/x.service``, or v1's
    ``name=systemd`` hierarchy); None for login sessions, containers and the root cgroup."""
    paths = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and (parts[0] == "0" or "name=systemd" in parts[1]):
            paths.append(parts[2])
    for path in paths:
        services = [c for c in path.split("/") if c.endswith(".service")]
        if services:
            return services[-1]
    return None


def proc_info(pid: int, redactor: Redactor | None = None, proc_root: Path = Path("/proc")) -> ProcInfo:
    """What can be read about ``pid`` from this PID namespace (secrets in its command line masked)."""
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            name = p.name()
            argv = p.cmdline()
    except psutil.NoSuchProcess:
        return ProcInfo(pid, False)
    except psutil.AccessDenied:
        return ProcInfo(pid, True, name="?", cmdline="(access denied)")
    try:
        unit = unit_from_cgroup((proc_root / str(pid) / "cgroup").read_text())
    except OSError:
        unit = None
    r = redactor or Redactor()
    return ProcInfo(pid, True, name, " ".join(r.argv(argv)) if argv else f"[{name}]", unit)
