"""The live dashboard on a terminal: what the start is doing, redrawn at most twice a second.

Phases so far with their durations, the weights bar with the read rate and ETA, a memory bar per GPU, the
process tree (workers, CPU, RSS), the readiness ladder and the server's last log line. It replaces the
console reporter's one-line status on a terminal; the event lines (phase, level, warnings, the verdict)
still scroll above it. Plain lines are printed instead when stderr is not a terminal, with ``--plain`` or
with ``--json`` (the CLI chooses).

Cost: reporters are called from the session loop many times a second; here they only store what they are
told (under a lock). Drawing happens on rich's refresh thread, at ``refresh_per_second`` (2), from that state.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from firstlight.assessment import Assessment, Event
from firstlight.formats import duration, size
from firstlight.report.console import ConsoleReporter
from firstlight.timeline import GpuSample, Level, LogLine, Observation, ProcessSample
from firstlight.vocab import PHASE_INDEX

REFRESH_PER_SECOND = 2.0
LEVELS = [lv for lv in Level if lv is not Level.NONE]
_VERDICT_STYLE = {"ready": "bold green", "failed": "bold red", "hung": "bold red", "timeout": "bold yellow",
                  "interrupted": "yellow", "starting": "cyan"}


@dataclass
class GpuRow:
    index: int
    name: str
    used: int
    total: int
    util: float | None


@dataclass
class DashboardState:
    """What the dashboard shows, as told by the session (no clocks: ``now`` comes with each assessment)."""

    t0: float | None = None
    engine: str = "?"
    url: str = ""
    pid: int | None = None
    phases: list[tuple[str, float]] = field(default_factory=list)  # (name, start epoch)
    levels: dict[str, float] = field(default_factory=dict)  # label -> epoch when reached
    assessment: Assessment | None = None
    gpus: list[GpuRow] = field(default_factory=list)
    workers: int = 0
    procs: int = 0
    last_log: tuple[float, str] | None = None

    def started(self, info: dict[str, Any]) -> None:
        self.t0 = info["started_at"]
        self.engine, self.url, self.pid = info.get("engine") or "?", info.get("url") or "", info.get("pid")
        self.phases = [("process_start", self.t0)] if self.t0 is not None else []

    def event(self, ev: Event) -> None:
        if ev.type == "phase":
            if ev.data.get("relabel") and self.phases and self.phases[-1][0] == ev.data["relabel"]:
                self.phases[-1] = (ev.message, self.phases[-1][1])  # the same span, renamed from where it began
            else:
                self.phases.append((ev.message, ev.t))
        elif ev.type == "level":
            self.levels.setdefault(ev.message, ev.t)
        elif ev.type == "lost":
            for lv in LEVELS:
                if lv >= Level.parse(ev.message):
                    self.levels.pop(lv.label, None)

    def observe(self, obs: Observation) -> None:
        if isinstance(obs, GpuSample):
            self.gpus = [GpuRow(d.index, d.name, d.memory_used, d.memory_total, d.utilization) for d in obs.devices]
        elif isinstance(obs, ProcessSample) and obs.alive:
            self.procs = len(obs.procs)
            self.workers = max(0, self.procs - 1)
        elif isinstance(obs, LogLine):
            self.last_log = (obs.t, obs.text)

    def signature(self) -> tuple[Any, ...]:
        """What the picture depends on, coarsely: a redraw is needed only when this changes (cheap to compute,
        unlike a redraw)."""
        a = self.assessment
        shown: tuple[Any, ...] = ()
        if a is not None:
            p = a.progress
            shown = (a.verdict, a.phase, int(a.level), a.engine_ready, int(a.elapsed_s),
                     None if p.weights_fraction is None else round(p.weights_fraction * 100),
                     round((p.read_rate or 0) / 1e6), None if p.eta_weights_s is None else int(p.eta_weights_s),
                     p.procs, round((p.cpu_cores or 0) * 100), p.rss_bytes >> 20)
        gpus = tuple((g.used >> 26, g.util) for g in self.gpus)
        return (len(self.phases), len(self.levels), self.procs, gpus, self.last_log, *shown)

    @property
    def now(self) -> float | None:
        a = self.assessment
        return None if a is None or self.t0 is None else self.t0 + a.elapsed_s


def render(state: DashboardState, width: int = 100) -> RenderableType:
    """The dashboard as a rich renderable (pure: the same state draws the same picture)."""
    a = state.assessment
    grid = Table.grid(padding=(0, 1), expand=False)
    grid.add_column(style="bold", no_wrap=True, width=10)
    grid.add_column(overflow="ellipsis", no_wrap=True, max_width=max(20, width - 12))
    grid.add_row("firstlight", _head(state))
    grid.add_row("phases", _phases(state))
    p = a.progress if a is not None else None
    bar_width = max(10, min(40, width - 70))
    if a is not None and p is not None and PHASE_INDEX.get(a.phase, 0) > PHASE_INDEX["weights_loading"]:
        # The engine says its weights are loaded: no ETA, whatever the disk said (a model in the page cache
        # is mapped, hardly read).
        read = f"; {size(p.read_bytes)} read from disk" if p.read_bytes else ""
        grid.add_row("weights", _bar_line(1.0, bar_width, f"loaded{read}"))
    elif p is not None and p.weights_fraction is not None:
        grid.add_row("weights", _bar_line(p.weights_fraction, bar_width, _weights_text(a)))
    for g in state.gpus:
        frac = g.used / g.total if g.total else 0.0
        util = f"  util {g.util:.0f}%" if g.util is not None else ""
        grid.add_row(f"GPU {g.index}", _bar_line(frac, bar_width, f"{size(g.used)} / {size(g.total)}{util}"))
    if not state.gpus and p is not None and p.gpu_memory_bytes is not None:
        grid.add_row("GPUs", Text(f"{size(p.gpu_memory_bytes)} used"))
    if p is not None and (state.procs or p.procs):
        procs = state.procs or p.procs
        cpu = "?" if p.cpu_cores is None else f"{p.cpu_cores * 100:.0f}%"
        grid.add_row("tree", Text(f"{procs} process{'es' if procs != 1 else ''} ({max(0, procs - 1)} workers)  "
                                  f"CPU {cpu}  RSS {size(p.rss_bytes)}"))
    grid.add_row("levels", _levels(state))
    if state.last_log is not None:
        t, text = state.last_log
        ago = "" if state.now is None else f"[{duration(state.now - t)} ago] "
        grid.add_row("log", Text(ago + text, style="dim"))
    return grid


def _head(state: DashboardState) -> Text:
    a = state.assessment
    verdict = "waiting" if a is None else a.verdict
    shown = verdict
    if a is not None and verdict == "starting":
        shown = "engine says ready, confirming" if a.engine_ready else "progressing"
    t = Text(f"{state.engine}  {state.url}" + (f"  pid {state.pid}" if state.pid else "") + "  ")
    if a is not None:
        t.append(f"{duration(a.elapsed_s)}  ")
    t.append(shown, style=_VERDICT_STYLE.get(verdict, ""))
    if a is not None and a.progress.eta_total_s is not None and verdict == "starting":
        t.append(f"  ready ETA {duration(a.progress.eta_total_s)}")
    return t


def _phases(state: DashboardState) -> Text:
    t = Text()
    now = state.now
    for i, (name, start) in enumerate(state.phases):
        end = state.phases[i + 1][1] if i + 1 < len(state.phases) else now
        current = i == len(state.phases) - 1
        if i:
            t.append(" > ", style="dim")
        t.append(name, style="bold cyan" if current else "")
        if end is not None:
            t.append(f" {duration(end - start)}" + ("…" if current and name != "ready" else ""), style="dim")
    return t


def _weights_text(a: Assessment | None) -> str:
    assert a is not None
    p = a.progress
    parts = [f"{p.weights_fraction * 100:.0f}%" if p.weights_fraction is not None else "?"]
    if p.eta_weights_s is not None and (p.weights_fraction or 0) < 1:
        parts.append(f"ETA {duration(p.eta_weights_s)}")
    if p.read_rate:
        parts.append(f"{size(p.read_rate)}/s")
    if p.weights_bytes and p.weights_source == "disk":
        parts.append(f"{size(p.read_bytes)} / {size(p.weights_bytes)}")
    if p.shard is not None:
        parts.append(f"shard {p.shard[0]}/{p.shard[1]}")
    return "  ".join(parts)


def _bar_line(fraction: float, width: int, text: str) -> Table:
    row = Table.grid(padding=(0, 1))
    row.add_column(width=width, no_wrap=True)
    row.add_column(no_wrap=True, overflow="ellipsis")
    row.add_row(ProgressBar(total=1.0, completed=max(0.0, min(1.0, fraction)), width=width), Text(text))
    return row


def _levels(state: DashboardState) -> Text:
    t = Text()
    held = state.assessment.level if state.assessment is not None else Level.NONE
    for lv in LEVELS:
        reached = state.levels.get(lv.label)
        if reached is not None or lv <= held:
            rel = "" if state.t0 is None or reached is None else f" {duration(reached - state.t0)}"
            t.append(f"✓ {lv.label}{rel}  ", style="green")
        else:
            t.append(f"· {lv.label}  ", style="dim")
    return t


class Dashboard:
    """The live renderable: draws the current state each time rich refreshes."""

    def __init__(self, state: DashboardState, lock: threading.Lock) -> None:
        self.state = state
        self.lock = lock
        self.renders = 0

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        with self.lock:
            self.renders += 1
            yield render(self.state, options.max_width)


class DashboardReporter(ConsoleReporter):
    """The console reporter's event lines, with the dashboard as the live part on a terminal."""

    def __init__(self, stream: IO[str] | None = None, echo_server: bool = True,
                 refresh_per_second: float = REFRESH_PER_SECOND) -> None:
        super().__init__(stream, live=False, echo_server=echo_server)
        self.tty = True
        self.console = Console(file=self.stream, force_terminal=True, highlight=False, soft_wrap=True)
        self.state = DashboardState()
        self._state_lock = threading.Lock()
        self.board = Dashboard(self.state, self._state_lock)
        self.period = 1.0 / refresh_per_second
        self._live = Live(self.board, console=self.console, refresh_per_second=refresh_per_second,
                          auto_refresh=False, transient=True, redirect_stdout=False, redirect_stderr=False)
        self._live.start(refresh=True)
        self._closed = threading.Event()
        self._drawn: tuple[Any, ...] | None = None
        self._refresher = threading.Thread(target=self._refresh_loop, name="firstlight-dashboard", daemon=True)
        self._refresher.start()

    def _refresh_loop(self) -> None:
        """At most ``refresh_per_second`` redraws, and none while nothing shown has changed."""
        while not self._closed.wait(self.period):
            with self._state_lock:
                sig = self.state.signature()
            live = self._live
            if sig != self._drawn and live is not None:
                self._drawn = sig
                live.refresh()

    def close(self) -> None:
        self._closed.set()
        self._refresher.join(timeout=2.0)
        super().close()

    def started(self, info: dict[str, Any]) -> None:
        with self._state_lock:
            self.state.started(info)
        super().started(info)

    def event(self, ev: Event, a: Assessment) -> None:
        with self._state_lock:
            self.state.event(ev)
            self.state.assessment = a
        super().event(ev, a)

    def status(self, a: Assessment) -> None:
        with self._state_lock:
            self.state.assessment = a

    def observe(self, obs: Observation) -> None:
        with self._state_lock:
            self.state.observe(obs)

    def server_line(self, stream: str, text: str) -> None:
        with self._state_lock:
            self.state.last_log = (time.time(), text)
        super().server_line(stream, text)
