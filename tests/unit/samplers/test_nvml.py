"""The one NVML of the process (firstlight.samplers.nvml), with a fake pynvml module injected (no GPU here): it is
initialised once, on first use, for the sampler and the checks before launch alike, and shut down at exit; the GPU
sampler tries again after a failed reading, like any sampler, and stops only when NVML is not there at all."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from firstlight.preflight.gpus import read_gpus
from firstlight.runner.after_ready import visible_gpu_count
from firstlight.samplers import nvml
from firstlight.samplers.gpu import GpuSampler
from firstlight.timeline import GpuSample, Observation, SourceNote

GIB = 1 << 30


class FakePynvml:
    """The pynvml functions firstlight calls, over one 80 GiB GPU; ``lost`` readings raise as a lost GPU does."""

    def __init__(self) -> None:
        self.inits = self.shutdowns = 0
        self.lost = 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        if self.lost:
            self.lost -= 1
            raise RuntimeError("GPU is lost")
        return SimpleNamespace(used=GIB, total=80 * GIB, free=79 * GIB)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=50, memory=0)

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"H100"

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return []


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePynvml]:
    """The fake, as the module NVML's loader finds; each test starts from an NVML nobody initialised."""
    nvml.shutdown()
    f = FakePynvml()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvml, "load", lambda: (f, None))
    yield f
    nvml.shutdown()


def test_nvml_is_initialised_once_for_every_user_and_shut_down_once(fake: FakePynvml):
    assert fake.inits == 0  # lazy: nothing until the first reading
    sampler = GpuSampler()
    assert isinstance(sampler.sample()[0], GpuSample) and isinstance(sampler.sample()[0], GpuSample)
    reading = read_gpus()
    assert isinstance(reading, GpuSample) and reading.devices[0].name == "H100"
    assert visible_gpu_count() == 1
    assert fake.inits == 1 and fake.shutdowns == 0
    nvml.shutdown()  # what exit runs (registered with atexit at the first init)
    assert fake.shutdowns == 1
    nvml.shutdown()
    assert fake.shutdowns == 1  # owed once


def test_the_shutdown_is_registered_for_exit(fake: FakePynvml, monkeypatch: pytest.MonkeyPatch):
    registered: list[Any] = []
    monkeypatch.setattr(nvml.atexit, "register", registered.append)
    nvml.start()
    assert registered == [nvml.shutdown]


def test_the_gpu_sampler_tries_again_after_a_failed_reading(fake: FakePynvml):
    sampler = GpuSampler()
    seen: list[Observation] = []
    assert isinstance(sampler._sample_reported(seen.append)[0], GpuSample)
    fake.lost = 2
    failed = sampler._sample_reported(seen.append)
    assert [(n.source, n.failed) for n in failed if isinstance(n, SourceNote)] == [("gpu", True)]
    assert "RuntimeError: GPU is lost" in failed[0].message  # type: ignore[attr-defined]
    assert sampler._sample_reported(seen.append) == []  # the same error: said once
    back = sampler._sample_reported(seen.append)
    assert [type(o) for o in back] == [SourceNote, GpuSample] and back[0].message == "sampler works again"  # type: ignore[attr-defined]
    assert sampler.failures == 2 and fake.inits == 1  # retried on the same NVML, never initialised again


def test_without_nvml_the_sampler_says_so_once_and_stops(monkeypatch: pytest.MonkeyPatch):
    nvml.shutdown()
    monkeypatch.setattr(nvml, "load", lambda: (None, "nvidia-ml-py is not installed"))
    sampler = GpuSampler()
    (note,) = sampler.sample()
    assert isinstance(note, SourceNote) and not note.failed
    assert note.message == "unavailable: nvidia-ml-py is not installed; carrying on without GPU signals"
    assert sampler.sample() == []
    assert read_gpus() == "unavailable: nvidia-ml-py is not installed; carrying on without GPU signals"
    assert visible_gpu_count() is None
