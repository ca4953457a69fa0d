"""A finished run as data to draw: phases, markers and time series on one seconds axis.

The HTML report, the trace-event file and the dashboard's tests all read a :class:`RunView`; none of them
looks at observations itself. The view is rebuilt by replaying the recorded observations through the judge,
so phases, levels and the verdict are what the live run said; the run's JSON summary, when there is one,
is the final word on the verdict and adds what happened after it (benchmark, regression, supervision).
Pure: observations and dicts in, a view out; no clocks, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from firstlight.assessment import Assessment, Event
from firstlight.config import JudgeConfig
from firstlight.drive import Driver
from firstlight.engines import get_profile
from firstlight.engines.profile import EngineProfile
from firstlight.judge import Judge
from firstlight.result import RunFacts, RunResult
from firstlight.timeline import EngineClock, GpuSample, LogLine, Observation, ProcessSample, Started
from firstlight.vocab import HUNG

MAX_POINTS = 600  # per series: enough for a 1000-px chart, small enough for a phone
LOG_TAIL = 40
MAX_EVENT_MARKERS = 200  # warnings and error lines drawn (a crash loop can print thousands)


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]  # (seconds since start, value)


@dataclass
class Chart:
    """One panel: series sharing a unit, drawn on the run's seconds axis."""

    key: str  # stable id: read, rss, cpu, gpu_mem, gpu_util, logs, procs
    title: str
    unit: str
    series: list[Series]
    style: str = "line"  # line | step | bars
    y_max: float | None = None  # a fixed top (percentages), else the data's maximum


@dataclass
class Span:
    name: str
    start: float  # seconds since start
    end: float
    source: str = "log"

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Marker:
    t: float  # seconds since start
    kind: str  # level | generation | engine_ready | warning | failure_line
    label: str


@dataclass
class Window:
    start: float
    end: float
    label: str  # "no progress" | "busy-wait suspected"


@dataclass
class Baseline:
    """The deployment's baseline start, drawn as ghost bars: which run, and its phases."""

    run_id: int | None
    label: str
    phases: list[Span]
    cold_start_s: float | None = None
    anatomy: dict[str, Any] | None = None


@dataclass
class RunView:
    started_at: float  # epoch seconds: 0 on the axis
    end: float  # seconds since start: the axis ends here
    verdict: str
    phase: str
    failure: str | None = None
    hint: str | None = None
    detail: str | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)  # since: seconds since start (or None)
    engine: str = "generic"
    url: str | None = None
    command: str | None = None
    cold_start_s: float | None = None
    ready_at: float | None = None  # seconds since start
    first_generation: dict[str, Any] | None = None
    phases: list[Span] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    log_tail: list[tuple[float, str]] = field(default_factory=list)  # (seconds since start, text)
    notes: list[str] = field(default_factory=list)
    baseline: Baseline | None = None
    warmup: dict[str, Any] | None = None
    bench: dict[str, Any] | None = None
    spec_decoding: dict[str, Any] | None = None
    regression: list[dict[str, Any]] | None = None
    source: str = ""  # where the data came from: "record run.jsonl", "history run 12"
    anatomy: dict[str, Any] | None = None  # the live run's, else the replayed judge's (firstlight.analysis)
    engine_clock: dict[str, Any] | None = None  # the engine's own figures beside it (firstlight.analysis)

    def level_markers(self) -> list[Marker]:
        return [m for m in self.markers if m.kind == "level"]

    def phase_diffs(self) -> dict[str, float]:
        """Per phase name: this run's duration minus the baseline's (only phases both runs went through)."""
        if self.baseline is None:
            return {}
        base: dict[str, float] = {}
        for s in self.baseline.phases:
            base[s.name] = base.get(s.name, 0.0) + s.duration
        mine: dict[str, float] = {}
        for s in self.phases:
            mine[s.name] = mine.get(s.name, 0.0) + s.duration
        return {name: mine[name] - base[name] for name in mine if name in base}


