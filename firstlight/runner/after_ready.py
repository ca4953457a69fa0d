"""What happens once READY holds, before firstlight hands over: warm-up, benchmark and speculative decoding,
then the comparison with this deployment's history (the ETA of the next start comes from it too).

It measures and records; the session decides what to do with the result.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

from firstlight.anatomy import compare
from firstlight.bench.client import BenchConfig, BenchError, run_warmup
from firstlight.bench.spec import bench_with_spec
from firstlight.config import Config
from firstlight.engines import ServerCommand, read_command
from firstlight.engines.profile import EngineProfile
from firstlight.history.errors import Unreachable
from firstlight.history.pg import Budget
from firstlight.history.policy import compile_key_change
from firstlight.history.store import DeploymentKey, History, HistoryError
from firstlight.redact import Redactor
from firstlight.result import RunResult
from firstlight.timeline import EngineClock
from firstlight.wire.client import Wire
from firstlight.wire.errors import WireError

CLOCK_READ_TIMEOUT_S = 3.0  # each of the engine's startup endpoints, once, after READY


def deployment_key(cfg: Config, profile: EngineProfile, command: list[str], redactor: Redactor,
                   server: ServerCommand | None = None) -> DeploymentKey:
    """This deployment in the history. ``server``: ``command`` as the run's plan read it by ``profile``'s flags
    (``Plan.server_as``), so the key parses nothing; else it is read here."""
    if server is None and command:
        server = read_command(command, engine=profile.name)
    named = server.model if server is not None else None
    model = str(cfg.model_path) if cfg.model_path else named or cfg.probe.model
    return DeploymentKey.create(profile.name, model, command or None, visible_gpu_count(), redactor, server=server)


def visible_gpu_count() -> int | None:
    """GPUs this deployment can see: CUDA_VISIBLE_DEVICES when set, else NVML's count, else unknown."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    from firstlight.samplers import nvml

    return nvml.device_count()


HISTORY_BUSY_S = 1.0  # the longest a run waits on another process's lock of the history, each time


def open_history(cfg: Config, redactor: Redactor, warn: Callable[[str], None]) -> History | None:
    if not cfg.history.enabled:
        return None
    try:
        # Opened before the launch: another process's lock (EXCLUSIVE locking mode, a long write) is waited for
        # a second at most, then the run goes on unrecorded (it waited out 30 s, and the cold start read 30 s).
        # A shared database has the start's budget: everything the start asks of it, before and after the
        # watch, takes START_BOUND_S at most in all.
        h = History(cfg.history.path, redactor=redactor, warn=warn, busy_timeout=HISTORY_BUSY_S, budget=Budget())
        if h.unreached is not None:  # a shared database that did not answer: the run goes on, its record spooled
            warn(f"{h.unreached}; this run's record will wait in the local spool")
        else:  # this start writes a run: the runs the node's spool holds go first (older, so stored before it)
            h.send_spooled()
        return h
    except HistoryError as e:
        warn(f"history unavailable, not recorded: {e}")
        return None


def post_ready_checks(cfg: Config, profile: EngineProfile, model: str | None,
                      say: Callable[[str], None], server: ServerCommand | None = None) -> dict[str, Any]:
    """Warm-up and benchmark against the serving server: the summary's ``warmup``, ``bench`` and
    ``spec_decoding`` fields. ``server``: the command as the run's plan read it (else its argv is read)."""
    out: dict[str, Any] = {}
    a, p = cfg.after, cfg.probe
    if not (a.warmup or a.bench):
        return out

    def bench_config(**kw: Any) -> BenchConfig:
        return BenchConfig(url=p.url, api=p.api, model=model, api_key=p.api_key,
                           request_timeout=p.generation_timeout, connect_timeout=max(p.connect_timeout, 1.0), **kw)

    try:
        if a.warmup:
            w = run_warmup(bench_config(prompt_len=16, output_len=p.max_tokens, num_requests=a.warmup), a.warmup)
            out["warmup"] = w.to_dict()
            if w.first_s is not None and w.steady_s:
                settled = "never settled" if w.steady_index is None else f"steady from request {w.steady_index + 1}"
                say(f"warm-up: first request {w.first_s:.2f}s, steady state {w.steady_s:.2f}s "
                    f"({w.first_s / w.steady_s:.1f}x), {settled}, {w.errors} errors")
        if a.bench:
            bc = bench_config(prompt_len=a.bench_prompt_len, output_len=a.bench_output_len,
                              concurrency=a.bench_concurrency, num_requests=a.bench_requests,
                              duration_s=a.bench_duration, ignore_eos=True)
            result, spec = bench_with_spec(bc, profile, server or cfg.command or cfg.watched_command)
            out["bench"], out["spec_decoding"] = result.to_dict(), spec
            say(f"bench: {result.completed}/{result.sent} ok, {result.errors} errors, {result.timeouts} timeouts; "
                f"{result.output_throughput:.1f} output tok/s; TTFT median {result.ttft_ms.median or 0:.0f} ms, "
                f"TPOT median {result.tpot_ms.median or 0:.1f} ms")
            say(f"speculative decoding: {spec.get('status')}: {spec.get('message', '')}")
    except (BenchError, ValueError) as e:
        out["post_ready_error"] = str(e)
        say(f"after READY: {e}")
    return out


