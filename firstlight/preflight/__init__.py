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


def _guarded(name: str, category: str, fn: Callable[[], Check]) -> Check:
    """A check that could not run (a file it may not read, a /proc entry that vanished) is a warning with the
    reason, not a crash of the start it was meant to protect."""
    try:
        return fn()
    except Exception as e:  # the check itself failed: report it, never raise it
        return Check(name, WARN, category, f"could not check: {type(e).__name__}: {e}", "run it again; if it "
                     "persists, check with --no-preflight and report it")


def _result(future: Future[T] | None) -> T | None:
    """A background step's result, or None when there is none or it failed (its check then says so)."""
    if future is None:
        return None
    try:
        return future.result()
    except Exception:
        return None


def run_preflight(target: Target, options: PreflightOptions | None = None,
                  redactor: Redactor | None = None) -> PreflightReport:
    """Every check, in a stable order: checkpoint, quantization, pip, gpus, port, stale_server, memory_disk."""
    opts = options or PreflightOptions()
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="preflight") as pool:
        later = pool.submit
        info: Future[InterpreterInfo] | None = None
        if target.interpreter is not None:  # one subprocess: library versions and pip, from metadata only
            info = later(probe_interpreter, target.interpreter, target.env)
        gpus = later(read_gpus, opts.nvml)
        scan: Future[Scan] | None = later(scan_checkpoint, target.model_path) if target.model_path else None
        stale = later(check_stale, target, redactor)
        reading = _result(gpus) or "NVML could not be read"
        interp = _result(info)
        checks = [
            _guarded("checkpoint", "corrupt_weights",
                     lambda: check_checkpoint(target, scan.result() if scan else None)),
            _guarded("quantization", "quantization", lambda: check_quantization(target, interp)),
            _guarded("pip", "import_error", lambda: check_pip(target, interp)),
            _guarded("gpus", "gpu_occupied", lambda: check_gpus(target, reading, redactor)),
            _guarded("port", "port_in_use", lambda: check_port(target, redactor)),
            _guarded("stale_server", "other", stale.result),
            _guarded("memory_disk", "oom", lambda: check_resources(target, _result(scan), reading,
                                                                   opts.disk_sample)),
        ]
    return PreflightReport(checks, time.monotonic() - t0)


__all__ = ["FAIL", "OK", "STATUSES", "WARN", "Check", "PreflightOptions", "PreflightReport", "Target",
           "read_target", "run_preflight"]