@dataclass
class Replay:
    """The judge's state after replaying a timeline: its final (or last) assessment and what it reported."""

    judge: Judge
    assessment: Assessment
    events: list[Event]
    observations: list[Observation]  # the ones fed (up to the verdict)
    progress: list[tuple[float, float | None]]  # (epoch t, weights fraction) after each sample


def profile_for(observations: Sequence[Observation], engine: str | None) -> EngineProfile:
    """The engine the run began with: named, else the one ``Started`` says, else generic."""
    name = engine or next((o.engine for o in observations if isinstance(o, Started)), None) or "generic"
    try:
        return get_profile(name)
    except ValueError:
        return get_profile("generic")


def replay(observations: Sequence[Observation], rules: JudgeConfig, profile: EngineProfile) -> Replay:
    """Feed the observations to the driver of the judge in order, as the session did (a generic start learns its
    engine from the server's lines, by the session's own rule), and stop at the first final verdict."""
    if not observations:
        raise ValueError("empty timeline")
    driver = Driver(rules, profile, observations[0].t, detect=profile.name == "generic")
    events: list[Event] = []
    progress: list[tuple[float, float | None]] = []
    fed: list[Observation] = []
    a = driver.assess(observations[0].t)
    for i, obs in enumerate(observations):
        fed.append(obs)
        step = driver.feed(obs)
        events += step.events
        if isinstance(obs, ProcessSample | LogLine):
            progress.append((obs.t, driver.judge.progress(obs.t).weights_fraction))
        a = step.assessment
        if a.final:
            # the engine's own figures read after READY (its endpoints) belong to this start's anatomy: fed as the
            # session fed them, they change no verdict
            for later in observations[i + 1:]:
                if isinstance(later, EngineClock):
                    a = driver.feed(later).assessment
            break
    else:
        a = driver.assess(observations[-1].t)
    return Replay(driver.judge, a, events, fed, progress)


def result_of(r: Replay) -> RunResult:
    """The run's result as the session would have built it from the same judge (what a record holds of it)."""
    j = r.judge
    started = next((o for o in r.observations if isinstance(o, Started)), None)
    facts = RunFacts(started_at=j.started_at, engine=j.profile.name, url=(started.url or "") if started else "",
                     pid=started.pid if started else None,
                     cold_start_s=(j.ready_at - j.started_at) if j.ready_at is not None else None)
    return RunResult.from_judge(j, r.assessment, facts)


