"""The engine's own clock beside firstlight's: per stage the engine timed, the engine's seconds, firstlight's seconds
for the same phases (the anatomy's, ``firstlight.anatomy``), and a note where they differ.

Two readings of one start that disagree are a finding (a stretch the engine does not count, a clock that starts at
process creation); two that agree are evidence. Pure: the engine's figures come in as observations
(:class:`firstlight.timeline.EngineClock`, read by ``firstlight.engines.clocks`` from its log lines, endpoints and
progress stream), firstlight's from the anatomy's phases. No clocks, no I/O.

A row differs when ``|engine - firstlight| > max(DIFF_S, DIFF_SHARE * firstlight)``: 2 s absorbs the granularity of
log timestamps and of a sampled stream; 10 % the noise of a long phase.
"""

from __future__ import annotations

from typing import Any

from firstlight.timeline import EngineClock

__all__ = ["DIFF_S", "DIFF_SHARE", "WHOLE", "compare_clocks", "differs", "human_lines"]

DIFF_S = 2.0
DIFF_SHARE = 0.10
WHOLE = "*"  # a stage that covers the whole start up to its end (vLLM's "Startup took", SGLang's e2e)
MAX_ROWS = 32


def differs(engine_s: float, firstlight_s: float) -> bool:
    """The engine's and firstlight's seconds disagree by more than 2 s and more than 10 % of firstlight's."""
    return abs(engine_s - firstlight_s) > max(DIFF_S, DIFF_SHARE * firstlight_s)


def _stream_rows(marks: list[EngineClock]) -> list[EngineClock]:
    """A progress stream's begin/end marks, paired per stage into figures: its seconds are the time between the
    stage's first mark and its end (as the marks arrived), ending where the end mark came."""
    out: list[EngineClock] = []
    begun: dict[tuple[str, str], EngineClock] = {}
    for m in marks:
        key = (m.source, m.stage)
        if m.mark == "begin":
            begun.setdefault(key, m)
        elif m.mark == "end" and key in begun:
            b = begun.pop(key)
            out.append(EngineClock(m.t, m.source, m.stage, m.phases, round(m.t - b.t, 3), text=m.text))
    return out


def _phase_name(phases: tuple[str, ...]) -> str:
    return "start" if phases == (WHOLE,) else "+".join(phases)


def compare_clocks(anat: dict[str, Any] | None, clocks: list[EngineClock]) -> dict[str, Any] | None:
    """The summary's ``engine_clock`` section, or None when the engine published nothing."""
    figures = [c for c in clocks if c.seconds is not None and not c.mark] + _stream_rows(
        [c for c in clocks if c.mark])
    if not figures:
        return None
    phases = {p["name"]: p for p in (anat or {}).get("phases", [])}
    origin = min((float(p["start"]) for p in phases.values()), default=None)
    rows: list[dict[str, Any]] = []
    for c in sorted(figures, key=lambda c: c.t)[:MAX_ROWS]:
        assert c.seconds is not None
        engine_s = round(c.seconds, 3)
        fl, began = _firstlight_seconds(c, phases, origin)
        row: dict[str, Any] = {"stage": c.stage, "source": c.source, "phase": _phase_name(c.phases) or None,
                               "engine_s": engine_s, "firstlight_s": fl, "differs": False, "note": None,
                               "at": c.t, "text": c.text}
        if c.phases and fl is None:
            row["note"] = f"firstlight saw no {_phase_name(c.phases)} phase" + _then(c, engine_s, phases)
        elif fl is not None and differs(engine_s, fl):
            row["differs"] = True
            row["note"] = _why(c, engine_s, fl, began)
        rows.append(row)
    sources = list(dict.fromkeys(r["source"] for r in rows))
    return {"source": ", ".join(sources), "phases": rows,
            "findings": [f"{r['stage']}: {r['note']}" for r in rows if r["differs"]]}


def _then(c: EngineClock, engine_s: float, phases: dict[str, dict[str, Any]]) -> str:
    """The phases firstlight was in while the engine's stage ran (its end minus its seconds, to its end)."""
    lo, hi = c.t - engine_s, c.t
    names = [n for n, p in phases.items()
             if float(p["start"]) <= hi and float(p["start"]) + float(p["seconds"]) >= lo]
    return f": it was in {', '.join(names)} then" if names else ""


def _firstlight_seconds(c: EngineClock, phases: dict[str, dict[str, Any]], origin: float | None
                        ) -> tuple[float | None, float | None]:
    """firstlight's seconds for the phases a figure covers, and when the first of them began."""
    if not c.phases:
        return None, None
    if c.phases == (WHOLE,):
        return (round(c.t - origin, 3), origin) if origin is not None else (None, None)
    seen = [phases[p] for p in c.phases if p in phases]
    if not seen:
        return None, None
    return round(sum(float(p["seconds"]) for p in seen), 3), min(float(p["start"]) for p in seen)


def _why(c: EngineClock, engine_s: float, fl: float, began: float | None) -> str:
    """What the disagreement says, with both numbers and where the engine's clock must have started."""
    what = _phase_name(c.phases)
    head = f"the engine counts {engine_s:.1f}s, firstlight saw {fl:.1f}s of {what}"
    if began is None:
        return head
    lead = (c.t - engine_s) - began  # the engine's clock started this long after firstlight's phase began
    if engine_s < fl:
        return (f"{head}: the engine's clock starts {lead:.1f}s after firstlight's {what} began"
                if lead > 0 else f"{head}: {fl - engine_s:.1f}s of it the engine does not count")
    return (f"{head}: the engine's clock starts {-lead:.1f}s before firstlight's {what} began "
            "(at the process's creation, or in a phase firstlight names differently)")


def human_lines(section: dict[str, Any] | None) -> list[str]:
    """The side-by-side table for a person."""
    if not section or not section.get("phases"):
        return []
    lines = [f"engine clock ({section.get('source')}): stage, phase, engine s, firstlight s"]
    for r in section["phases"]:
        fl = "-" if r.get("firstlight_s") is None else f"{r['firstlight_s']:.1f}s"
        mark = "  DIFFERS" if r.get("differs") else ""
        lines.append(f"  {r['stage']:<22}{r.get('phase') or '-'!s:<34}{r['engine_s']:>9.1f}s {fl:>9}{mark}")
        if r.get("note"):
            lines.append(f"    {r['note']}")
    return lines
