"""The shapes of a run's JSON summary (``RunResult.to_dict``), as types, and its JSON Schema generated from them.

Each dict a :class:`firstlight.result.RunResult` holds has its ``TypedDict`` here, named beside the field
(``Annotated[dict[str, Any] | None, AnatomyDict | None]``): the builders of those dicts (the anatomy, the history)
keep plain dicts, and :func:`json_schema` reads the shapes. A key a
shape may lack is declared in a ``total=False`` part. What other modules measure after READY (warm-up, benchmark,
speculative decoding), the preflight report and a unit's attempts keep their own shapes: here they are JSON
objects.
"""

from __future__ import annotations

import types
import typing
from typing import Any, TypedDict, Union


class EvidenceDict(TypedDict):
    signal: str  # log | process | probe:<level> | disk | memory | cpu | gpu | watch | ...
    value: str  # what was seen, as a person would check it
    since: float | None  # epoch seconds


class PhaseDict(TypedDict):
    name: str
    start: float
    end: float | None
    source: str  # log | probe | start
    line: int | None


class FirstGeneration(TypedDict):
    latency_s: float | None
    text: str | None
    meanwhile: str | None  # what the server did while a slow first generation was in flight


class AnswerDict(TypedDict):
    text: str | None
    tokens: list[str]
    logprobs: list[float]  # empty where the engine returned none
    request: str  # the fingerprint of the request it answers (API, prompt, max tokens, model named)


class _KnownAnswerBase(TypedDict):
    mode: str  # check | record (--known-answer)
    outcome: str  # recorded | re-recorded | same | different
    answer: AnswerDict  # this start's first answer


class KnownAnswerDict(_KnownAnswerBase, total=False):  # a check's: what it was compared with
    reference_run: int | None
    why: str


class ProgressDict(TypedDict, total=False):  # empty for a run that never started a server
    weights_fraction: float | None
    weights_source: str | None
    read_bytes: int
    weights_bytes: int | None
    read_rate: float | None
    eta_weights_s: float | None
    eta_total_s: float | None
    cpu_cores: float | None
    cpu_seconds: float
    rss_bytes: int
    procs: int
    gpu_memory_bytes: int | None
    gpu_util: float | None
    since_last_log_s: float | None
    shard: tuple[int, ...] | None  # (done, total)
    progress_line: str | None
    download_bytes: int | None  # the hub model's bytes arrived since the watch began (firstlight.samplers.hub)
    download_rate: float | None  # bytes per second over the last window
    download_fraction: float | None  # from the engine's download bar
    download_file: str | None  # the hub-cache file still arriving
    phase_budget: dict[str, Any] | None  # the current phase against its learned budget (firstlight.budgets)


class StartTypeDict(TypedDict):
    type: str | None  # labels joined by "+", e.g. warm_page_cache+compile_cache_hit
    labels: list[str]
    evidence: dict[str, list[EvidenceDict]]


class CompileInfo(TypedDict):
    cache: str | None  # hit | miss
    engine_seconds: float | None
    lines: list[str]
    compiler_runs: int
    compiler_cpu_s: float


class _AnatomyPhaseBase(TypedDict):
    name: str
    start: float
    seconds: float
    bound: str
    cpu_cores: float | None
    thread_top: float | None
    thread_runnable: float | None
    evidence: list[EvidenceDict]


class PhaseQuiet(TypedDict):
    silence_s: float  # the longest stretch without strong progress in the phase
    still_s: float  # the longest stretch with nothing moving at all
    signals: dict[str, float]  # per signal that moved in it (log, disk, memory, gpu, process, probe, cpu, gpu_util)
    moved: list[str]


class AnatomyPhase(_AnatomyPhaseBase, total=False):
    read_bytes: int  # the weights phase
    read_rate: float | None
    compile: CompileInfo  # the compile phase
    quiet: PhaseQuiet  # its silences (firstlight.budgets.QuietTracker); only with a process tree to watch


class IdleStretch(TypedDict):
    phase: str
    start: float
    seconds: float


class CacheState(TypedDict):
    page_cache_resident: float | None
    weights_bytes: int | None
    fstype: str | None
    compile_cache: str | None
    compile_key: dict[str, str] | None  # the compile cache's key as the engine says it: key, env, cfg, comp, code
    device_rate: float | None
    weights_read_rate: float | None


