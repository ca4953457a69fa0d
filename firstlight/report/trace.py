"""The run as Chrome trace-event JSON, for ui.perfetto.dev and chrome://tracing.

Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU (the "JSON Object
Format"). Timestamps are microseconds since firstlight began watching. One process ("firstlight: ENGINE
start") with a track (thread) per concurrent activity so that bars nest: phases; readiness levels (each
level holds from when it was reached to the end, so level bars nest inside each other); the first
generation request; warnings and error lines (instants); the hang window. Counters (``C``) carry the
resource series; metadata (``M``) names the process and tracks. The baseline start, when there is one, is a
second process with its phases.
"""

from __future__ import annotations

import json
from typing import Any

from firstlight.report.series import RunView

PID, BASELINE_PID = 1, 2
TRACKS = {"phases": 1, "readiness": 2, "generation": 3, "events": 4, "watch": 5}


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def _meta(pid: int, tid: int | None, name: str, value: Any) -> dict[str, Any]:
    key = "sort_index" if name.endswith("_sort_index") else "name"
    ev: dict[str, Any] = {"name": name, "ph": "M", "pid": pid, "args": {key: value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _slice(name: str, start: float, end: float, tid: int, cat: str, args: dict[str, Any] | None = None,
           pid: int = PID) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "X", "ts": _us(start), "dur": max(1, _us(end) - _us(start)),
            "pid": pid, "tid": tid, "args": args or {}}


def trace_events(view: RunView) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [_meta(PID, None, "process_name", f"firstlight: {view.engine} start ({view.verdict})"),
                                _meta(PID, None, "process_sort_index", 0)]
    for name, tid in TRACKS.items():
        ev.append(_meta(PID, tid, "thread_name", name))
        ev.append(_meta(PID, tid, "thread_sort_index", tid))
    for p in view.phases:
        ev.append(_slice(p.name, p.start, p.end, TRACKS["phases"], "phase",
                         {"source": p.source, "duration_s": round(p.duration, 6)}))
    for m in view.level_markers():
        ev.append(_slice(m.label, m.t, view.end, TRACKS["readiness"], "level", {"reached_s": round(m.t, 6)}))
        ev.append({"name": f"{m.label} holds", "cat": "level", "ph": "i", "s": "t", "ts": _us(m.t), "pid": PID,
                   "tid": TRACKS["readiness"]})
    for m in view.markers:
        if m.kind == "generation":
            latency = float((view.first_generation or {}).get("latency_s") or 0.0)
            ev.append(_slice("first generation", max(0.0, m.t - latency), m.t, TRACKS["generation"], "generation",
                             {"result": m.label}))
        elif m.kind in ("warning", "failure_line", "engine_ready"):
            ev.append({"name": m.label[:120], "cat": m.kind, "ph": "i", "s": "t", "ts": _us(m.t), "pid": PID,
                       "tid": TRACKS["events"], "args": {"text": m.label}})
    for w in view.windows:
        ev.append(_slice(w.label, w.start, w.end, TRACKS["watch"], "hang", {"verdict": view.verdict}))
    ev.append({"name": f"verdict: {view.verdict}", "cat": "verdict", "ph": "i", "s": "p", "ts": _us(view.end),
               "pid": PID, "tid": TRACKS["watch"], "args": {"verdict": view.verdict, "failure": view.failure,
                                                           "hint": view.hint, "evidence": view.evidence}})
    for chart in view.charts:
        for s in chart.series:
            for t, v in s.points:
                ev.append({"name": f"{chart.title} ({chart.unit})", "cat": "resource", "ph": "C", "ts": _us(t),
                           "pid": PID, "args": {s.name: round(v, 4)}})
    if view.baseline is not None:
        ev.append(_meta(BASELINE_PID, None, "process_name", f"baseline start ({view.baseline.label})"))
        ev.append(_meta(BASELINE_PID, None, "process_sort_index", 1))
        ev.append(_meta(BASELINE_PID, 1, "thread_name", "phases"))
        for p in view.baseline.phases:
            ev.append(_slice(p.name, p.start, p.end, 1, "phase", {"duration_s": round(p.duration, 6)},
                             pid=BASELINE_PID))
    return ev


def render_trace(view: RunView) -> str:
    doc = {"traceEvents": trace_events(view), "displayTimeUnit": "ms",
           "otherData": {"generator": "firstlight", "verdict": view.verdict, "engine": view.engine,
                         "started_at_epoch_s": view.started_at, "source": view.source}}
    return json.dumps(doc, default=str)
