"""The engines' own publications of their start timing, read as data into :class:`EngineClock` observations.

Each engine's names for its stages and the firstlight phases they cover are tables here; the readers are pure
(a dict or text in, observations out) and never raise on a malformed answer: what is not the documented shape
is skipped. Log lines are read elsewhere (the profiles' ``engine_clock`` markers, through the one interpreter);
which endpoint an engine publishes its figures at, and which reader reads them, is its profile's ``clock_endpoints``.
TensorRT-LLM's ``startup_metrics`` is an attribute of its Python ``LLM`` object: trtllm-serve publishes no endpoint
for it that its documentation names, so only ``trtllm_startup_metrics`` reads it.

- llama.cpp router (``llama-server --models-dir DIR``), ``GET /models/sse`` (b11434, tools/server): data lines
  ``{"model": M, "event": "model_status"|"status_change", "data": {"status": "loading"|"loaded"|...,
  "progress": {"stages": [...], "current": STAGE, "value": 0..1}}}``. A stage begins with its first progress
  event and ends at its ``value`` 1.0 (or when the next stage or ``loaded`` comes); the whole load begins at the
  first ``loading`` and ends at ``loaded``. The stream carries no times: each mark is timed as it arrives.
- SGLang (sgl-project/sglang#33375; python/sglang/srt/observability/startup_time.py): ``startup_time`` =
  ``{"load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e", "cuda_graph": {mode: s}}`` plus
  the phase registry's flat entries, the critical path (max) across ranks; in ``/server_info`` and as the gauges
  ``sglang:startup_time_seconds{phase}`` and ``sglang:startup_cuda_graph_time_seconds{phase}``.
- TensorRT-LLM (NVIDIA/TensorRT-LLM#15993, #18060): ``LLM.startup_metrics`` =
  ``{"model_loader": {"total_model_loading_seconds", "checkpoint_preparation_seconds",
  "weight_population_seconds", "post_load_processing_seconds"}, ..., "cuda_graph_warmup_seconds"}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from firstlight.bounded import number
from firstlight.timeline import EngineClock

__all__ = ["LLAMA_STAGES", "SGLANG_STAGES", "TRTLLM_STAGES", "ModelsStream", "sglang_metrics", "sglang_server_info",
           "sglang_startup_time", "trtllm_startup_metrics"]

WHOLE = ("*",)  # the whole start up to the figure's end (firstlight.anatomy.WHOLE)

# llama.cpp's load stages (progress.stages) -> firstlight's phases; "load" is the whole model load of the router
LLAMA_STAGES: dict[str, tuple[str, ...]] = {
    "text_model": ("weights_loading",),
    "load": WHOLE,
}
# SGLang's startup_time keys -> firstlight's phases (unknown registry entries are shown, not compared)
SGLANG_STAGES: dict[str, tuple[str, ...]] = {
    "load_weight": ("weights_loading",),
    "kv_cache_allocation": ("kv_cache",),
    "cuda_graph": ("cuda_graph",),  # the sum of its modes (prefill, decode, target_verify, draft_*): captured in turn
    "scheduler_e2e": ("distributed_init", "weights_loading", "weights_loaded", "compile", "kv_cache", "cuda_graph"),
    "tokenizer_e2e": WHOLE,
    "e2e": WHOLE,
}
# TensorRT-LLM's startup_metrics keys -> firstlight's phases
TRTLLM_STAGES: dict[str, tuple[str, ...]] = {
    "total_model_loading_seconds": ("weights_loading",),
    "checkpoint_preparation_seconds": (),
    "weight_population_seconds": (),
    "post_load_processing_seconds": (),
    "cuda_graph_warmup_seconds": ("cuda_graph",),
}
MAX_FIGURES = 32


MAX_SECONDS = 30 * 86400.0  # a figure beyond a month is not a start's


def _seconds(v: Any) -> float | None:
    return number(v, 0.0, MAX_SECONDS)  # a 400-digit integer or "²" in an answer: no figure, never a raise


def _clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def sglang_startup_time(info: Any, t: float, source: str = "server_info") -> list[EngineClock]:
    """SGLang's startup breakdown from a ``/server_info`` answer (its ``startup_time``, top level or in the first
    of ``internal_states``) or the ``startup_time`` dict itself."""
    st: Any = None
    if isinstance(info, dict):
        st = info.get("startup_time")
        states = info.get("internal_states")
        if not isinstance(st, dict) and isinstance(states, list) and states and isinstance(states[0], dict):
            st = states[0].get("startup_time")
        if st is None and "load_weight" in info:
            st = info
    if not isinstance(st, dict):
        return []
    out: list[EngineClock] = []
    for key, value in list(st.items())[:MAX_FIGURES]:
        if key == "cuda_graph" and isinstance(value, dict):
            modes = {str(k): s for k, v in value.items() if (s := _seconds(v)) is not None}
            if modes:
                text = ", ".join(f"{k} {v:g}s" for k, v in modes.items())
                out.append(EngineClock(t, source, "cuda_graph", SGLANG_STAGES["cuda_graph"],
                                       round(sum(modes.values()), 3), text=_clip(f"cuda_graph: {text}")))
            continue
        s = _seconds(value)
        if s is not None:
            out.append(EngineClock(t, source, str(key)[:64], SGLANG_STAGES.get(str(key), ()), s,
                                   text=_clip(f"{key}: {value}")))
    return out


def sglang_server_info(body: str, t: float) -> list[EngineClock]:
    """SGLang's startup breakdown from the text of a ``/server_info`` answer (its profile's clock endpoint)."""
    try:
        return sglang_startup_time(json.loads(body), t)
    except (ValueError, RecursionError):
        return []


def sglang_metrics(text: str, t: float) -> list[EngineClock]:
    """The same breakdown from SGLang's Prometheus gauges (the critical path: the max over label sets)."""
    from prometheus_client.parser import text_string_to_metric_families

    phases: dict[str, float] = {}
    graphs: dict[str, float] = {}
    try:
        for fam in text_string_to_metric_families(text):
            if fam.name not in ("sglang:startup_time_seconds", "sglang:startup_cuda_graph_time_seconds"):
                continue
            into = phases if fam.name == "sglang:startup_time_seconds" else graphs
            for sample in fam.samples:
                phase = sample.labels.get("phase")
                s = _seconds(sample.value)
                if phase and s is not None:
                    into[phase] = max(into.get(phase, 0.0), s)
    except (ValueError, TypeError, IndexError):
        return []
    if not phases and not graphs:
        return []
    return sglang_startup_time({"startup_time": {**phases, "cuda_graph": graphs}}, t, source="metrics")


