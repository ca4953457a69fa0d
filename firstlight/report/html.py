"""The start report: one self-contained HTML file (inline SVG and CSS), from a :class:`RunView`.

Modelled on ``systemd-analyze plot`` (a bar per unit on a seconds axis) and bootchart (resource charts above
the Gantt chart, on the same axis). Needs no network: no scripts, no external fonts, styles or images, so it
opens from an e-mail attachment or a CI artifact, prints, and reads on a phone (the SVGs scale to the width).
Every string that came from the server or the user (log lines, evidence, the command) is HTML-escaped: a log
line is text, never markup. Pure: data in, a string out.
"""

from __future__ import annotations

import time
from typing import Any

from firstlight._version import __version__
from firstlight.formats import seconds as secs
from firstlight.report.series import RunView, Span
from firstlight.report.svg import (
    LEFT,
    RIGHT,
    ROW,
    Axis,
    W,
    chart,
    esc,
    ghost,
    grid,
    marker_row,
    phase_colour,
    phase_row,
    signed,
    svg_open,
    window,
)

VERDICT_COLOURS = {"ready": "#15803d", "regression": "#b45309", "failed": "#b91c1c", "hung": "#b91c1c",
                   "timeout": "#b45309", "interrupted": "#6b7280", "starting": "#2563eb"}

CSS = """
.anatomy-row{display:flex;align-items:center;gap:8px;margin:4px 0}.anatomy-label{width:14em;font-size:13px}
.anatomy-bar{flex:1;display:flex;height:18px;background:#f3f4f6}.anatomy-bar .seg{height:100%}
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #111827; background: #fff; margin: 0 auto; max-width: 1100px; padding: 12px; }
h1 { font-size: 1.6em; margin: 0; letter-spacing: .02em; }
h2 { font-size: 1.1em; margin: 1.4em 0 .4em; border-bottom: 1px solid #e5e7eb; padding-bottom: .2em; }
header.verdict { border-left: 8px solid var(--verdict); padding: 8px 12px; background: #f9fafb; }
header.verdict h1 { color: var(--verdict); }
.meta { display: grid; grid-template-columns: max-content 1fr; gap: 0 12px; margin: .5em 0 0; }
.meta dt { color: #6b7280; } .meta dd { margin: 0; overflow-wrap: anywhere; }
.failure { font-weight: 600; } .hint { margin: .3em 0; }
ul.evidence { margin: .3em 0; padding-left: 1.2em; } ul.evidence li { overflow-wrap: anywhere; }
.signal { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: #374151; }
svg { width: 100%; height: auto; display: block; }
svg text { font: 12px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: #111827; }
svg .small { font-size: 10px; fill: #4b5563; } svg .faster { fill: #15803d; } svg .slower { fill: #b91c1c; }
svg .grid { stroke: #e5e7eb; stroke-width: 1; } svg .axis { stroke: #9ca3af; }
svg .ghost-bar { fill: #9ca3af; opacity: .55; }
svg .window { fill: url(#hatch); } svg .window-edge { stroke: #b91c1c; stroke-dasharray: 4 3; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 12px; font-size: 12px; color: #374151; margin: 0 0 4px 190px; }
.legend span::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 4px;
                       background: var(--c); vertical-align: -1px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
td, th { padding: 2px 10px; text-align: right; border-bottom: 1px solid #f3f4f6; }
th:first-child, td:first-child { text-align: left; }
.scroll { overflow-x: auto; }
pre.log { white-space: pre-wrap; overflow-wrap: anywhere; background: #f9fafb; border: 1px solid #e5e7eb;
          padding: 8px; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
footer { color: #6b7280; font-size: 12px; margin-top: 2em; }
@media (max-width: 720px) { body { padding: 6px; font-size: 13px; } .legend { margin-left: 0; }
  .scroll, .chart { overflow-x: auto; } svg { min-width: 720px; } }
@media print { body { max-width: none; padding: 0; } h2 { break-after: avoid; }
               svg, table, .chart { break-inside: avoid; } pre.log { max-height: none; } }
"""