# "from" is a keyword: the functional form
Cut = TypedDict("Cut", {"cut": str, "saving_s": float | None, "how": str, "from": str})


class PhaseDelta(TypedDict):
    phase: str
    delta_s: float
    seconds: float
    baseline_s: float
    why: str


class VsBaseline(TypedDict):
    run: int | None
    delta_s: float
    phases: list[PhaseDelta]
    message: str


class _AnatomyBase(TypedDict):
    total_s: float
    reached: str | None
    measured: bool
    phases: list[AnatomyPhase]
    idle: list[IdleStretch]
    idle_s: float
    first_generation_s: float | None
    cache: CacheState
    cuts: list[Cut]


class AnatomyDict(_AnatomyBase, total=False):
    start_type: StartTypeDict
    vs_baseline: VsBaseline


class ClockRow(TypedDict):
    stage: str
    source: str
    phase: str | None
    engine_s: float
    firstlight_s: float | None
    differs: bool
    note: str | None
    at: float
    text: str | None


class EngineClockDict(TypedDict):
    source: str
    phases: list[ClockRow]
    findings: list[str]


class EtaDict(TypedDict):
    seconds: float
    runs: int
    start_type: str | None
    from_types: dict[str, int]
    note: str


class ForecastError(TypedDict):
    forecast_s: float
    actual_s: float
    error_s: float  # taken - forecast
    error: float | None  # error_s / forecast_s


class ForecastGrade(TypedDict):
    total: ForecastError | None
    phases: dict[str, ForecastError]


class ForecastDict(TypedDict):
    source: str | None  # history | bytes | None
    note: str
    total_s: float | None
    phases: dict[str, float]
    fit: dict[str, Any] | None  # the preflight's fit: context, KV per token, each device's side
    fit_status: str | None  # ok | warn | fail
    graded: ForecastGrade


class BaselineDict(TypedDict):
    deployment: str
    start_type: str | None
    eta: EtaDict | None
    cold_start_s: float | None
    output_throughput: float | None
    margin: float


class RegressionDict(TypedDict):
    metric: str
    value: float
    baseline: float
    ratio: float
    margin: float
    baseline_runs: int
    pinned_run: int | None
    start_type: str | None
    baseline_version: str | None
    version: str | None
    message: str


# -- the schema ---------------------------------------------------------------------------------------------
_SCALARS: dict[Any, dict[str, Any]] = {str: {"type": "string"}, bool: {"type": "boolean"},
                                       int: {"type": "integer"}, float: {"type": "number"},
                                       type(None): {"type": "null"}, Any: {}}


def json_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of a type made of the scalars, ``X | None``, lists, tuples, ``dict[str, X]`` and
    TypedDicts (an object with exactly its keys; those of a ``total=False`` part may be absent)."""
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    if typing.get_origin(tp) is typing.Annotated:  # a field held as a plain dict, with its shape beside it
        return json_schema(tp.__metadata__[0])
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        return {"type": "object", "properties": {k: json_schema(v) for k, v in hints.items()},
                "required": sorted(tp.__required_keys__), "additionalProperties": False}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return {"anyOf": [json_schema(a) for a in args]}
    if origin in (list, tuple):
        item = args[0] if args else Any
        return {"type": "array", "items": json_schema(item)}
    if origin is dict or tp is dict:
        return {"type": "object", "additionalProperties": json_schema(args[1]) if args else {}}
    raise TypeError(f"no JSON Schema for {tp!r}")


__all__ = [
    "AnatomyDict",
    "AnatomyPhase",
    "BaselineDict",
    "CacheState",
    "ClockRow",
    "CompileInfo",
    "Cut",
    "EngineClockDict",
    "EtaDict",
    "EvidenceDict",
    "FirstGeneration",
    "ForecastDict",
    "ForecastError",
    "ForecastGrade",
    "IdleStretch",
    "PhaseDelta",
    "PhaseDict",
    "ProgressDict",
    "RegressionDict",
    "StartTypeDict",
    "VsBaseline",
    "json_schema",
]
