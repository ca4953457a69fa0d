"""Human output on stderr: a line per event, and a live status line on a terminal (a periodic one when not).

Plain text when stderr is not a terminal, so that journald, CI logs and ``tee`` get clean lines.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from firstlight.assessment import Assessment, Event
from firstlight.forecast import graded_line
from firstlight.formats import duration
from firstlight.logtext import one_line
from firstlight.report.anatomy_text import clock_lines, describe, human_lines
from firstlight.report.base import QuietReporter
from firstlight.report.format import status_line
from firstlight.result import RunResult
from firstlight.serving import ServingStatus

_STYLES = {"ready": "bold green", "regression": "bold yellow", "failed": "bold red", "hung": "bold red",
           "timeout": "bold yellow",
           "interrupted": "yellow", "warning": "yellow", "failure_line": "red", "phase": "cyan",
           "level": "blue", "engine_ready": "green", "lost": "yellow"}


class ConsoleReporter(QuietReporter):
    def __init__(self, stream: IO[str] | None = None, live: bool | None = None, status_interval: float = 10.0,
                 echo_server: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if live is None else live
        self.console = Console(file=self.stream, force_terminal=self.tty, no_color=not self.tty,
                               highlight=False, soft_wrap=True)
        self.status_interval = status_interval
        self.echo_server = echo_server
        self._lock = threading.Lock()
        self._last_status = 0.0
        self._live: Live | None = None
        self._t0: float | None = None
        self._shown: str | None = None  # the verdict already rendered
        self._vs_shown = False  # the anatomy's comparison with the baseline, shown once
        self._clock_shown = False  # the engine's own clock beside the anatomy, shown once (after the endpoints)
        if self.tty:
            self._live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()

    def _line(self, t: float | None, tag: str, text: str, style: str | None = None) -> None:
        rel = "" if t is None or self._t0 is None else f"[{duration(t - self._t0):>6}] "
        line = Text(rel)
        line.append(f"{tag:<8} ", style=style)
        line.append(text)
        with self._lock:
            if self.tty:
                self.console.print(line)
            else:
                self.stream.write(line.plain + "\n")
                self.stream.flush()

    def started(self, info: dict[str, Any]) -> None:
        self._t0 = info["started_at"]
        what = f"launched pid {info['pid']}" if info.get("launched") else (
            f"watching pid {info['pid']}" if info.get("pid") else "watching")
        self._line(self._t0, "start", one_line(f"{what}: engine {info['engine']}, url {info['url']}"
                                               + (f", command: {info['command']}" if info.get("command") else "")))

    def event(self, ev: Event, a: Assessment) -> None:
        tag = {"failure_line": "error", "engine_ready": "engine", "lost": "level"}.get(ev.type, ev.type)
        text = ev.message
        if ev.type == "phase":
            text = f"{ev.message}" + (" (from the readiness probes)" if ev.data.get("source") == "probe" else "")
            if ev.data.get("relabel"):
                text += f" (the {ev.data['relabel']} said before it had not begun: the weights are being fetched)"
        elif ev.type == "level":
            text = f"{ev.message} holds: {ev.data.get('detail', '')}"
        elif ev.type == "lost":
            text = f"{ev.message} no longer holds: {ev.data.get('detail', '')}"
        elif ev.type == "failure_line":
            where = f"line {ev.data['line']}: " if ev.data.get("line") is not None else ""  # a line without a number
            text = f"[{ev.data.get('category')}] {where}{ev.message}"
        self._line(ev.t, tag, text, _STYLES.get(ev.type))

    def status(self, a: Assessment) -> None:
        line = status_line(a)
        if self._live is not None:
            self._live.update(Text(line, style="dim"))
            return
        now = time.monotonic()
        if now - self._last_status >= self.status_interval:
            self._last_status = now
            self._line(None if self._t0 is None else self._t0 + a.elapsed_s, "status", line)

    def server_line(self, stream: str, text: str) -> None:
        if not self.echo_server:
            return
        with self._lock:
            if self.tty:
                self.console.print(Text(text, style="dim"))
            else:
                self.stream.write(text + "\n")
                self.stream.flush()

    def message(self, text: str) -> None:
        self._line(None, "firstlight", text)

    def verdict(self, result: RunResult) -> None:
        self._shown = result.verdict
        self._render(result)

    def summary(self, result: RunResult) -> None:
        vs = (result.anatomy or {}).get("vs_baseline")
        if vs and not self._vs_shown:  # the history's comparison comes after the verdict
            self._vs_shown = True
            self._line(None, "  anatomy", f"vs baseline: {vs['message']}")
        if result.engine_clock and not self._clock_shown:
            self._clock_shown = True
            for line in clock_lines(result.engine_clock):
                self._line(None, "  clock", line.strip())
        if self._shown != result.verdict:  # the verdict changed after it was shown (serving ended, regression)
            self._shown = result.verdict
            self._render(result)

    def serving(self, status: ServingStatus, changed: bool) -> None:
        if changed:
            ev = status.evidence[0]["value"] if status.evidence else ""
            self._line(status.since, status.state, f"{status.reason}" + (f" ({ev})" if ev else ""),
                       "bold green" if status.state == "serving" else "bold red" if not status.ready else "yellow")

    def _render(self, r: RunResult) -> None:
        end = r.ready_at or r.ended_at
        if r.serving and r.ready_at is not None:
            g = r.first_generation
            text = f"serving after {duration(r.ready_at - r.started_at)}: " + (
                f"first generation {g.get('text')!r} in {g.get('latency_s') or 0:.2f}s" if g is not None
                else f"a worker (it generates nothing itself): {_worker_seen(r)}")
            if r.regression:
                text += "; " + "; ".join(x.get("message", "") for x in r.regression)
        else:
            text = f"in phase {r.phase}"
            if r.detail:
                text += f" ({r.detail})"
            if r.failure:
                text += f": {r.failure}"
        self._line(end, r.verdict.upper(), text, _STYLES.get(r.verdict))
        for ev in r.evidence:
            since = "" if ev.get("since") is None or self._t0 is None else f" (at {duration(ev['since'] - self._t0)})"
            self._line(None, "  because", f"{ev['signal']}: {ev['value']}{since}")
        if r.hint:
            self._line(None, "  fix", r.hint)
        for note in r.notes:
            self._line(None, "  note", note)
        kind = describe(r.start_type)
        if kind and r.serving:
            self._line(None, "  start", kind)
        if r.eta and r.eta.get("note"):
            self._line(None, "  history", f"{r.eta['note']}: {r.eta['seconds']:.1f}s expected")
        graded = graded_line(r.forecast)
        if graded:
            self._line(None, "  forecast", graded)
        if r.anatomy and r.verdict != "interrupted":
            lines = human_lines(r.anatomy, r.verdict)
            # The tag already says "anatomy": the head line's own "anatomy" becomes "total" ("anatomy total: 1.5s").
            for i, line in enumerate(lines):
                self._line(None, "  anatomy", _anatomy_head(line) if i == 0 else line.strip())

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def _anatomy_head(line: str) -> str:
    """``anatomy: 1.5s`` -> ``total: 1.5s``; ``anatomy (reached X; ...): 9.0s`` -> ``(reached X; ...): 9.0s``."""
    rest = line.removeprefix("anatomy")
    return "total" + rest if rest.startswith(":") else rest.strip()


def _worker_seen(r: RunResult) -> str:
    """What made a worker READY: its port listening, or its connection to its head, as its evidence says."""
    seen = [str(e.get("value", "")) for e in r.evidence if e.get("signal") == "probe:port"]
    return seen[0].removeprefix("worker ready: ") if seen else "its port listens"