def render_html(view: RunView) -> str:
    axis = Axis(view.end)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>firstlight: {esc(view.verdict)} — {esc(view.engine)} start</title>",
        f"<style>{CSS}</style></head><body>",
        _header(view),
        '<h2 id="timeline-title">Timeline</h2>',
        _timeline(view, axis),
    ]
    if view.baseline is not None:
        parts.append(_baseline_table(view))
    parts.append(_anatomy(view))
    parts.append(_engine_clock(view))
    if view.charts:
        parts.append('<h2>Resources</h2>')
        parts += [chart(c, axis, view.windows) for c in view.charts]
    parts += [_after_ready(view), _warnings(view), _log_tail(view), _notes(view), _footer(view), "</body></html>"]
    return "\n".join(p for p in parts if p)


# -- the header: verdict, failure, hint, evidence -----------------------------------------------------------

def _header(v: RunView) -> str:
    colour = VERDICT_COLOURS.get(v.verdict, "#111827")
    if v.verdict in ("ready", "regression") and v.ready_at is not None:
        g = v.first_generation or {}
        said = f"serving after {secs(v.ready_at)}: first generation {g.get('text')!r} in {g.get('latency_s') or 0:.2f}s"
    else:
        said = f"in phase {v.phase}" + (f" ({v.detail})" if v.detail else "") + f" after {secs(v.end)}"
    out = [f'<header class="verdict" style="--verdict:{colour}">',
           f'<h1 id="verdict" data-verdict="{esc(v.verdict)}">{esc(v.verdict.upper())}</h1>',
           f'<p id="said">{esc(said)}</p>']
    if v.failure:
        out.append(f'<p class="failure" id="failure">failure: <span data-failure="{esc(v.failure)}">'
                   f'{esc(v.failure)}</span></p>')
    if v.hint:
        out.append(f'<p class="hint" id="hint">fix: {esc(v.hint)}</p>')
    if v.evidence:
        out.append('<ul class="evidence" id="evidence">')
        for e in v.evidence:
            at = "" if e.get("since") is None else f" (at {secs(e['since'])})"
            out.append(f'<li><span class="signal">{esc(e.get("signal"))}</span>: {esc(e.get("value"))}{esc(at)}</li>')
        out.append("</ul>")
    for r in v.regression or []:
        out.append(f'<p class="failure regression">regression: {esc(r.get("message"))}</p>')
    meta = [("engine", v.engine), ("url", v.url), ("command", v.command),
            ("started", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(v.started_at))),
            ("cold start", secs(v.cold_start_s) if v.cold_start_s is not None else None), ("from", v.source)]
    out.append('<dl class="meta">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(val)}</dd>" for k, val in meta if val)
               + "</dl></header>")
    return "\n".join(out)


# -- the timeline: phases, ghost bars, levels, first generation, hang window --------------------------------


def _timeline(v: RunView, axis: Axis) -> str:
    diffs = v.phase_diffs()
    base_by_name: dict[str, list[Span]] = {}
    for s in v.baseline.phases if v.baseline else []:
        base_by_name.setdefault(s.name, []).append(s)
    rows: list[str] = []
    y = 24
    for i, span in enumerate(v.phases):
        rows.append(phase_row(span, i, y, axis, base_by_name.pop(span.name, []) if v.baseline else [],
                               diffs.get(span.name)))
        y += ROW + (6 if v.baseline else 0)
    for name, spans in base_by_name.items():  # phases only the baseline went through
        rows.append(f'<g class="ghost-row"><text x="{LEFT - 6}" y="{y + 14}" text-anchor="end" class="small">'
                    f'{esc(name)} (baseline only)</text>'
                    + "".join(ghost(s, y + 4, axis) for s in spans) + "</g>")
        y += ROW
    y += 6
    rows.append(f'<line class="axis" x1="{LEFT}" x2="{W - RIGHT}" y1="{y - 3}" y2="{y - 3}"/>')
    for m in [m for m in v.markers if m.kind in ("level", "engine_ready", "generation")]:
        rows.append(marker_row(m.kind, m.label, m.t, y, axis))
        y += ROW
    events = [m for m in v.markers if m.kind in ("warning", "failure_line")]
    if events:
        marks = "".join(
            f'<path class="event-mark" d="M{axis.x(m.t):.1f},{y + 4} l5,10 h-10 z" '
            f'fill="{"#b91c1c" if m.kind == "failure_line" else "#d97706"}"><title>{esc(secs(m.t))}: '
            f'{esc(m.label)}</title></path>' for m in events)
        rows.append(f'<g class="events"><text x="{LEFT - 6}" y="{y + 14}" text-anchor="end">warnings, errors'
                    f'</text>{marks}</g>')
        y += ROW
    height = y + 24
    head = svg_open(height, "Phases on a seconds axis")
    gridlines = grid(axis, 16, y + 2, height - 6)
    shade = "".join(window(w, axis, 16, y, label=True) for w in v.windows)
    top = (f'<text x="{LEFT - 6}" y="12" text-anchor="end" class="small">phase</text>'
           f'<text x="{W - RIGHT + 6}" y="12" class="small">vs baseline</text>' if v.baseline else "")
    return f'<div class="scroll">{head}{gridlines}{shade}{top}{"".join(rows)}</svg></div>'