def build_view(observations: Sequence[Observation], summary: dict[str, Any] | None = None,
               rules: JudgeConfig | None = None, baseline: dict[str, Any] | None = None,
               baseline_run: int | None = None, source: str = "") -> RunView:
    """The view of one run. ``summary``: the live run's JSON summary (it wins over the replay where they
    differ); ``baseline``: the summary of the deployment's baseline start, for the ghost bars."""
    rules = rules or JudgeConfig()
    r = replay(observations, rules, profile_for(observations, None))
    engine = (summary or {}).get("engine")
    if engine and r.judge.profile.name != engine:  # learnt from its endpoints live, which a record does not hold
        r = replay(observations, rules, profile_for(observations, engine))
    profile = r.judge.profile
    result = result_of(r)
    s = result.to_dict()
    if summary:
        s.update({k: v for k, v in summary.items() if v is not None or k in ("failure", "hint", "detail")})
    t0 = float(s.get("started_at") or observations[0].t)
    # The axis ends at the verdict (READY, or the end), not hours later when a supervised server stopped.
    end_abs = max(float(s.get("ready_at") or s.get("ended_at") or 0.0), r.observations[-1].t)
    view = RunView(started_at=t0, end=max(end_abs - t0, 1e-3), verdict=s["verdict"], phase=s.get("phase") or "",
                   failure=s.get("failure"), hint=s.get("hint"), detail=s.get("detail"),
                   engine=s.get("engine") or profile.name, url=s.get("url") or None, command=_command(s.get("command")),
                   cold_start_s=s.get("cold_start_s"), first_generation=s.get("first_generation"),
                   notes=list(s.get("notes") or []), warmup=s.get("warmup"), bench=s.get("bench"),
                   spec_decoding=s.get("spec_decoding"), regression=s.get("regression"), source=source)
    if not r.assessment.final and not summary:
        view.notes.append(f"the record ends before a final verdict under the rules it was replayed with "
                          f"(stall timeout {rules.stall_timeout:g}s, spin timeout {rules.spin_timeout:g}s, timeout "
                          f"{rules.timeout:g}s): give the run's own rules, or its --summary")
    view.evidence = [{**e, "since": None if e.get("since") is None else e["since"] - t0}
                     for e in s.get("evidence") or []]
    if s.get("ready_at") is not None:
        view.ready_at = s["ready_at"] - t0
    view.phases = _spans(s.get("phases") or [], t0, end_abs)
    view.markers = _markers(s, r.events, t0)
    view.windows = _windows(s, t0, end_abs)
    view.charts = charts(r.observations, r.progress, t0)
    view.log_tail = [(o.t - t0, o.text) for o in r.observations if isinstance(o, LogLine)][-LOG_TAIL:]
    view.anatomy = s.get("anatomy") or result.anatomy
    view.engine_clock = s.get("engine_clock") or result.engine_clock
    if baseline:
        bt0 = float(baseline.get("started_at") or 0.0)
        bend = float(baseline.get("ready_at") or baseline.get("ended_at") or bt0)
        view.baseline = Baseline(baseline_run, f"run {baseline_run}" if baseline_run else "baseline",
                                 _spans(baseline.get("phases") or [], bt0, bend), baseline.get("cold_start_s"),
                                 baseline.get("anatomy"))
        view.end = max(view.end, bend - bt0)
    return view


def _command(cmd: Any) -> str | None:
    if isinstance(cmd, list):
        return " ".join(str(c) for c in cmd)
    return cmd if isinstance(cmd, str) else None


def _spans(phases: Iterable[dict[str, Any]], t0: float, end_abs: float) -> list[Span]:
    out = []
    for p in phases:
        end = p.get("end")
        out.append(Span(p["name"], p["start"] - t0, (end if end is not None else end_abs) - t0, p.get("source", "log")))
    return out


def _markers(s: dict[str, Any], events: list[Event], t0: float) -> list[Marker]:
    out = [Marker(t - t0, "level", label) for label, t in (s.get("levels") or {}).items()
           if isinstance(t, int | float)]
    if s.get("engine_ready_at"):
        out.append(Marker(s["engine_ready_at"] - t0, "engine_ready", "engine says ready"))
    g = s.get("first_generation")
    if g and s.get("ready_at"):
        out.append(Marker(s["ready_at"] - t0, "generation",
                          f"first generation {g.get('text')!r} in {g.get('latency_s') or 0:.2f}s"))
    for ev in [e for e in events if e.type in ("warning", "failure_line")][:MAX_EVENT_MARKERS]:
        if ev.type in ("warning", "failure_line"):
            cat = f"[{ev.data.get('category')}] " if ev.type == "failure_line" else ""
            out.append(Marker(ev.t - t0, ev.type, cat + ev.message))
    return sorted(out, key=lambda m: m.t)


def _windows(s: dict[str, Any], t0: float, end_abs: float) -> list[Window]:
    """A hung verdict shades the time since the last real progress (its first evidence's ``since``)."""
    if s.get("verdict") != HUNG:
        return []
    ev = (s.get("evidence") or [{}])[0]
    since = ev.get("since")
    if not isinstance(since, int | float):
        return []
    label = s.get("detail") or "no progress"
    return [Window(since - t0, end_abs - t0, label)]


