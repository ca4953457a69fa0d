"""GPU sampler over NVML (:mod:`firstlight.samplers.nvml`): per-device memory and utilisation, and per-process
memory.

Without the library, a driver or a GPU it says so once and stops. A reading that fails once NVML is up (a GPU
lost, a call that timed out) is a sampler's failure like any other: said in a note marked failed, and tried again
at the next sample. ``nvml`` can be any object with the pynvml functions used (``NvmlSnapshot``: a recorded
snapshot for tests and the simulator, environment variable FIRSTLIGHT_NVML_SNAPSHOT).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from firstlight.samplers import nvml as nvml_
from firstlight.samplers.base import Sampler
from firstlight.samplers.nvml import SNAPSHOT_ENV, NvmlSnapshot, NvmlUnavailable
from firstlight.timeline import Observation, SourceNote

__all__ = ["SNAPSHOT_ENV", "GpuSampler", "NvmlSnapshot"]


class GpuSampler(Sampler):
    name = "gpu"

    def __init__(self, interval: float = 1.0, nvml: Any | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(interval)
        self.clock = clock
        self._given = nvml  # None: the one nvml_.load finds, at the first sample
        self._nvml: Any | None = None  # started
        self._off = False
        self._names: dict[int, str] = {}  # pid -> name of the GPU's processes, looked up once each

    def sample(self) -> list[Observation]:
        if self._off:
            return []
        try:
            if self._nvml is None:
                self._nvml = nvml_.start(self._given)
            return [nvml_.read(self._nvml, self._names, self.clock)]
        except NvmlUnavailable as e:  # nothing to sample here, for good; a failing call raises on, and is retried
            self._off = True
            return [SourceNote(self.clock(), "gpu", f"unavailable: {e}; carrying on without GPU signals")]
