"""The analysis of a start as a person reads it (``firstlight.analysis``): the anatomy's block, the engine's clock
beside it, the start type in one line. The console at the verdict and ``explain`` print these; the values they
read are the summary's."""

from __future__ import annotations

from typing import Any

__all__ = ["clock_lines", "describe", "human_lines", "usual_lines"]


def human_lines(anat: dict[str, Any], verdict: str = "ready") -> list[str]:
    """A short block for a person: each phase with its bound, the idle time, what would cut it."""
    if not anat or not anat.get("phases"):
        return []
    head = "anatomy" if verdict == "ready" else f"anatomy (reached {anat.get('reached')}; how far each phase got)"
    lines = [f"{head}: {anat['total_s']:.1f}s"]
    for p in anat["phases"]:
        ev = p["evidence"][0]["value"] if p.get("evidence") else ""
        lines.append(f"  {p['name']:<17}{p['seconds']:>8.1f}s  {p['bound']:<11} {ev}")
    if anat.get("idle_s"):
        lines.append(f"  idle: {anat['idle_s']:.1f}s with no measured signal moving")
    for c in anat.get("cuts", []):
        saving = "saving unknown" if c["saving_s"] is None else f"would save ~{c['saving_s']:.1f}s"
        lines.append(f"  cut: {c['cut']} {saving}: {c['how']}")
    vs = anat.get("vs_baseline")
    if vs:
        lines.append(f"  vs baseline{' run ' + str(vs['run']) if vs.get('run') else ''}: {vs['message']}")
    return lines


def usual_lines(anat: dict[str, Any] | None, usual: dict[str, Any] | None) -> list[str]:
    """Each phase against what the deployment's earlier good starts of its type took in it (``Budgets.to_dict()``):
    their range and median, and how this start's time compares."""
    said = usual or {}
    phases = said.get("phases") or {}
    if not anat or not anat.get("phases") or not isinstance(phases, dict) or not phases:
        return []
    kind = f" {said['start_type']}" if said.get("start_type") else ""
    lines = [f"usual (earlier good{kind} starts of this deployment{_fleet(said)}): phase, this start, their range, "
             "median"]
    for p in anat["phases"]:
        b = phases.get(p.get("name"))
        if not isinstance(b, dict) or not all(isinstance(b.get(k), int | float)
                                              for k in ("min_s", "max_s", "median_s")):
            continue
        took = float(p["seconds"])
        mark = ("  LONGER than every earlier start" if took > b["max_s"] else
                "  SHORTER than every earlier start" if took < b["min_s"] else "")
        lines.append(f"  {p['name']:<17}{took:>8.1f}s  {b['min_s']:.1f}-{b['max_s']:.1f}s over {b.get('starts')} "
                     f"start{'s' if b.get('starts') != 1 else ''}, median {b['median_s']:.1f}s{mark}")
    return lines if len(lines) > 1 else []


def _fleet(said: dict[str, Any]) -> str:
    """Where the earlier starts ran, when a shared history holds other nodes' starts: the fleet's, named."""
    nodes = said.get("nodes") if isinstance(said.get("nodes"), dict) else {}
    here = said.get("node")
    if not nodes or set(nodes) <= {here}:
        return ""
    named = ", ".join(f"{n} {c}" for n, c in sorted(nodes.items(), key=lambda kv: (-kv[1], kv[0])))
    return f", the fleet's: {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({named})" + (
        f"; this start on {here}" if here else "")


def clock_lines(section: dict[str, Any] | None) -> list[str]:
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


def describe(start_type: dict[str, Any] | None) -> str | None:
    """One line: ``start type: warm_page_cache+compile_cache_hit (page_cache: 100% of ...; log: ...)``."""
    if not start_type or not start_type.get("type"):
        return None
    why = "; ".join(f"{e['signal']}: {e['value']}" for x in start_type.get("labels", [])
                    for e in start_type["evidence"].get(x, [])[:1])
    return f"start type: {start_type['type']} ({why})"
