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

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from firstlight.preflight.base import FAIL, OK, STATUSES, WARN, Check, PreflightReport
from firstlight.preflight.checkpoint import Scan, check_checkpoint, scan_into
from firstlight.preflight.environment import check_pip
from firstlight.preflight.fit import check_fit
from firstlight.preflight.gpus import check_gpus, read_gpus
from firstlight.preflight.interpreter import InterpreterInfo, probe_interpreter
from firstlight.preflight.port import check_port
from firstlight.preflight.quantization import check_quantization
from firstlight.preflight.resources import check_resources
from firstlight.preflight.stale import check_stale
from firstlight.preflight.target import Target, read_target
from firstlight.redact import Redactor
from firstlight.timeline import GpuSample

T = TypeVar("T")
DEADLINE_S = 30.0  # the whole preflight; a check unfinished by then is a warning naming what it was reading


@dataclass(frozen=True)
class PreflightOptions:
    disk_sample: bool = True  # the bounded read-rate sample (off: --no-disk-sample)
    nvml: Any | None = None  # an NVML module or snapshot; None: the GPU sampler's own choice
    deadline_s: float = DEADLINE_S


def _guarded(name: str, category: str, fn: Callable[[], Check]) -> Check:
    """A check that could not run (a file it may not read, a /proc entry that vanished) is a warning with the
    reason, not a crash of the start it was meant to protect."""
    try:
        return fn()
    except Exception as e:  # the check itself failed: report it, never raise it
        return Check(name, WARN, category, f"could not check: {type(e).__name__}: {e}", "run it again; if it "
                     "persists, check with --no-preflight and report it")


def _background(fn: Callable[[], T]) -> Future[T]:
    """``fn`` on a daemon thread: one stuck in ``open()`` on a hung mount is never joined, so neither the
    deadline, nor SIGTERM or Ctrl-C, nor the interpreter's exit waits for it (a ThreadPoolExecutor joins its
    workers at exit)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(fn())
        except BaseException as e:  # handed to whoever waits
            future.set_exception(e)

    threading.Thread(target=run, name="preflight", daemon=True).start()
    return future


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
    """Every check, in a stable order: checkpoint, quantization, pip, gpus, port, stale_server, memory_disk, fit.
    All run at once on daemon threads; what is unfinished at the deadline is ``warn: timed out``."""
    opts = options or PreflightOptions()
    t0 = time.monotonic()
    info: Future[InterpreterInfo] | None = None
    if target.interpreter is not None:  # one subprocess: library versions and pip, from metadata only
        interpreter = target.interpreter
        info = _background(lambda: probe_interpreter(interpreter, target.env))
    gpus = _background(lambda: read_gpus(opts.nvml))
    progress = Scan(target.model_path) if target.model_path else None
    scan: Future[Scan] | None = _background(lambda: scan_into(progress)) if progress else None

    def reading() -> GpuSample | str:
        return _result(gpus) or "NVML could not be read"

    def reads_scan() -> str:
        now = progress.current if progress else None
        return f"reading {now}" if now else "reading the checkpoint"

    reads_interp = f"running {target.interpreter}" if target.interpreter else "waiting"
    plan: list[tuple[str, str, Callable[[], Check], Callable[[], str]]] = [
        ("checkpoint", "corrupt_weights", lambda: check_checkpoint(target, scan.result() if scan else None),
         reads_scan),
        ("quantization", "quantization", lambda: check_quantization(target, _result(info)), lambda: reads_interp),
        ("pip", "import_error", lambda: check_pip(target, _result(info)), lambda: reads_interp),
        ("gpus", "gpu_occupied", lambda: check_gpus(target, reading(), redactor), lambda: "reading NVML"),
        ("port", "port_in_use", lambda: check_port(target, redactor), lambda: f"probing port {target.port}"),
        ("stale_server", "other", lambda: check_stale(target, redactor), lambda: "reading the processes"),
        ("memory_disk", "oom", lambda: check_resources(target, _result(scan), reading(), opts.disk_sample),
         reads_scan),
        ("fit", "kv_cache", lambda: check_fit(target, _result(scan), reading()), reads_scan),
    ]
    running = [(name, category, _background(partial(_guarded, name, category, fn)), what)
               for name, category, fn, what in plan]
    deadline = t0 + opts.deadline_s
    checks = []
    for name, category, future, what in running:
        try:
            checks.append(_result_by(future, deadline))
        except TimeoutError:
            checks.append(Check(name, WARN, category, f"timed out after {opts.deadline_s:g}s {what()} (not "
                                "checked)", "a hung mount or device? check the path named; the start goes on"))
    return PreflightReport(checks, time.monotonic() - t0)


def _result_by(future: Future[Check], deadline: float) -> Check:
    """The future's result by ``deadline`` (monotonic), waited for in short slices: a stop signal may be delivered
    to a worker thread, and then a long lock wait of the main thread is not interrupted; Python runs the signal's
    handler only when the main thread next runs bytecode (a SIGINT went unheard for the whole 30 s deadline)."""
    while True:
        left = deadline - time.monotonic()
        try:
            return future.result(timeout=min(max(left, 0.0), 0.1))
        except TimeoutError:
            if left <= 0.1:
                raise


__all__ = ["DEADLINE_S", "FAIL", "OK", "STATUSES", "WARN", "Check", "PreflightOptions", "PreflightReport", "Target",
           "read_target", "run_preflight"]
