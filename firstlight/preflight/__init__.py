"""Preflight: the known start failures, caught before the ten-minute wait.

Everything needed to predict a stale process on a GPU, a library too old for the checkpoint's quantization,
a venv without pip, a truncated shard, a busy port or a stale server is on the machine before launch. Each
check module reads one of these and returns a :class:`Check`; :func:`run_preflight` runs them (the slow
ones, subprocesses and file headers, at once in threads) and returns a :class:`PreflightReport`.

>>> report = run_preflight(read_target(["llama-server", "-m", "model.gguf", "--port", "8080"]))  # doctest: +SKIP
>>> report.verdict  # doctest: +SKIP
'ok'
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from firstlight.preflight.base import FAIL, OK, STATUSES, WARN, Check, PreflightReport
from firstlight.preflight.checkpoint import Scan, check_checkpoint, scan_checkpoint
from firstlight.preflight.environment import check_pip
from firstlight.preflight.gpus import check_gpus, read_gpus
from firstlight.preflight.interpreter import InterpreterInfo, probe_interpreter
from firstlight.preflight.port import check_port
from firstlight.preflight.quantization import check_quantization
from firstlight.preflight.resources import check_resources
from firstlight.preflight.stale import check_stale
from firstlight.preflight.target import Target, read_target
from firstlight.redact import Redactor

T = TypeVar("T")


@dataclass(frozen=True)
class PreflightOptions:
    disk_sample: bool = True  # the bounded read-rate sample (off: --no-disk-sample)
    nvml: Any | None = None  # an NVML module or snapshot; None: the GPU sampler's own choice


def run_preflight(target: Target, options: PreflightOptions | None = None,
                  redactor: Redactor | None = None) -> PreflightReport:
    """Every check, in a stable order: checkpoint, quantization, pip, gpus, port, stale_server, memory_disk."""
    opts = options or PreflightOptions()
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="preflight") as pool:
        def later(fn: Callable[..., T], *args: Any) -> Future[T]:
            return pool.submit(fn, *args)

        info: Future[InterpreterInfo] | None = None
        if target.interpreter is not None:  # one subprocess: library versions and pip, from metadata only
            info = later(probe_interpreter, target.interpreter, target.env)
        gpus = later(read_gpus, opts.nvml)
        scan: Future[Scan] | None = later(scan_checkpoint, target.model_path) if target.model_path else None
        stale = later(check_stale, target, redactor)
        port = check_port(target, redactor)
        scanned = scan.result() if scan else None
        reading = gpus.result()
        interp = info.result() if info else None
        checks = [
            check_checkpoint(target, scanned),
            check_quantization(target, interp),
            check_pip(target, interp),
            check_gpus(target, reading, redactor),
            port,
            stale.result(),
            check_resources(target, scanned, reading, opts.disk_sample),
        ]
    return PreflightReport(checks, time.monotonic() - t0)


__all__ = ["FAIL", "OK", "STATUSES", "WARN", "Check", "PreflightOptions", "PreflightReport", "Target",
           "read_target", "run_preflight"]
