"""The one door to NVML (nvidia-ml-py), for the GPU sampler, the checks before launch and the deployment's GPU count.

NVML is loaded and initialised once per process, on first use (``import firstlight`` costs nothing), from whichever
thread asks first, and shut down at exit: NVML counts its inits, and each one is owed its shutdown. ``nvml`` can be
any object with the pynvml functions used here: :class:`NvmlSnapshot` replays a recorded snapshot for tests and the
simulator (environment variable FIRSTLIGHT_NVML_SNAPSHOT), and a test hands in a fake module.

What cannot be had (no library, no driver, no GPU) is :class:`NvmlUnavailable`, once and for good; an NVML call
that fails after that (a GPU lost, a call that times out) raises NVML's own error, and its caller tries again.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from firstlight.errors import FirstlightError
from firstlight.timeline import GpuDevice, GpuProcess, GpuSample

SNAPSHOT_ENV = "FIRSTLIGHT_NVML_SNAPSHOT"

_lock = threading.Lock()
_started: list[Any] = []  # the NVML modules initialised here, each owed one nvmlShutdown at exit


class NvmlUnavailable(FirstlightError):
    """No GPU signals on this machine: the library, the driver or any GPU is missing (one line why)."""


def load() -> tuple[Any | None, str | None]:
    """The NVML module to use and, if none, why."""
    snap = os.environ.get(SNAPSHOT_ENV)
    if snap:
        try:
            return NvmlSnapshot.from_file(Path(snap)), None
        except (OSError, ValueError, KeyError) as e:
            return None, f"cannot read NVML snapshot {snap}: {e}"
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    return pynvml, None


def start(nvml: Any | None = None) -> Any:
    """``nvml`` (by default the module :func:`load` finds), initialised: once for the process, its shutdown
    registered for exit. :class:`NvmlUnavailable` when there is no NVML to use."""
    if nvml is None:
        nvml, why = load()
        if nvml is None:
            raise NvmlUnavailable(why or "no NVML")
    with _lock:
        if any(m is nvml for m in _started):
            return nvml
        try:
            nvml.nvmlInit()
        except Exception as e:  # NVMLError: no driver, no library, no permission
            raise NvmlUnavailable(f"NVML: {e}") from None
        if isinstance(nvml, NvmlSnapshot):  # a recording, read anew from its file each time: nothing owed
            return nvml
        if not _started:
            atexit.register(shutdown)
        _started.append(nvml)
    return nvml


def shutdown() -> None:
    """Shut down every NVML this process initialised (at exit; a test may call it too). A later :func:`start`
    initialises again."""
    with _lock:
        started = list(_started)
        _started.clear()
    for nvml in started:
        close = getattr(nvml, "nvmlShutdown", None)
        if close is not None:
            with contextlib.suppress(Exception):  # at exit: a driver gone since has nothing left to release
                close()


def device_count(nvml: Any | None = None) -> int | None:
    """How many GPUs NVML sees; None when it cannot say."""
    try:
        return int(start(nvml).nvmlDeviceGetCount())
    except Exception:
        return None


def read(nvml: Any, names: dict[int, str] | None = None, clock: Callable[[], float] = time.time) -> GpuSample:
    """One reading of every device of a started ``nvml``: memory, utilisation, and the processes holding memory.
    ``names``: pid -> process name, looked up once each and kept for the next reading (those gone are dropped).
    :class:`NvmlUnavailable` when NVML sees no GPU; NVML's own error when a call fails."""
    names = {} if names is None else names
    now = clock()
    count = nvml.nvmlDeviceGetCount()
    if count == 0:
        raise NvmlUnavailable("NVML sees no GPU")
    devices, procs = [], []
    for i in range(count):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        try:
            util: float | None = float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)
        except Exception:  # not supported on some devices (MIG)
            util = None
        name = nvml.nvmlDeviceGetName(h)
        name = name.decode() if isinstance(name, bytes) else str(name)
        devices.append(GpuDevice(i, name, int(mem.used), int(mem.total), util))
        for p in nvml.nvmlDeviceGetComputeRunningProcesses(h):
            used = getattr(p, "usedGpuMemory", None)
            pid = int(p.pid)
            pname = names.get(pid)
            if pname is None:
                pname = names[pid] = _pname(pid)
            procs.append(GpuProcess(i, pid, None if used is None else int(used), pname))
    held = {p.pid for p in procs}
    for pid in [p for p in names if p not in held]:  # forget the ones gone
        del names[pid]
    return GpuSample(now, tuple(devices), tuple(procs))


def _pname(pid: int) -> str:
    try:
        import psutil
        return psutil.Process(pid).name()
    except Exception:
        return ""


class NvmlSnapshot:
    """A recorded NVML snapshot behind the pynvml functions used here.

    Format: {"devices": [{"name", "memory_total", "memory_used", "utilization", "processes": [{"pid",
    "used_gpu_memory"}]}]}. Read from a file, it is read again at each reading, so a test can change it.
    """

    def __init__(self, data: dict[str, Any], path: Path | None = None) -> None:
        self.devices = data["devices"]
        self.path = path

    @classmethod
    def from_file(cls, path: Path) -> NvmlSnapshot:
        return cls(json.loads(path.read_text()), path)

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        if self.path is not None:
            self.devices = json.loads(self.path.read_text())["devices"]
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict[str, Any]:
        return dict(self.devices[i])

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> str:
        return str(h["name"])

    def nvmlDeviceGetMemoryInfo(self, h: dict[str, Any]) -> SimpleNamespace:
        used, total = h["memory_used"], h["memory_total"]
        return SimpleNamespace(used=used, total=total, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(gpu=h.get("utilization", 0), memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, h: dict[str, Any]) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=int(p["pid"]), usedGpuMemory=p.get("used_gpu_memory"))
                for p in h.get("processes", [])]
