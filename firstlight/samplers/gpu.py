"""GPU sampler over NVML (nvidia-ml-py): per-device memory and utilisation, and per-process memory.

Without the library, a driver or a GPU it says so once and stops. ``nvml`` can be any object with the
pynvml functions used here: ``NvmlSnapshot`` replays a recorded snapshot for tests and the simulator
(environment variable FIRSTLIGHT_NVML_SNAPSHOT).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from firstlight.samplers.base import Sampler
from firstlight.timeline import GpuDevice, GpuProcess, GpuSample, Observation, SourceNote

SNAPSHOT_ENV = "FIRSTLIGHT_NVML_SNAPSHOT"


def load_nvml() -> tuple[Any | None, str | None]:
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


class GpuSampler(Sampler):
    name = "gpu"

    def __init__(self, interval: float = 1.0, nvml: Any | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(interval)
        self.clock = clock
        self._nvml, self._why = (nvml, None) if nvml is not None else load_nvml()
        self._ready = False
        self._off = False
        self._names: dict[int, str] = {}  # pid -> name of the GPU's processes, looked up once each

    def sample(self) -> list[Observation]:
        if self._off:
            return []
        now = self.clock()
        nv = self._nvml
        if nv is None:
            self._off = True
            return [SourceNote(now, "gpu", f"unavailable: {self._why}; carrying on without GPU signals")]
        try:
            if not self._ready:
                nv.nvmlInit()
                self._ready = True
            count = nv.nvmlDeviceGetCount()
            devices, procs = [], []
            for i in range(count):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                try:
                    util: float | None = float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
                except Exception:  # not supported on some devices (MIG)
                    util = None
                name = nv.nvmlDeviceGetName(h)
                name = name.decode() if isinstance(name, bytes) else str(name)
                devices.append(GpuDevice(i, name, int(mem.used), int(mem.total), util))
                for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
                    used = getattr(p, "usedGpuMemory", None)
                    pid = int(p.pid)
                    name = self._names.get(pid)
                    if name is None:
                        name = self._names[pid] = _pname(pid)
                    procs.append(GpuProcess(i, pid, None if used is None else int(used), name))
        except Exception as e:  # NVMLError and friends: no driver, no GPU, lost GPU
            self._off = True
            return [SourceNote(now, "gpu", f"unavailable: NVML: {e}; carrying on without GPU signals")]
        self._names = {p.pid: p.name for p in procs}  # forget the ones gone
        if count == 0:
            self._off = True
            return [SourceNote(now, "gpu", "unavailable: NVML sees no GPU; carrying on without GPU signals")]
        return [GpuSample(now, tuple(devices), tuple(procs))]


def _pname(pid: int) -> str:
    try:
        import psutil
        return psutil.Process(pid).name()
    except Exception:
        return ""


class NvmlSnapshot:
    """A recorded NVML snapshot behind the pynvml functions the sampler calls.

    Format: {"devices": [{"name", "memory_total", "memory_used", "utilization", "processes": [{"pid",
    "used_gpu_memory"}]}]}. Read from a file, it is read again at each sample, so a test can change it.
    """

    def __init__(self, data: dict[str, Any], path: Path | None = None) -> None:
        self.devices = data["devices"]
        self.path = path

    @classmethod
    def from_file(cls, path: Path) -> NvmlSnapshot:
        return cls(json.loads(path.read_text()), path)

    def nvmlInit(self) -> None:
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