def trtllm_startup_metrics(metrics: Any, t: float) -> list[EngineClock]:
    """TensorRT-LLM's ``startup_metrics`` (nested dicts of ``*_seconds``), flattened to its leaf names."""
    out: list[EngineClock] = []

    def walk(d: Any, depth: int) -> Iterator[tuple[str, Any]]:
        if not isinstance(d, dict) or depth > 3:
            return
        for k, v in d.items():
            if isinstance(v, dict):
                yield from walk(v, depth + 1)
            elif str(k).endswith("_seconds"):
                yield str(k), v

    for key, value in walk(metrics, 0):
        s = _seconds(value)
        if s is not None and len(out) < MAX_FIGURES:
            out.append(EngineClock(t, "startup_metrics", key.removesuffix("_seconds")[:64],
                                   TRTLLM_STAGES.get(key, ()), s, text=_clip(f"{key}: {value}")))
    return out


class ModelsStream:
    """llama.cpp's ``/models/sse`` events for one model, turned into begin/end marks of its stages as they come.
    Feed it each event's ``data:`` payload (a JSON text) with the time it arrived."""

    def __init__(self, model: str | None = None) -> None:
        self.model = model  # None: the first model the stream names
        self._stage: str | None = None
        self._ended: set[str] = set()  # a stage at 1.0 repeats its last event: it does not begin again
        self._loading = False
        self.loaded = False
        self.failed: str | None = None

    def feed(self, payload: str, t: float) -> list[EngineClock]:
        try:
            ev = json.loads(payload)
        except ValueError:
            return []
        if not isinstance(ev, dict) or not isinstance(ev.get("data"), dict):
            return []
        model = ev.get("model")
        if self.model is None and isinstance(model, str):
            self.model = model
        if model != self.model or self.loaded:
            return []
        data = ev["data"]
        status = data.get("status")
        text = _clip(payload)
        out: list[EngineClock] = []
        if status == "loading" and not self._loading:
            self._loading = True
            out.append(self._mark(t, "load", "begin", text))
        progress = data.get("progress")
        if status == "loading" and isinstance(progress, dict) and isinstance(progress.get("current"), str):
            current = progress["current"][:64]
            if current != self._stage and current not in self._ended:
                out += self._end_stage(t, text)
                self._stage = current
                out.append(self._mark(t, current, "begin", text))
            value = _seconds(progress.get("value"))
            if value is not None and value >= 1.0:
                out += self._end_stage(t, text)
        elif status == "loaded":
            out += self._end_stage(t, text)
            self.loaded = True
            if self._loading:
                out.append(self._mark(t, "load", "end", text))
        elif status in ("unloaded", "failed", "error") and self._loading:
            self.failed = str(data.get("status"))
        return out

    def _end_stage(self, t: float, text: str) -> list[EngineClock]:
        if self._stage is None:
            return []
        stage, self._stage = self._stage, None
        self._ended.add(stage)
        return [self._mark(t, stage, "end", text)]

    def _mark(self, t: float, stage: str, mark: str, text: str) -> EngineClock:
        return EngineClock(t, "models_sse", stage, LLAMA_STAGES.get(stage, ()), None, mark=mark, text=text)