# -- series ------------------------------------------------------------------------------------------------

def charts(observations: Sequence[Observation], progress: Sequence[tuple[float, float | None]],
           t0: float) -> list[Chart]:
    """The resource panels: read rate and weights fraction, RSS, CPU, GPU memory and utilisation per device,
    log lines per second and process count. Panels without data are left out."""
    procs = [o for o in observations if isinstance(o, ProcessSample) and o.alive]
    gpus = [o for o in observations if isinstance(o, GpuSample) and o.devices]
    logs = [o.t - t0 for o in observations if isinstance(o, LogLine)]
    out: list[Chart] = []
    read, cpu = [], []
    for a, b in itertools.pairwise(procs):
        dt = b.t - a.t
        if dt > 0:
            read.append((b.t - t0, max(0, b.read_bytes - a.read_bytes) / dt / 1e6))
            cpu.append((b.t - t0, max(0.0, b.cpu_seconds - a.cpu_seconds) / dt * 100))
    frac = [(t - t0, f * 100) for t, f in progress if f is not None]
    if any(v for _, v in read) or frac:
        out.append(Chart("read", "Disk reads", "MB/s", [Series("read MB/s", _thin(read))]))
    if frac:
        out.append(Chart("weights", "Weights read", "%", [Series("weights %", _thin(_dedupe(frac)))], "step",
                         100.0))
    if procs:
        out.append(Chart("rss", "RSS (tree)", "GB",
                         [Series("RSS GB", _thin([(p.t - t0, p.rss_bytes / 1e9) for p in procs]))]))
    if cpu:
        out.append(Chart("cpu", "CPU", "% of a core", [Series("CPU %", _thin(cpu))]))
    if gpus:
        indices = sorted({d.index for g in gpus for d in g.devices})
        mem = [Series(f"GPU {i}", _thin([(g.t - t0, d.memory_used / 1e9) for g in gpus for d in g.devices
                                         if d.index == i])) for i in indices]
        out.append(Chart("gpu_mem", "GPU memory", "GB", mem))
        util = [Series(f"GPU {i}", _thin([(g.t - t0, d.utilization) for g in gpus for d in g.devices
                                          if d.index == i and d.utilization is not None])) for i in indices]
        if any(s.points for s in util):
            out.append(Chart("gpu_util", "GPU utilisation", "%", util, y_max=100.0))
    if logs:
        out.append(Chart("logs", "Log lines", "lines/s", [Series("lines/s", _per_second(logs))], "bars"))
    if procs:
        counts = _dedupe([(p.t - t0, float(len(p.procs))) for p in procs])
        out.append(Chart("procs", "Processes", "processes", [Series("processes", _thin(counts))], "step",
                         max(v for _, v in counts) + 1))
    return out


def _per_second(times: list[float]) -> list[tuple[float, float]]:
    """Counts per bucket (1 s, or wider for long runs so that there are at most MAX_POINTS buckets), per second."""
    span = max(times) if times else 0.0
    width = max(1.0, span / MAX_POINTS)
    counts: dict[int, int] = {}
    for t in times:
        b = int(max(0.0, t) // width)
        counts[b] = counts.get(b, 0) + 1
    return [(b * width, n / width) for b, n in sorted(counts.items())]


def _dedupe(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Step series: keep a point only where the value changes (and the last one)."""
    out: list[tuple[float, float]] = []
    for i, (t, v) in enumerate(points):
        if not out or v != out[-1][1] or i == len(points) - 1:
            out.append((t, v))
    return out


def _thin(points: list[tuple[float, float]], n: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most ``n`` points: consecutive points averaged in equal groups (the shape survives, the size not)."""
    if len(points) <= n:
        return points
    size = len(points) / n
    out = []
    for i in range(n):
        group = points[int(i * size): max(int((i + 1) * size), int(i * size) + 1)]
        out.append((group[-1][0], sum(v for _, v in group) / len(group)))
    return out
