"""GPUs the server will use (CUDA_VISIBLE_DEVICES, the first TP of them): foreign processes holding memory,
and the engines' own start-up memory rules evaluated before launch.

- SGLang (``ModelRunner.init_torch_distributed``): with TP > 1, the smallest free memory in the TP group
  (an all-reduce MIN) must be at least 0.9 of each rank's own free memory, else it raises "The memory
  capacity is unbalanced. Some GPUs may be occupied by other processes." Equivalently: min >= 0.9 x max.
- vLLM (``gpu_worker.init_device``): free memory must be at least ``--gpu-memory-utilization`` (0.9) x total,
  else "Free memory on device ... is less than desired GPU memory utilization".

The reading is the GPU sampler's (:mod:`firstlight.samplers.nvml`: nvidia-ml-py, or a recorded snapshot): no GPU
or no driver is one ``ok`` line saying the check was skipped, never a failure.
"""

from __future__ import annotations

import os

from firstlight.formats import gib
from firstlight.preflight.base import FAIL, OK, WARN, Check
from firstlight.preflight.procinfo import proc_info
from firstlight.preflight.target import Target
from firstlight.redact import Redactor
from firstlight.samplers import nvml as nvml_
from firstlight.samplers.nvml import NvmlUnavailable
from firstlight.timeline import GpuDevice, GpuProcess, GpuSample

NAME = "gpus"
CATEGORY = "gpu_occupied"
SGLANG_BALANCE = 0.9  # sglang model_runner: pre_model_load_memory < local_gpu_memory * 0.9 -> unbalanced
GIB = 1 << 30


def read_gpus(nvml: object | None = None) -> GpuSample | str:
    """One NVML reading (through the one NVML of the process), or why there is none."""
    try:
        return nvml_.read(nvml_.start(nvml))
    except NvmlUnavailable as e:
        return f"unavailable: {e}; carrying on without GPU signals"
    except Exception as e:  # NVMLError: a GPU lost, a call that timed out
        return f"unavailable: NVML: {e}; carrying on without GPU signals"


def selected_devices(target: Target, devices: tuple[GpuDevice, ...]) -> tuple[list[GpuDevice], str | None]:
    """The devices the server will use, and a problem with the selection (None when fine)."""
    by_index = {d.index: d for d in devices}
    if target.visible_devices is None:
        pool = list(devices)
    else:
        pool = []
        for entry in target.visible_devices:
            if not entry.lstrip("-").isdigit():  # GPU-uuid / MIG-uuid: NVML indices cannot be matched here
                return list(devices)[: target.tp], None
            if int(entry) < 0:
                break  # CUDA stops at the first invalid ordinal
            if int(entry) in by_index:
                pool.append(by_index[int(entry)])
    if len(pool) < target.tp:
        return pool, f"TP {target.tp} needs {target.tp} GPUs; {len(pool)} visible ({target.gpu_indices_hint})"
    return pool[: target.tp], None


def _rule_failures(target: Target, used: list[GpuDevice]) -> list[str]:
    failures = []
    free = {d.index: d.memory_total - d.memory_used for d in used}
    if target.engine == "sglang" and target.tp > 1 and free:
        lo, hi = min(free.values()), max(free.values())
        if lo < SGLANG_BALANCE * hi:
            worst = min(free, key=free.__getitem__)
            failures.append(f"SGLang's rule fails: the least free memory in the TP group (GPU {worst}: "
                            f"{gib(lo)}) is under 0.9 x the most ({gib(hi)}), so SGLang will stop with "
                            "\"The memory capacity is unbalanced\"")
    if target.engine == "vllm" and target.gpu_util is not None:
        for d in used:
            want = target.gpu_util * d.memory_total
            if free[d.index] < want:
                failures.append(f"vLLM's rule fails on GPU {d.index}: free {gib(free[d.index])} of "
                                f"{gib(d.memory_total)} is less than --gpu-memory-utilization {target.gpu_util} "
                                f"x total ({gib(int(want))})")
    return failures


def check_gpus(target: Target, reading: GpuSample | str, redactor: Redactor | None = None) -> Check:
    if isinstance(reading, str):
        return Check(NAME, OK, CATEGORY, f"skipped: {reading}")
    used, problem = selected_devices(target, reading.devices)
    if problem is not None:
        return Check(NAME, FAIL, "bad_argument", problem,
                     "lower the TP size or make more GPUs visible (CUDA_VISIBLE_DEVICES)")
    mine = {os.getpid(), os.getppid()}
    indices = {d.index for d in used}
    foreign: list[tuple[GpuProcess, str]] = []
    hints: list[str] = []
    for p in reading.processes:
        if p.gpu in indices and p.pid not in mine:
            info = proc_info(p.pid, redactor)
            mem = "?" if p.memory_used is None else gib(p.memory_used)
            foreign.append((p, f"GPU {p.gpu}: {mem} held by {info.describe()}"))
            if info.stop_hint() not in hints:
                hints.append(info.stop_hint())
    gpus = "; ".join(f"GPU {d.index} {gib(d.memory_total - d.memory_used)} free of {gib(d.memory_total)}"
                     for d in used)
    parts = [f"NVML: {gpus} ({target.gpu_indices_hint})"] + [text for _, text in foreign]
    failures = _rule_failures(target, used)
    if failures:
        fix = " or ".join(hints) if hints else "free the GPU memory held outside this server"
        return Check(NAME, FAIL, CATEGORY, "; ".join(failures + parts), fix)
    if foreign:
        return Check(NAME, WARN, CATEGORY, "; ".join(parts), " or ".join(hints))
    return Check(NAME, OK, CATEGORY, parts[0])
