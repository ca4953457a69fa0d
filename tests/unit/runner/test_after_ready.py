"""Once READY holds (``firstlight.runner.after_ready``), in process: how many GPUs the deployment sees (its key in
the history), the history opened or said unavailable, and the checks that run only when asked for. The real
servers behind the warm-up, the benchmark and the history: ``tests/e2e/test_after_ready.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from firstlight.config import Config, HistoryConfig
from firstlight.engines import get_profile
from firstlight.redact import Redactor
from firstlight.runner import after_ready
from firstlight.samplers import gpu as gpu_sampler


class Nvml:
    def __init__(self, count: int | Exception) -> None:
        self.count = count

    def nvmlInit(self) -> None:
        if isinstance(self.count, Exception):
            raise self.count

    def nvmlDeviceGetCount(self) -> int:
        assert isinstance(self.count, int)
        return self.count


@pytest.mark.parametrize(("visible", "count"), [("0,1", 2), ("0, ,2", 2), ("-1", 0), ("0,-1", 1), ("", 0),
                                                  ("GPU-5e3c,GPU-77a1", 2)])
def test_the_visible_gpus_are_counted_from_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch, visible: str,
                                                                count: int):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(gpu_sampler, "load_nvml", lambda: pytest.fail("NVML asked although the variable is set"))
    assert after_ready.visible_gpu_count() == count


@pytest.mark.parametrize(("nvml", "count"), [(Nvml(8), 8), (Nvml(RuntimeError("NVML_ERROR_DRIVER_NOT_LOADED")), None),
                                             (None, None)])
def test_without_the_variable_nvml_counts_or_nobody_knows(monkeypatch: pytest.MonkeyPatch, nvml: Any,
                                                         count: int | None):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpu_sampler, "load_nvml", lambda: (nvml, None if nvml else "nvidia-ml-py is not installed"))
    assert after_ready.visible_gpu_count() == count


def test_no_history_when_turned_off_and_a_warning_when_it_cannot_be_opened(tmp_path: Path):
    warned: list[str] = []
    off = Config(history=HistoryConfig(enabled=False, path=tmp_path / "h.db"))
    assert after_ready.open_history(off, Redactor(), warned.append) is None and warned == []
    assert not (tmp_path / "h.db").exists()
    on = Config(history=HistoryConfig(path=tmp_path / "h.db"))
    history = after_ready.open_history(on, Redactor(), warned.append)
    assert history is not None and warned == []
    history.close()
    bad = Config(history=HistoryConfig(path=tmp_path))  # a directory, not a database file
    assert after_ready.open_history(bad, Redactor(), warned.append) is None
    assert len(warned) == 1 and warned[0].startswith("history unavailable, not recorded: ")
    assert after_ready.HISTORY_BUSY_S == 1.0


def test_nothing_runs_after_ready_unless_asked():
    said: list[str] = []
    assert after_ready.post_ready_checks(Config(), get_profile("vllm"), "m", said.append) == {} and said == []


def test_an_engine_without_startup_endpoints_is_not_asked():
    cfg = Config()  # its URL is nobody's: a request would fail, and the test with it
    assert after_ready.engine_clock_endpoints(cfg, get_profile("vllm"), lambda: 0.0) == []
    assert after_ready.CLOCK_READ_TIMEOUT_S == 3.0


def test_the_deployment_key_takes_the_model_on_disk_else_the_command_s_else_the_probe_s(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    vllm = get_profile("vllm")
    on_disk = after_ready.deployment_key(Config(model_path=tmp_path), vllm, ["vllm", "serve", "org/m"], Redactor())
    named = after_ready.deployment_key(Config(), vllm, ["vllm", "serve", "org/m"], Redactor())
    probed = after_ready.deployment_key(Config(), vllm, [], Redactor())
    assert on_disk.model == str(tmp_path) and named.model == "org/m" and probed.model is None
    assert named.gpu_count == 2 and named.engine == "vllm" and len({on_disk.hash, named.hash, probed.hash}) == 3
