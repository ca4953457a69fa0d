"""Speculative-decoding acceptance over a benchmark window, read where each engine exposes it.

A drafter that proposes tokens nobody accepts costs time and says nothing: the server is up, generations are
correct, only slower. So we read the engine's own counters before and after the benchmark and say plainly
when speculative decoding is configured but accepts nothing. Where to look comes from
``EngineProfile.spec_decoding`` (sources ``server_info``, ``prometheus``, ``perf_metrics``, ``response_timings``):

* vLLM: Prometheus counters; window mean acceptance length = 1 + Δaccepted / Δdrafts (vLLM's own formula),
  acceptance rate = Δaccepted / Δdraft_tokens.
* SGLang: ``/server_info`` ``internal_states[].avg_spec_accept_length`` (mean over DP ranks) or the
  ``sglang:spec_accept_length`` gauge, read after the window (a recent average kept by the engine; it includes
  the bonus token, so 1.0 means nothing accepted).
* llama.cpp: per-response ``timings.draft_n`` / ``draft_n_accepted`` summed over the benchmark's responses;
  every verify step yields exactly one non-drafted token, so mean acceptance length = tokens / (tokens - accepted).
  A response carries ``draft_n`` only when something was drafted (b11434), so whether speculative decoding is
  configured comes from the server's own ``/slots`` (each slot's ``speculative``: it has a drafter) or from
  the command line (``--spec-type``), never from the responses alone: an n-gram drafter that finds no n-gram
  drafts nothing, and that is ``no_data``, not "off". (``/props`` is no help: its ``speculative.types`` is
  the default request parameters', "none" whatever the server runs.)
* TensorRT-LLM: ``/perf_metrics`` entries' ``speculative_decoding`` totals (the endpoint hands out recent
  requests; read it before the window to drain older ones).

"Configured" can also come from the server's command line (:func:`configured_from_command`): vLLM's
``--speculative-config``, llama.cpp's ``--spec-type``; what the server says wins over what the command implies.

Statuses: ``ok``; ``zero_acceptance`` (configured, nothing accepted); ``not_configured`` (the engine says it is
off); ``not_exposed`` (the engine, or this server's flags, do not tell); ``no_data`` (configured, but no draft
step happened in the window, e.g. every request failed).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from firstlight.bench.client import BenchConfig, http_get, run_bench, with_model
from firstlight.bench.metrics import BenchResult
from firstlight.engines import ServerCommand, read_command
from firstlight.engines.profile import EngineProfile
from firstlight.wire import WireError, parse_json
from firstlight.wire.content import parse_prometheus

_EPS = 1e-6


@dataclass
class SpecSnapshot:
    """Spec-decoding figures read from a server at one moment. ``values`` maps metric names (as in the
    profile) to numbers; ``configured`` is True/False when the engine tells, None when it does not."""

    engine: str | None
    sources: tuple[str, ...]
    values: dict[str, float] = field(default_factory=dict)
    configured: bool | None = None
    exposed: bool = False  # a place the profile points to could be read
    taken_at: float = 0.0
    notes: list[str] = field(default_factory=list)
    method: str | None = None  # the drafting method, from the command line

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "sources": list(self.sources), "values": self.values,
                "configured": self.configured, "exposed": self.exposed, "taken_at": self.taken_at,
                "notes": self.notes, "method": self.method}


def configured_from_command(engine: str | None, command: Sequence[str] | ServerCommand
                            ) -> tuple[bool | None, str | None]:
    """Whether the server's own command line turns speculative decoding on, and the method it names.
    ``(None, None)`` when the command does not tell (no command, another engine, or only a draft model).
    ``command``: the argv, or the command as the run already read it."""
    if isinstance(command, ServerCommand):
        cmd = command
    elif not command:
        return None, None
    else:
        cmd = read_command(command, engine=engine)
    if engine == "vllm":
        raw = cmd.value( "--speculative-config", "--speculative_config", "-sc")
        if raw is None:
            return False, None  # vLLM 0.32 has no other way to turn it on
        try:
            conf = parse_json(raw)
        except ValueError:
            return True, None
        method = conf.get("method") if isinstance(conf, dict) else None
        return True, str(method) if method else None
    if engine == "llamacpp":
        types = cmd.value("--spec-type")
        if types is None:
            return None, None  # b11434 may infer a type from the draft GGUF's metadata: ask /slots
        names = [t for t in types.split(",") if t and t != "none"]
        return bool(names), ",".join(names) or None
    return None, None


def _json_path(data: Any, path: str) -> list[Any]:
    """Values at ``a.b[].c`` (``[]`` walks every list item); missing keys give nothing."""
    nodes = [data]
    for part in path.split("."):
        each = part.endswith("[]")
        key = part[:-2] if each else part
        nxt = []
        for n in nodes:
            if isinstance(n, dict) and key in n:
                v = n[key]
                if each:
                    nxt.extend(v if isinstance(v, list) else [])
                else:
                    nxt.append(v)
        nodes = nxt
    return nodes


def _numbers(values: list[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]


def read_spec_decoding(url: str, profile: EngineProfile | None, *, api_key: str | None = None,
                       connect_timeout: float = 2.0, read_timeout: float = 5.0,
                       transport: httpx.BaseTransport | None = None) -> SpecSnapshot:
    """Read the acceptance figures the engine exposes outside responses (never raises on HTTP trouble: what
    cannot be read is noted and left out). ``response_timings`` sources are filled from the benchmark;
    ``slots`` (llama.cpp) says whether the server drafts at all."""
    metrics = profile.spec_decoding if profile else ()
    snap = SpecSnapshot(profile.name if profile else None, tuple(dict.fromkeys(m.source for m in metrics)),
                        taken_at=time.time())
    if profile is None or not metrics:
        return snap

    def get(path: str) -> tuple[int, bytes] | None:
        try:
            return http_get(url, path, api_key=api_key, connect_timeout=connect_timeout, read_timeout=read_timeout,
                            transport=transport)
        except WireError as e:
            snap.notes.append(f"GET {path}: {e}")
            return None

    def mark(configured: bool | None) -> None:
        if configured is not None and snap.configured is not True:
            snap.configured = configured

    by_source: dict[str, list[str]] = {}
    for m in metrics:
        by_source.setdefault(m.source, []).append(m.name)

    if "server_info" in by_source:
        for path in [p for p in profile.endpoints.info if "server_info" in p][:2] or ["/server_info"]:
            r = get(path)
            if r is None or r[0] != 200:
                continue
            try:
                data = parse_json(r[1])
            except ValueError:
                continue
            if not isinstance(data, dict):
                continue
            snap.exposed = True
            for name in by_source["server_info"]:
                nums = [v for v in _numbers(_json_path(data, name)) if v > 0]
                if nums:
                    snap.values[name] = sum(nums) / len(nums)
            algo = data.get("speculative_algorithm")
            if any(n in snap.values for n in by_source["server_info"]) or (algo and str(algo).upper() != "NONE"):
                mark(True)
            else:
                mark(False)
            break

    if "slots" in by_source:
        r = get("/slots")
        if r is not None and r[0] == 200:
            try:
                data = parse_json(r[1])
            except ValueError:
                data = None
            flags = [slot.get("speculative") for slot in data if isinstance(slot, dict)] \
                if isinstance(data, list) else []
            flags = [f for f in flags if isinstance(f, bool)]
            if flags:
                snap.exposed = True
                mark(any(flags))

    if "prometheus" in by_source and profile.endpoints.metrics:
        r = get(profile.endpoints.metrics)
        if r is not None and r[0] == 200:
            parsed = parse_prometheus(r[1].decode("utf-8", "replace"))
            own = any(k.startswith(f"{profile.name}:") for k in parsed)
            if own:
                snap.exposed = True
            found = False
            for name in by_source["prometheus"]:
                if name in parsed:
                    snap.values[name] = parsed[name]
                    # a gauge of 0 (no decode step yet, or registered but unused) says nothing about configuration
                    found = found or name.endswith("_total") or parsed[name] > 0
            if found:
                mark(True)
            elif own and snap.configured is None:
                mark(False)

    if "perf_metrics" in by_source:
        r = get("/perf_metrics")
        if r is not None and r[0] == 200:
            try:
                data = parse_json(r[1])
            except ValueError:
                data = None
            if isinstance(data, list):
                snap.exposed = True
                totals = {"total_accepted_draft_tokens": 0.0, "total_draft_tokens": 0.0}
                any_spec = False
                for entry in data:
                    spec = (_json_path(entry, "speculative_decoding")
                            or _json_path(entry, "perf_metrics.speculative_decoding"))
                    for s in spec:
                        if isinstance(s, dict):
                            any_spec = True
                            for k in totals:
                                totals[k] += sum(_numbers([s.get(k)]))
                if any_spec:
                    snap.values.update({f"speculative_decoding.{k}": v for k, v in totals.items()})
                    mark(True)
    return snap


def _result(status: str, message: str, engine: str | None, *, length: float | None = None,
            rate: float | None = None, source: str | None = None, window: dict[str, float] | None = None
            ) -> dict[str, Any]:
    return {"status": status, "engine": engine, "mean_acceptance_length": None if length is None else round(length, 3),
            "acceptance_rate": None if rate is None else round(rate, 4), "source": source, "window": window or {},
            "message": message}


def _zero(engine: str | None, source: str, length: float | None, window: dict[str, float] | None = None
          ) -> dict[str, Any]:
    shown = f" (mean acceptance length {length:.2f})" if length is not None else ""
    return _result("zero_acceptance",
                   f"speculative decoding is configured but accepted NO draft token in the bench window{shown}: the "
                   "drafter only costs time; check the draft model, its tokenizer/vocabulary and the --speculative-* "
                   "flags",
                   engine, length=length, rate=0.0, source=source, window=window)


def _ok(engine: str | None, source: str, length: float | None, rate: float | None,
        window: dict[str, float] | None = None) -> dict[str, Any]:
    parts = []
    if length is not None:
        parts.append(f"mean acceptance length {length:.2f}")
    if rate is not None:
        parts.append(f"acceptance rate {rate * 100:.0f}%")
    return _result("ok", ", ".join(parts) or "speculative decoding accepts tokens", engine, length=length, rate=rate,
                   source=source, window=window)


def _find(values: dict[str, float], suffix: str) -> str | None:
    return next((k for k in values if k.endswith(suffix)), None)


def spec_report(before: SpecSnapshot | None, after: SpecSnapshot, response_timings: dict[str, float] | None = None,
                output_tokens: int | None = None) -> dict[str, Any]:
    """Acceptance over the window between two snapshots (see the module docstring for the formulas).
    ``response_timings``: the benchmark's summed llama.cpp ``timings``; ``output_tokens``: its total."""
    eng = after.engine
    b = before.values if before else {}
    a = after.values

    # counters (vLLM): exact over the window
    drafts_k, tokens_k, acc_k = (_find(a, s) for s in ("num_drafts_total", "num_draft_tokens_total",
                                                        "num_accepted_tokens_total"))
    if drafts_k and acc_k:
        d = a[drafts_k] - b.get(drafts_k, 0.0)
        acc = a[acc_k] - b.get(acc_k, 0.0)
        dt = a[tokens_k] - b.get(tokens_k, 0.0) if tokens_k else None
        window = {"drafts": d, "accepted_tokens": acc, **({"draft_tokens": dt} if dt is not None else {})}
        src = f"prometheus {acc_k} / {drafts_k} (delta over the window)"
        if d <= 0:
            return _result("no_data", "speculative decoding is configured but no draft step ran in the window", eng,
                           source=src, window=window)
        if acc <= 0:
            return _zero(eng, src, 1.0, window)
        return _ok(eng, src, 1.0 + acc / d, acc / dt if dt else None, window)

    # per-response timings (llama.cpp)
    if "response_timings" in after.sources:
        t = response_timings or {}
        if "draft_n" in t:
            drafted, acc = float(t.get("draft_n", 0)), float(t.get("draft_n_accepted", 0))
            tokens = float(t.get("predicted_n") or output_tokens or 0)
            window = {"draft_tokens": drafted, "accepted_tokens": acc, "output_tokens": tokens}
            src = "responses' timings.draft_n / draft_n_accepted (summed over the window)"
            if drafted <= 0:
                return _result("no_data", "speculative decoding is configured but drafted nothing in the window", eng,
                               source=src, window=window)
            length = tokens / (tokens - acc) if tokens > acc else None
            if acc <= 0:
                return _zero(eng, src, 1.0, window)
            return _ok(eng, src, length, acc / drafted, window)
        if t and after.configured is True:
            method = f" ({after.method})" if after.method else ""
            return _result("no_data", f"speculative decoding is configured{method} but drafted nothing in the "
                           "window: no response carries draft counts (an n-gram drafter finds no n-gram to reuse "
                           "in these prompts)", eng, source="responses' timings and the server's configuration",
                           window={"draft_tokens": 0.0, "output_tokens": float(t.get("predicted_n") or 0)})
        if t and after.configured is False:
            return _result("not_configured", "the server reports no speculative decoding (speculative.types none) "
                           "and responses carry no draft counts", eng, source="the server's configuration")
        if t:
            return _result("not_configured", "responses carry timings without draft counts: speculative decoding "
                           "is off", eng, source="responses' timings")

    # perf_metrics totals (TensorRT-LLM)
    acc_pm, tot_pm = "speculative_decoding.total_accepted_draft_tokens", "speculative_decoding.total_draft_tokens"
    if tot_pm in a:
        drafted, acc = a[tot_pm], a.get(acc_pm, 0.0)
        window = {"draft_tokens": drafted, "accepted_tokens": acc}
        src = "/perf_metrics speculative_decoding totals"
        if drafted <= 0:
            return _result("no_data", "speculative decoding is configured but drafted nothing in the window", eng,
                           source=src, window=window)
        length = output_tokens / (output_tokens - acc) if output_tokens and output_tokens > acc else None
        return _zero(eng, src, 1.0, window) if acc <= 0 else _ok(eng, src, length, acc / drafted, window)

    # gauges (SGLang): the engine's recent average, read after the window
    gauge = next((k for k in a if k.endswith("avg_spec_accept_length")), None) or _find(a, "spec_accept_length")
    if gauge:
        length = a[gauge]
        rate_k = _find(a, "spec_accept_rate")
        rate = a[rate_k] if rate_k else None
        src = f"{gauge} (engine gauge after the window)"
        if length <= 1.0 + _EPS:
            return _zero(eng, src, length)
        return _ok(eng, src, length, rate)

    if after.configured is False:
        return _result("not_configured", f"{eng or 'the server'} reports no speculative decoding", eng)
    if after.configured is True:
        return _result("no_data", "speculative decoding is configured but no acceptance figure was readable", eng)
    where = "does not expose acceptance" if after.sources else "has no known acceptance metrics"
    return _result("not_exposed", f"{eng or 'unknown engine'} {where} (or this server's flags hide it"
                   f"{'; ' + '; '.join(after.notes[:2]) if after.notes else ''})", eng)


def apply_command(snap: SpecSnapshot, command: Sequence[str] | ServerCommand | None) -> SpecSnapshot:
    """Fill in "configured" from the server's command line where the server itself did not say."""
    configured, method = configured_from_command(snap.engine, command or ())
    if snap.configured is None and configured is not None:
        snap.configured = configured
        snap.notes.append("configuration read from the command line")
    if snap.method is None and method:
        snap.method = method
    return snap


def bench_with_spec(cfg: BenchConfig, profile: EngineProfile | None,
                    command: Sequence[str] | ServerCommand | None = None
                    ) -> tuple[BenchResult, dict[str, Any]]:
    """``run_bench`` bracketed by two spec-decoding snapshots: the result and :func:`spec_report`'s verdict.
    ``command``: the server's command line (``up``, ``watch --pid``), for whether it drafts at all."""
    cfg = with_model(cfg)
    before = read_spec_decoding(cfg.url, profile, api_key=cfg.api_key, connect_timeout=cfg.connect_timeout)
    result = run_bench(cfg)
    after = apply_command(read_spec_decoding(cfg.url, profile, api_key=cfg.api_key,
                                             connect_timeout=cfg.connect_timeout), command)
    return result, spec_report(before, after, result.response_timings, result.total_output_tokens)
