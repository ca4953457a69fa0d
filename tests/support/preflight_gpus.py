"""Helpers shared by tests/e2e/preflight/test_gpus.py, tests/unit/preflight/test_gpus.py."""

from __future__ import annotations

from typing import Any

from firstlight.preflight.base import Check
from firstlight.preflight.gpus import GIB, read_gpus
from firstlight.preflight.gpus import check_gpus as _check_gpus
from firstlight.preflight.target import Target, read_target
from firstlight.redact import Redactor
from firstlight.samplers.gpu import NvmlSnapshot
from firstlight.timeline import GpuSample

TOTAL = 80 * GIB


def dev(free: int, processes: list[dict[str, Any]] | None = None, total: int = TOTAL) -> dict[str, Any]:
    return {"name": "H100", "memory_total": total, "memory_used": total - free, "processes": processes or []}


def reading(*devices: dict[str, Any]) -> GpuSample:
    r = read_gpus(NvmlSnapshot({"devices": list(devices)}))
    assert isinstance(r, GpuSample), r
    return r


def check_gpus(target: Target, r: GpuSample | str, redactor: Redactor | None = None) -> Check:
    c = _check_gpus(target, r, redactor)
    assert c.name == "gpus", c
    return c


def tgt(argv: list[str], cvd: str | None = None) -> Target:
    return read_target(argv, env={} if cvd is None else {"CUDA_VISIBLE_DEVICES": cvd})