def engine_clock_endpoints(cfg: Config, profile: EngineProfile, clock: Callable[[], float]) -> list[EngineClock]:
    """The engine's own startup breakdown from its profile's ``clock_endpoints``: one request each with a deadline,
    the first that answers with figures wins; nothing when none does."""
    if not profile.clock_endpoints:
        return []
    with Wire(cfg.probe.url, api_key=cfg.probe.api_key, connect_timeout=1.0) as wire:
        for path, read in profile.clock_endpoints:
            try:
                answer = wire.get(path, read_timeout=CLOCK_READ_TIMEOUT_S)
            except WireError:
                continue
            if answer.status != 200 or answer.truncated:
                continue
            figures = read(answer.body.decode("utf-8", "replace"), clock())
            if figures:
                return list(figures)
    return []


def anatomy_baseline(history: History, key: DeploymentKey, result: RunResult) -> dict[str, Any] | None:
    """This start's anatomy against the baseline run's: the pinned run, else the newest good one."""
    if not result.anatomy:
        return None
    runs = [r for r in history.runs(key, limit=50) if r.ok and r.kind in ("up", "watch")]
    for run in sorted(runs, key=lambda r: not r.pinned):
        base = history.get(run.id)
        if base is not None and base.summary.get("anatomy"):
            return compare(result.anatomy, base.summary["anatomy"], run.id)
    return None


def compare_with_history(history: History, key: DeploymentKey, kind: str, result: RunResult,
                         margin: float) -> RunResult:
    """The result with this deployment's baseline and regressions, then the run recorded in the history (or kept
    in the spool: recorded again after a failure, it is kept once, under the same unique id)."""
    bench = result.bench
    throughput = bench.get("output_throughput") if isinstance(bench, dict) else None
    start_type = (result.start_type or {}).get("type")
    uid = uuid.uuid4().hex
    if history.unreached is not None:  # the shared database did not answer: no comparison, the run is spooled
        try:
            history.record_run(kind, result.to_dict(), key, bench=bench, uid=uid)
        except Unreachable as e:  # kept in the spool
            return result.with_history(None, None, None, note=f"history: {e}", uid=uid)
        except HistoryError as e:
            return result.with_history(None, None, None, note=f"history: {e}")
        return result.with_history(None, None, None, uid=uid)
    try:
        regressions = history.check_regression(key, cold_start_s=result.cold_start_s,
                                               output_throughput=throughput, margin=margin, start_type=start_type,
                                               version=result.engine_version)
        eta = history.expected_start(key, start_type)
        baseline = {
            "deployment": key.hash,
            "start_type": start_type,
            "eta": eta.to_dict() if eta else None,  # what the next start of this type will be told
            "cold_start_s": history.baseline(key, "cold_start_s", start_type=start_type),
            "output_throughput": history.baseline(key, "output_throughput"),
            "margin": margin,
        }
        changed = compile_key_change((result.anatomy or {}).get("cache"), history.start_anatomies(key))
        result = result.with_history(baseline, [r.to_dict() for r in regressions] or None, None, note=changed)
        result = result.with_anatomy_baseline(anatomy_baseline(history, key, result))
        run_id = history.record_run(kind, result.to_dict(), key, bench=bench, uid=uid)
        return result.with_history(baseline, list(result.regression) if result.regression else None, run_id,
                                   uid=uid)
    except Unreachable as e:  # lost during the comparison: the record waits in the spool
        note = f"history: {e}"
        try:
            history.record_run(kind, result.to_dict(), key, bench=bench, uid=uid)
        except Unreachable as again:
            note = f"history: {again}"
        except HistoryError as again:
            return result.with_history(None, None, None, note=f"history: {again}")
        return result.with_history(None, None, None, note=note, uid=uid)
    except HistoryError as e:
        return result.with_history(None, None, None, note=f"history: {e}")