# -- resource charts ----------------------------------------------------------------------------------------


# -- below the charts ---------------------------------------------------------------------------------------

def _baseline_table(v: RunView) -> str:
    assert v.baseline is not None
    diffs = v.phase_diffs()
    rows = []
    base = {s.name: s.duration for s in v.baseline.phases}
    for s in v.phases:
        if s.name in base:
            rows.append(f"<tr><td>{esc(s.name)}</td><td>{esc(secs(s.duration))}</td><td>{esc(secs(base[s.name]))}"
                        f"</td><td>{esc(signed(diffs[s.name]))}</td></tr>")
    cold = ""
    if v.cold_start_s is not None and v.baseline.cold_start_s:
        cold = (f"<p>cold start {esc(secs(v.cold_start_s))} vs {esc(secs(v.baseline.cold_start_s))} "
                f"({v.cold_start_s / v.baseline.cold_start_s:.2f}x)</p>")
    return (f'<h2>Against the baseline ({esc(v.baseline.label)})</h2>{cold}<div class="scroll">'
            f'<table id="baseline"><tr><th>phase</th><th>this run</th><th>baseline</th><th>difference</th></tr>'
            f'{"".join(rows)}</table></div>')


def _anatomy_bar(label: str, anat: dict[str, Any], scale: float) -> str:
    """One start as a stacked bar: a segment per phase, its width its seconds, titled with its bound."""
    segs = []
    for p in anat.get("phases", []):
        width = 100.0 * p["seconds"] / scale if scale > 0 else 0.0
        if width <= 0:
            continue
        title = f"{p['name']}: {secs(p['seconds'])}, bound {p['bound']}"
        segs.append(f'<div class="seg" data-phase="{esc(p["name"])}" title="{esc(title)}" style="width:{width:.3f}%;'
                    f'background:{phase_colour(p["name"])}"></div>')
    return (f'<div class="anatomy-row"><span class="anatomy-label">{esc(label)} {esc(secs(anat.get("total_s")))}'
            f'</span><div class="anatomy-bar">{"".join(segs)}</div></div>')


def _anatomy(v: RunView) -> str:
    anat = v.anatomy
    if not anat or not anat.get("phases"):
        return ""
    base = v.baseline.anatomy if v.baseline is not None else None
    scale = max(anat.get("total_s") or 0.0, (base or {}).get("total_s") or 0.0)
    bars = _anatomy_bar("this start", anat, scale)
    if base and base.get("phases"):
        bars += _anatomy_bar(f"baseline ({v.baseline.label})" if v.baseline else "baseline", base, scale)
    rows = "".join(f"<tr><td>{esc(p['name'])}</td><td>{esc(secs(p['seconds']))}</td><td>{esc(p['bound'])}</td>"
                   f"<td>{esc(p['evidence'][0]['value'] if p.get('evidence') else '')}</td></tr>"
                   for p in anat["phases"])
    cuts = "".join(f"<li>{esc(c['cut'])}: "
                   f"{esc('saving unknown' if c['saving_s'] is None else 'would save ~' + secs(c['saving_s']))}: "
                   f"{esc(c['how'])}</li>" for c in anat.get("cuts", []))
    vs = (anat.get("vs_baseline") or {}).get("message")
    return ('<h2>Anatomy: where the time went</h2><div id="anatomy">' + bars + "</div>"
            + (f"<p>{esc(vs)}</p>" if vs else "")
            + '<div class="scroll"><table id="anatomy-phases"><tr><th>phase</th><th>time</th><th>bound</th>'
            f'<th>evidence</th></tr>{rows}</table></div>' + (f'<ul id="anatomy-cuts">{cuts}</ul>' if cuts else ""))


