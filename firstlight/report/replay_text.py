"""The human-readable post-mortem of a log replay (``firstlight replay``): the engine, the outcome, the phases
with their timestamps, the last progress, the failure's evidence lines and the hint."""

from __future__ import annotations

from firstlight.engines import get_profile
from firstlight.logreplay import ReplayReport
from firstlight.timestamps import format_ts


def format_replay_text(report: ReplayReport) -> str:
    """The human-readable post-mortem of a replay."""
    out: list[str] = []
    try:
        display = get_profile(report.engine).display_name
    except ValueError:
        display = report.engine
    out.append(f"Engine: {display} ({report.engine}), {report.lines} lines")
    verdict = {"ready": "READY", "failed": "FAILED", "incomplete": "INCOMPLETE"}.get(
        report.outcome, report.outcome.upper()
    )
    line = f"Outcome: {verdict}"
    if report.outcome == "failed":
        line += f" ({report.failure}) during {report.phase}"
    elif report.outcome == "incomplete":
        line += f": last phase {report.phase}"
    if report.ready_line:
        line += f" at line {report.ready_line}"
    out.append(line)
    if report.phases:
        out.append("Phases:")
        t0 = next((p["timestamp"] for p in report.phases if p.get("timestamp") is not None), None)
        shown = report.phases if len(report.phases) <= 40 else report.phases[:15] + report.phases[-25:]
        for i, p in enumerate(shown):
            if len(report.phases) > 40 and i == 15:
                out.append(f"  ... {len(report.phases) - 40} more phase changes ...")
            ts = p.get("timestamp")
            when = ""
            if ts is not None:
                when = format_ts(ts)
                if t0 is not None and ts >= t0 and ts - t0 > 0:
                    when += f"  (+{ts - t0:.1f}s)"
            out.append(f"  {p['name']:<17} line {p['line']:<7} {when}".rstrip())
    else:
        out.append("Phases: none recognised (log level too low, or not a startup log)")
    if report.progress:
        pr = report.progress
        frac = f" {pr['fraction'] * 100:.0f}%" if pr.get("fraction") is not None else ""
        count = f" {pr['done']}/{pr['total']}" if pr.get("done") is not None and pr.get("total") else ""
        out.append(f"Last progress: {pr['kind']}{count}{frac} (line {pr['line']})")
    if report.outcome == "failed":
        lines = [e for e in report.evidence if e["what"] == "failure"]
        where = ", ".join(str(e["line"]) for e in lines[:8])
        out.append(f"Failure: {report.failure}" + (f" (evidence lines {where})" if lines else ""))
        for e in lines[:8]:
            out.append(f"  {e['line']:>7}: {e['text']}")
        for e in report.evidence:  # how the process ended, where the source said (a journal's exit message)
            if e["line"] is None:
                out.append(f"  {e['what']:>7}: {e['text']}")
    if report.hint:
        out.append(("Hint: " if report.outcome == "failed" else "Note: ") + report.hint)
    if report.serving_failure:
        sf = report.serving_failure
        out.append(f"Serving failure after ready: {sf['category']} at line {sf['line']}: {sf['text']}")
        out.append(f"  Hint: {sf['hint']}")
    return "\n".join(out) + "\n"


__all__ = ["format_replay_text"]
