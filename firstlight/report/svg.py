"""The report's SVG kit: one seconds axis shared by every chart, the phase rows of a Gantt chart, markers, grid
lines, windows and line charts, as SVG text. Data in, a string out; every label escaped (``esc``): a log line
or a phase name from a server is text, never markup."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from firstlight.formats import seconds as secs
from firstlight.logtext import UNSAFE_RE
from firstlight.report.series import Chart, Span, Window
from firstlight.vocab import PHASES

W = 1000  # SVG user units; the SVG scales to the page width
LEFT = 190  # label gutter
RIGHT = 80  # per-phase difference column
PLOT = W - LEFT - RIGHT
ROW = 22
CHART_H = 96
PHASE_COLOURS = ["#6b7280", "#8b5cf6", "#2563eb", "#0891b2", "#0d9488", "#ca8a04", "#ea580c", "#db2777",
                 "#9333ea", "#16a34a"]
SERIES_COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#ca8a04", "#9333ea", "#0891b2", "#ea580c", "#db2777"]
_CONTROL = UNSAFE_RE  # the controls and the bidi controls (U+202E would reorder the page's text)


def esc(text: Any) -> str:
    """Text for HTML or SVG, never markup: escaped, and control characters made visible."""
    return html.escape(_CONTROL.sub("\ufffd", str(text)), quote=True)


def signed(s: float) -> str:
    return ("+" if s >= 0 else "\u2212") + secs(abs(s))


def nice_step(span: float, target: int = 8) -> float:
    raw = max(span, 1e-3) / target
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)


class Axis:
    """The shared seconds axis: 0 .. end, mapped onto the plot area."""

    def __init__(self, end: float) -> None:
        self.end = max(end, 1e-3)
        self.step = nice_step(self.end)

    def x(self, t: float) -> float:
        return LEFT + max(0.0, min(t, self.end)) / self.end * PLOT

    def ticks(self) -> list[float]:
        n = int(self.end / self.step + 1e-9)
        return [i * self.step for i in range(n + 1)]

    def label(self, t: float) -> str:
        return f"{t:g}s" if self.step >= 1 else f"{t:.1f}s".replace(".0s", "s")


def phase_colour(name: str) -> str:
    i = PHASES.index(name) if name in PHASES else 0
    return PHASE_COLOURS[i % len(PHASE_COLOURS)]


def svg_open(height: float, label: str) -> str:
    return (f'<svg viewBox="0 0 {W} {height:.0f}" role="img" aria-label="{esc(label)}" '
            f'xmlns="http://www.w3.org/2000/svg"><defs><pattern id="hatch" width="6" height="6" '
            f'patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" '
            f'fill="#fee2e2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#fca5a5" stroke-width="3"/>'
            f'</pattern></defs>')


def phase_row(span: Span, i: int, y: float, axis: Axis, ghosts: list[Span], diff: float | None) -> str:
    x0, x1 = axis.x(span.start), axis.x(span.end)
    width = max(2.0, x1 - x0)
    colour = phase_colour(span.name)
    label_x = x0 + width + 4
    anchor = "start"
    if label_x > W - RIGHT - 60:
        label_x, anchor = x0 - 4, "end"
    out = [f'<g class="phase-row" data-phase="{esc(span.name)}" data-index="{i}">',
           f'<text x="{LEFT - 6}" y="{y + 14}" text-anchor="end">{esc(span.name)}</text>',
           f'<rect class="phase-bar" data-phase="{esc(span.name)}" data-start="{span.start:.3f}" '
           f'data-end="{span.end:.3f}" x="{x0:.1f}" y="{y + 2}" width="{width:.1f}" height="14" rx="2" '
           f'fill="{colour}"><title>{esc(span.name)}: {esc(secs(span.start))} to {esc(secs(span.end))} '
           f'({esc(secs(span.duration))}, from {esc(span.source)})</title></rect>',
           f'<text x="{label_x:.1f}" y="{y + 14}" text-anchor="{anchor}" class="small duration">'
           f'{esc(secs(span.duration))}</text>']
    out += [ghost(g, y + 18, axis) for g in ghosts]
    if diff is not None:
        base = sum(g.duration for g in ghosts)
        notable = abs(diff) > max(0.05, 0.1 * base)  # small wobbles stay grey
        cls = "small" if not notable else "slower" if diff > 0 else "faster"
        out.append(f'<text x="{W - RIGHT + 6}" y="{y + 14}" class="{cls} diff">{esc(signed(diff))}</text>')
    out.append("</g>")
    return "".join(out)


def ghost(s: Span, y: float, axis: Axis) -> str:
    x0, x1 = axis.x(s.start), axis.x(s.end)
    return (f'<rect class="ghost-bar" data-phase="{esc(s.name)}" x="{x0:.1f}" y="{y}" width="{max(2.0, x1 - x0):.1f}" '
            f'height="5"><title>baseline {esc(s.name)}: {esc(secs(s.duration))}</title></rect>')


def marker_row(kind: str, label: str, t: float, y: float, axis: Axis) -> str:
    x = axis.x(t)
    if kind == "generation":
        shape = (f'<path class="marker generation" d="M{x:.1f},{y + 1} l3,6 6,1 -4.5,4 1,6.5 -5.5,-3 -5.5,3 1,-6.5 '
                 f'-4.5,-4 6,-1 z" fill="#15803d"/>')
        name = "first generation"
    else:
        colour = "#2563eb" if kind == "level" else "#0d9488"
        shape = f'<path class="marker {kind}" d="M{x:.1f},{y + 3} l6,6 -6,6 -6,-6 z" fill="{colour}"/>'
        name = label if kind == "level" else "engine says ready"
    text_x, anchor = (x + 9, "start") if x < W - RIGHT - 200 else (x - 9, "end")
    detail = f"{secs(t)}" + (f": {label}" if kind == "generation" else "")
    return (f'<g class="marker-row" data-kind="{esc(kind)}" data-label="{esc(name)}">'
            f'<text x="{LEFT - 6}" y="{y + 14}" text-anchor="end">{esc(name)}</text>'
            f'<line class="grid" x1="{LEFT}" x2="{x:.1f}" y1="{y + 9}" y2="{y + 9}" stroke-dasharray="2 3"/>{shape}'
            f'<text x="{text_x:.1f}" y="{y + 14}" text-anchor="{anchor}" class="small">{esc(detail)}</text></g>')


def grid(axis: Axis, y0: float, y1: float, label_y: float | None = None) -> str:
    out = []
    for t in axis.ticks():
        x = axis.x(t)
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{y1}"/>')
        if label_y is not None:
            out.append(f'<text x="{x:.1f}" y="{label_y:.0f}" text-anchor="middle" class="small tick">'
                       f'{esc(axis.label(t))}</text>')
    return "".join(out)


def window(w: Window, axis: Axis, y0: float, y1: float, label: bool = False) -> str:
    x0, x1 = axis.x(w.start), axis.x(w.end)
    out = (f'<g class="window-group" data-window="{esc(w.label)}"><rect class="window" x="{x0:.1f}" y="{y0}" '
           f'width="{max(1.0, x1 - x0):.1f}" height="{y1 - y0}"><title>{esc(w.label)}: {esc(secs(w.start))} to '
           f'{esc(secs(w.end))}</title></rect><line class="window-edge" x1="{x0:.1f}" x2="{x0:.1f}" y1="{y0}" '
           f'y2="{y1}"/>')
    if label:
        out += (f'<text x="{min(x0 + 4, W - RIGHT - 4):.1f}" y="{y0 - 4}" class="small slower">{esc(w.label)} for '
                f'{esc(secs(w.end - w.start))}</text>')
    return out + "</g>"


def chart(c: Chart, axis: Axis, windows: Iterable[Window]) -> str:
    top, bottom = 8, CHART_H - 18
    values = [v for s in c.series for _, v in s.points]
    y_max = c.y_max if c.y_max is not None else nice_max(max(values, default=0.0))

    def y(v: float) -> float:
        return bottom - (max(0.0, v) / y_max) * (bottom - top) if y_max > 0 else bottom

    body = [svg_open(CHART_H, c.title), "".join(window(w, axis, top, bottom) for w in windows),
            grid(axis, top, bottom, CHART_H - 4),
            f'<line class="axis" x1="{LEFT}" x2="{W - RIGHT}" y1="{bottom}" y2="{bottom}"/>',
            f'<text x="{LEFT - 6}" y="{top + 10}" text-anchor="end" class="small">{esc(fmt(y_max))} {esc(c.unit)}'
            f'</text><text x="{LEFT - 6}" y="{bottom}" text-anchor="end" class="small">0</text>',
            f'<text x="{LEFT - 6}" y="{(top + bottom) / 2 + 4:.0f}" text-anchor="end">{esc(c.title)}</text>']
    for i, s in enumerate(c.series):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        peak = max((v for _, v in s.points), default=0.0)
        title = f"<title>{esc(s.name)}: peak {esc(fmt(peak))} {esc(c.unit)}</title>"
        if c.style == "bars":
            w = max(1.0, PLOT / max(1.0, axis.end) * 0.8)
            bars = "".join(f'<rect x="{axis.x(t):.1f}" y="{y(v):.1f}" width="{w:.1f}" height="{bottom - y(v):.1f}"/>'
                           for t, v in s.points)
            body.append(f'<g class="series" data-series="{esc(s.name)}" fill="{colour}">{title}{bars}</g>')
        elif s.points:
            d = path(s.points, axis, y, step=c.style == "step")
            body.append(f'<path class="series" data-series="{esc(s.name)}" d="{d}" fill="none" stroke="{colour}" '
                        f'stroke-width="1.6" stroke-linejoin="round">{title}</path>')
    legend = ""
    if len(c.series) > 1:
        legend = '<div class="legend">' + "".join(
            f'<span style="--c:{SERIES_COLOURS[i % len(SERIES_COLOURS)]}">{esc(s.name)}</span>'
            for i, s in enumerate(c.series)) + "</div>"
    return f'<div class="chart" data-chart="{esc(c.key)}">{"".join(body)}</svg>{legend}</div>'


def path(points: list[tuple[float, float]], axis: Axis, y: Any, step: bool) -> str:
    out = []
    prev_y = None
    for i, (t, v) in enumerate(points):
        x, yy = axis.x(t), y(v)
        if i == 0:
            out.append(f"M{x:.1f},{yy:.1f}")
        elif step:
            out.append(f"H{x:.1f}V{yy:.1f}" if prev_y is not None else f"L{x:.1f},{yy:.1f}")
        else:
            out.append(f"L{x:.1f},{yy:.1f}")
        prev_y = yy
    if step and points:
        out.append(f"H{axis.x(axis.end):.1f}")
    return "".join(out)


def nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    step = nice_step(v, 4)
    return step * (int(v / step) + 1)


def fmt(v: float) -> str:
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.2f}".rstrip("0").rstrip(".")
