"""The memory-and-disk check (``firstlight.preflight.resources``) in process: the weights against the GPUs' free
memory, else the RAM; the page cache's share; the read-rate sample and the time it gives the rest. The machine's
answers (available RAM, page-cache residency, the read sample) are scripted, so each rule is seen at its edge."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from firstlight.preflight import resources
from firstlight.preflight.checkpoint import Scan
from firstlight.preflight.pagecache import ReadSample
from firstlight.preflight.target import read_target
from firstlight.timeline import GpuDevice, GpuSample

GB = 10 ** 9


def _weights(tmp_path: Path, *sizes: int) -> Scan:
    files = []
    for i, size in enumerate(sizes):
        f = tmp_path / f"model-{i:05d}.safetensors"
        with f.open("wb") as out:
            out.truncate(size)  # sparse: sized, not written
        files.append(f)
    return Scan(tmp_path, files=files, total_bytes=sum(sizes))


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    m = SimpleNamespace(ram=64 * GB, cached={}, sample=None, sampled=[])
    monkeypatch.setattr(resources.psutil, "virtual_memory", lambda: SimpleNamespace(available=m.ram))
    monkeypatch.setattr(resources, "cached_bytes", lambda f: m.cached.get(f.name))

    def sample(files: list[Path]) -> Any:
        m.sampled.append(files)
        return m.sample

    monkeypatch.setattr(resources, "sample_read_rate", sample)
    return m


def _gpus(*free_gb: float, total_gb: float = 80) -> GpuSample:
    return GpuSample(0.0, devices=tuple(GpuDevice(i, "H100", int((total_gb - f) * GB), int(total_gb * GB), 0.0)
                                        for i, f in enumerate(free_gb)))


TP2 = read_target(["vllm", "serve", "/m", "--tensor-parallel-size", "2"], env={})


def test_no_weight_files_is_skipped(machine: SimpleNamespace, tmp_path: Path):
    for scan in (None, Scan(tmp_path)):
        check = resources.check_resources(TP2, scan, "no GPU")
        assert (check.status, check.evidence) == ("ok", "skipped: no weight files to size")


def test_weights_that_fit_the_gpus_free_memory_are_ok(machine: SimpleNamespace, tmp_path: Path):
    machine.cached = {"model-00000.safetensors": 0, "model-00001.safetensors": 0}
    check = resources.check_resources(TP2, _weights(tmp_path, 60 * GB, 60 * GB), _gpus(70, 70, 5), disk_sample=False)
    assert check.status == "ok" and check.hint is None
    assert check.evidence == ("weights 120.0 GB in 2 files; RAM 64.0 GB available; GPU 140.0 GB free on 2 GPUs; "
                              "page cache holds 0% (0 B)")


def test_weights_above_the_free_memory_of_the_gpus_used_warn(machine: SimpleNamespace, tmp_path: Path):
    # 141 GB on the two GPUs TP 2 uses: the third GPU's memory is not the server's
    check = resources.check_resources(TP2, _weights(tmp_path, 141 * GB), _gpus(70, 70, 80), disk_sample=False)
    assert check.status == "warn" and check.hint == ("use more GPUs (a larger TP), a smaller quantization, or free "
                                                     "GPU memory")
    assert "GPU 140.0 GB free on 2 GPUs; the weights alone exceed the GPUs' free memory" in check.evidence
    assert "1 file;" in check.evidence
    exactly = resources.check_resources(TP2, _weights(tmp_path, 140 * GB), _gpus(70, 70), disk_sample=False)
    assert exactly.status == "ok"  # equal fits


def test_without_gpus_the_weights_are_held_against_the_ram(machine: SimpleNamespace, tmp_path: Path):
    machine.ram = 10 * GB
    over = resources.check_resources(TP2, _weights(tmp_path, 10 * GB + 1), "NVML could not be read", False)
    assert over.status == "warn" and over.hint == "free RAM or expect the load to page from disk throughout"
    assert over.evidence.endswith("the weights exceed the available RAM; page-cache residency unknown")
    assert resources.check_resources(TP2, _weights(tmp_path, 10 * GB), "no GPU", False).status == "ok"


def test_too_few_visible_gpus_are_left_to_the_gpu_check(machine: SimpleNamespace, tmp_path: Path):
    machine.ram = GB
    check = resources.check_resources(TP2, _weights(tmp_path, 2 * GB), _gpus(70), disk_sample=False)
    assert "GPU" not in check.evidence.split("; ")[2] and check.status == "warn"  # the RAM rule instead
    assert check.evidence.endswith("the weights exceed the available RAM; page-cache residency unknown")


def test_the_page_cache_share_counts_the_files_it_can_read(machine: SimpleNamespace, tmp_path: Path):
    machine.cached = {"model-00000.safetensors": 3 * GB}  # the second file's residency is unknown
    check = resources.check_resources(TP2, _weights(tmp_path, 4 * GB, 4 * GB), _gpus(70, 70), disk_sample=False)
    assert "page cache holds 75% (3.0 GB)" in check.evidence


def test_the_read_sample_gives_the_time_the_uncached_rest_needs(machine: SimpleNamespace, tmp_path: Path):
    scan = _weights(tmp_path, 4 * GB, 2 * GB)
    machine.cached = {"model-00000.safetensors": GB, "model-00001.safetensors": 0}
    machine.sample = ReadSample(scan.files[1], 4096, 256 * 2 ** 20, 0.5)
    check = resources.check_resources(TP2, scan, _gpus(70, 70))
    assert machine.sampled == [scan.files]
    assert check.evidence.endswith("read rate 537 MB/s (268.4 MB of model-00001.safetensors at offset 4096 in "
                                   "0.50s): the uncached 5.0 GB need about 9.3s")


def test_no_sample_when_turned_off_or_all_cached(machine: SimpleNamespace, tmp_path: Path):
    scan = _weights(tmp_path, GB)
    machine.sample = ReadSample(scan.files[0], 0, 1, 1.0)
    resources.check_resources(TP2, scan, _gpus(70, 70), disk_sample=False)
    machine.cached = {"model-00000.safetensors": GB}
    resources.check_resources(TP2, scan, _gpus(70, 70))
    assert machine.sampled == []
    machine.cached = {"model-00000.safetensors": GB - 1}
    resources.check_resources(TP2, scan, _gpus(70, 70))
    assert machine.sampled == [scan.files]  # one byte not cached: sampled


def test_a_sample_that_read_nothing_is_said_or_left_out(machine: SimpleNamespace, tmp_path: Path):
    scan = _weights(tmp_path, GB)
    check = resources.check_resources(TP2, scan, _gpus(70, 70))
    assert check.evidence.endswith("read-rate sample: no uncached data to read (holes or cached)")
    machine.sample = ReadSample(scan.files[0], 0, 0, 0.1)
    assert resources.check_resources(TP2, scan, _gpus(70, 70)).evidence.endswith("page-cache residency unknown")
    machine.sample = ReadSample(scan.files[0], 0, 10, 0.0)  # no time measured: no rate
    assert resources.check_resources(TP2, scan, _gpus(70, 70)).evidence.endswith("page-cache residency unknown")


def test_the_check_is_named_and_a_slow_disk_is_still_a_rate(machine: SimpleNamespace, tmp_path: Path):
    scan = _weights(tmp_path, GB)
    assert resources.check_resources(TP2, None, "no GPU").name == "memory_disk"
    machine.sample = ReadSample(scan.files[0], 0, 1, 2.0)  # half a byte a second: slow, but measured
    check = resources.check_resources(TP2, scan, _gpus(70, 70))
    assert check.name == "memory_disk" and "read rate 0 MB/s (1 B of" in check.evidence
    machine.sample = ReadSample(scan.files[0], 0, 3_000_000, 2.0)  # 1.5 MB/s: rounded as a figure is
    assert "read rate 2 MB/s" in resources.check_resources(TP2, scan, _gpus(70, 70)).evidence