def _engine_clock(v: RunView) -> str:
    """The engine's own clock beside firstlight's: one row per stage it timed, a disagreement marked with its note."""
    c = v.engine_clock
    if not isinstance(c, dict) or not c.get("phases"):
        return ""
    rows = "".join(
        f'<tr{" class=differs" if r.get("differs") else ""}><td>{esc(r.get("stage"))}</td>'
        f'<td>{esc(r.get("phase") or "-")}</td><td>{esc(secs(r.get("engine_s")))}</td>'
        f'<td>{esc("-" if r.get("firstlight_s") is None else secs(r.get("firstlight_s")))}</td>'
        f'<td>{esc(r.get("note") or "")}</td></tr>' for r in c["phases"])
    return (f'<h2>The engine\'s own clock ({esc(c.get("source"))})</h2><div class="scroll"><table id="engine-clock">'
            "<tr><th>stage</th><th>phase</th><th>engine</th><th>firstlight</th><th>note</th></tr>"
            f"{rows}</table></div>")


def _after_ready(v: RunView) -> str:
    out = []
    if v.warmup:
        w = v.warmup
        out.append(f"<p id=\"warmup\">warm-up: {esc(w.get('n'))} requests, first {esc(secs(w.get('first_s')))}, "
                   f"steady state {esc(secs(w.get('steady_s')))}"
                   + (f", steady from request {w['steady_index'] + 1}" if w.get("steady_index") is not None else "")
                   + f", {esc(w.get('errors', 0))} errors</p>")
    b = v.bench
    if b:
        rows = []
        for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2el_ms", "E2E")):
            st = b.get(key) or {}
            rows.append(f"<tr><td>{name}</td>" + "".join(
                f"<td>{'-' if st.get(q) is None else f'{st[q]:.1f}'}</td>" for q in ("mean", "median", "p90", "p99"))
                + "</tr>")
        sent = b.get("sent", (b.get("completed") or 0) + (b.get("errors") or 0) + (b.get("timeouts") or 0))
        out.append(
            f'<div id="bench"><p>benchmark: {esc(sent)} requests at concurrency {esc(b.get("concurrency"))}: '
            f'{esc(b.get("completed"))} completed, {esc(b.get("errors"))} errors, {esc(b.get("timeouts"))} timeouts '
            f'in {esc(secs(b.get("duration_s")))}; {b.get("output_throughput") or 0:.1f} output tok/s, '
            f'{b.get("request_throughput") or 0:.2f} req/s</p><div class="scroll"><table><tr><th>ms</th><th>mean</th>'
            f'<th>median</th><th>p90</th><th>p99</th></tr>{"".join(rows)}</table></div></div>')
    sd = v.spec_decoding
    if sd:
        length = sd.get("mean_acceptance_length")
        out.append(f'<p id="spec-decoding">speculative decoding: <b>{esc(sd.get("status"))}</b>'
                   + (f", mean acceptance length {length:.2f}" if isinstance(length, int | float) else "")
                   + f": {esc(sd.get('message', ''))}</p>")
    return "<h2>After READY</h2>" + "".join(out) if out else ""


def _warnings(v: RunView) -> str:
    items = [m for m in v.markers if m.kind in ("warning", "failure_line")]
    if not items:
        return ""
    return ('<h2>Warnings and error lines</h2><ul class="evidence" id="warnings">'
            + "".join(f"<li>{esc(secs(m.t))}: {esc(m.label)}</li>" for m in items) + "</ul>")


LINE_CHARS = 2000  # of one log line on the page: 50 lines of 1 MiB made a 42 MB page


def _clip(text: str) -> str:
    return text if len(text) <= LINE_CHARS else f"{text[:LINE_CHARS]}… ({len(text) - LINE_CHARS} more characters)"


def _log_tail(v: RunView) -> str:
    if not v.log_tail:
        return ""
    lines = "\n".join(f"[{t:8.2f}s] {_clip(text)}" for t, text in v.log_tail)
    return f'<h2>Last log lines before the verdict</h2><pre class="log" id="log-tail">{esc(lines)}</pre>'


def _notes(v: RunView) -> str:
    if not v.notes:
        return ""
    return '<h2>Notes</h2><ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in v.notes) + "</ul>"


def _footer(v: RunView) -> str:
    return (f"<footer>firstlight {esc(__version__)} start report. Self-contained: no scripts, no network. "
            f"Times are seconds since firstlight began watching.</footer>")
