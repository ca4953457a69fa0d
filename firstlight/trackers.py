"""What the judge follows: the server's log, the process tree (compiler runs among it) and the GPUs with the
sources' notes, the last progress marks, the readiness ladder, the start's progress and ETA, and the known answer.
Each tracker keeps its own state and says what an observation meant (a progress mark, a busy-wait hint, a warning,
how far the weights are, what a slow generation overlapped, whether the answer is the known one); the judge weighs
that with the verdict rules (``firstlight.judge``). The phases are kept by ``firstlight.phases``."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from firstlight.anatomy import Signals
from firstlight.answers import Comparison, compare, shown
from firstlight.assessment import Event, Evidence, Progress
from firstlight.budgets import QuietTracker
from firstlight.config import JudgeConfig
from firstlight.cputime import rate_reaches
from firstlight.engines.profile import EngineProfile
from firstlight.formats import gb, mb
from firstlight.interpret import LineInterpreter, Reading
from firstlight.logtext import one_line
from firstlight.timeline import (
    EngineClock,
    GpuSample,
    HubDownload,
    KnownAnswer,
    Level,
    LogLine,
    Probe,
    ProcessSample,
    SourceNote,
    Started,
    WeightsTotal,
)

# Compiler runs (torch.compile/Inductor, Triton, DeepGEMM and flashinfer JIT, nvcc) are evidence of a compile:
# strong progress, and reported as one aggregate, not a note per process.
COMPILERS = frozenset({"cc", "cc1", "cc1plus", "c++", "g++", "gcc", "clang", "clang++", "ld", "ld.lld", "ld.gold",
                       "collect2", "as", "nvcc", "ptxas", "cicc", "fatbinary", "nvlink", "ninja", "make"})
COMPILE_WINDOW_S = 60.0
_COMPILE_NOTE_EVERY_S = 30.0
_RATE_WINDOW_S = 10.0
_TAIL_LINES = 3  # last log lines quoted when a process dies without a log line naming why
# A generation probe in flight this long gets what the server did meanwhile attached to it.
SLOW_PROBE_S = 5.0


def clip(text: str, n: int = 240) -> str:
    """A line as evidence quotes it: stripped, at most ``n`` characters."""
    text = text.strip()
    return text if len(text) <= n else text[: n - 1] + "…"


@dataclass
class Mark:
    t: float
    signal: str
    value: str


class MarkTracker:
    """The last progress, as the hung rule quotes it: the last strong mark (a new log line, bytes read, memory
    grown, a process, GPU memory moved, a level reached) and the last weak one (CPU or GPU busy); each mark is also
    told to the phases' silences (``QuietTracker``)."""

    def __init__(self, started_at: float, quiet: QuietTracker) -> None:
        self.quiet = quiet
        self.last_strong = Mark(started_at, "watch", "firstlight started watching")
        self.last_weak: Mark | None = None

    def strong(self, t: float, signal: str, value: str) -> None:
        self.quiet.mark(t, signal, strong=True)
        if t >= self.last_strong.t:
            self.last_strong = Mark(t, signal, value)

    def weak(self, t: float, signal: str, value: str) -> None:
        self.quiet.mark(t, "cpu" if signal == "cpu" else "gpu_util", strong=False)
        self.last_weak = Mark(t, signal, value)


class LogTracker:
    """The server's log, line by line: the one interpretation of each line (``firstlight.interpret``, shared with
    replay), the last lines (a crash's evidence), when progress lines came (what a slow generation overlapped),
    the engine's progress bars, and what the anatomy keeps of the lines (compile-cache, engine-clock, version and
    peer-load lines, downloads)."""

    def __init__(self, profile: EngineProfile, signals: Signals, progress: ProgressTracker) -> None:
        self.lines = LineInterpreter(profile)
        self.signals = signals
        self.progress = progress
        self.count = 0
        self.last: LogLine | None = None
        self._tail: deque[LogLine] = deque(maxlen=_TAIL_LINES)
        self._recent: deque[float] = deque(maxlen=4096)  # arrival times of progress lines

    def feed(self, line: LogLine) -> tuple[Reading, str | None]:
        """The line's reading, and the progress mark to quote (a startup line or a progress bar), if any. A bar's
        redraw (not final) moves the phase and the bar only."""
        self.count += 1
        self.last = line
        r = self.lines.feed(line.text, line.t, final=line.final, lineno=line.lineno or None)
        mark = None
        if line.final:
            if r.progress_line:
                self._tail.append(line)
                self._recent.append(line.t)
                mark = clip(line.text)
            if r.compile_cache is not None:
                self.signals.compile_line(line.t, *r.compile_cache, r.text)
            if r.engine_clock is not None:
                marker, seconds = r.engine_clock
                self.signals.engine_clock(EngineClock(line.t, "log", marker.stage, marker.phases, seconds,
                                                      text=clip(line.text, 200)))
            if r.start_line is not None:
                self.signals.start_line(line.t, *r.start_line)
        p = r.match.progress
        if p is not None:
            self.progress.progress_line(line.t, clip(line.text, 120), p.kind, p.done, p.total, p.fraction)
            if p.kind == "download":
                self.signals.downloads.append(line.t)
            mark = clip(line.text)
        return r, mark

    def lines_between(self, t0: float, t1: float) -> int:
        """Progress lines that arrived in [t0, t1]."""
        return sum(1 for t in self._recent if t0 <= t <= t1)

    def tail_evidence(self) -> list[Evidence]:
        return [Evidence("log", f"last line {ln.lineno}: {clip(ln.text)}", ln.t) for ln in self._tail]


class CompileTracker:
    """Compiler processes seen in the tree, counted over the last ``COMPILE_WINDOW_S``."""

    def __init__(self) -> None:
        self._runs: deque[tuple[float, str]] = deque(maxlen=4096)  # (t, name) of compiler runs seen
        self._noted = float("-inf")

    def ran(self, t: float, name: str) -> str:
        """One compiler run: what to quote as the latest progress."""
        self._runs.append((t, name))
        return f"compiler run ({name}): {self.runs(t)} in the last {COMPILE_WINDOW_S:.0f}s"

    def runs(self, now: float) -> int:
        return sum(1 for t, _ in self._runs if now - t <= COMPILE_WINDOW_S)

    def runs_between(self, t0: float, t1: float) -> int:
        return sum(1 for t, _ in self._runs if t0 <= t <= t1)

    def note(self, t: float) -> list[Event]:
        """One aggregate line about compiler children, at most every 30 s."""
        if not self._runs or t - self._noted < _COMPILE_NOTE_EVERY_S:
            return []
        self._noted = t
        n = self.runs(t)
        return [Event(t, "note", f"compiling: {n} compiler runs in the last {COMPILE_WINDOW_S:.0f}s",
                      {"compiler_runs": n})]


@dataclass
class GpuReading:
    """What one GPU sample meant: memory that moved (strong progress), utilisation (weak: a busy-wait looks the
    same), and GPUs held by processes outside the server's tree (warnings, each once)."""

    strong: str | None = None
    weak: str | None = None
    foreign: list[tuple[Evidence, dict[str, int]]] = field(default_factory=list)


class GpuTracker:
    def __init__(self, mem_step_bytes: int) -> None:
        self.mem_step_bytes = mem_step_bytes
        self.last: GpuSample | None = None
        self._prev: dict[int, int] = {}  # device -> memory used at the last step that counted
        self._util: deque[tuple[float, float]] = deque(maxlen=600)  # (t, mean utilisation)
        self._foreign_reported: set[tuple[int, int]] = set()

    def feed(self, g: GpuSample, tree: set[int]) -> GpuReading:
        r = GpuReading()
        for d in g.devices:
            before = self._prev.get(d.index)
            if before is not None and abs(d.memory_used - before) >= self.mem_step_bytes:
                r.strong = f"GPU {d.index} memory {gb(before)} -> {gb(d.memory_used)}"
                self._prev[d.index] = d.memory_used
            elif before is None:
                self._prev[d.index] = d.memory_used
            if d.utilization:
                r.weak = f"GPU {d.index} utilisation {d.utilization:.0f}%"
        utils = [d.utilization for d in g.devices if d.utilization is not None]
        if utils:
            self._util.append((g.t, sum(utils) / len(utils)))
        if tree:
            for gp in g.processes:
                key = (gp.gpu, gp.pid)
                if gp.pid not in tree and key not in self._foreign_reported:
                    self._foreign_reported.add(key)
                    mem = "" if gp.memory_used is None else f" ({gb(gp.memory_used)})"
                    ev = Evidence("gpu", f"GPU {gp.gpu} held by PID {gp.pid} {gp.name}{mem}, "
                                         f"outside the server's process tree", g.t)
                    r.foreign.append((ev, {"gpu": gp.gpu, "pid": gp.pid}))
        self.last = g
        return r

    def mean_util_between(self, t0: float, t1: float) -> float | None:
        gpu = [u for t, u in self._util if t0 <= t <= t1]
        return sum(gpu) / len(gpu) if gpu else None


@dataclass
class ProcessReading:
    """What one sample of a living process tree meant: progress marks in the order seen ((signal, value): bytes
    read, memory grown, compiler runs, new processes), busy CPU (weak: a busy-wait looks the same), the CPU
    seconds of compilers that ended (for the anatomy), warnings and notes."""

    strong: list[tuple[str, str]] = field(default_factory=list)
    weak: str | None = None
    compiler_cpu: list[float] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    warnings: list[Evidence] = field(default_factory=list)


class ProcessTracker:
    """The server's process tree, sample by sample: reads, memory, CPU, processes that appear, die, sleep in D
    state or linger as zombies; and the rates over the last ``_RATE_WINDOW_S``."""

    def __init__(self, rules: JudgeConfig, compiles: CompileTracker) -> None:
        self.rules = rules
        self.compiles = compiles
        self.prev: ProcessSample | None = None  # the last sample (alive or the exit)
        self.window: list[ProcessSample] = []
        self.read_base: int | None = None  # bytes the tree had read when first seen
        self.known_pids: set[int] = set()
        self._rss_mark = 0
        self._cpu_points: deque[tuple[float, float]] = deque(maxlen=600)  # (t, tree CPU seconds)
        self._d_since: dict[int, float] = {}
        self._d_reported: set[int] = set()
        self._zombies_reported: set[int] = set()
        self._zombie_since: dict[int, float] = {}  # pid -> when first seen a zombie

    def feed(self, s: ProcessSample) -> ProcessReading:
        """A sample of the living tree (the judge takes an exit itself)."""
        r = ProcessReading()
        prev, rules = self.prev, self.rules
        if self.read_base is None:
            self.read_base = s.read_bytes
            self._rss_mark = s.rss_bytes
        if prev is not None and prev.alive:
            if s.read_bytes - prev.read_bytes >= rules.io_step_bytes:
                r.strong.append(("disk", f"{mb(s.read_bytes - prev.read_bytes)} read since the last sample"))
            if s.rss_bytes - self._rss_mark >= rules.rss_step_bytes:
                r.strong.append(("memory", f"RSS grew to {gb(s.rss_bytes)}"))
                self._rss_mark = s.rss_bytes
            elif s.rss_bytes < self._rss_mark:
                self._rss_mark = s.rss_bytes
            dt = s.t - prev.t
            if dt > 0 and rate_reaches(s.cpu_seconds - prev.cpu_seconds, dt, rules.cpu_busy_cores):
                r.weak = f"CPU busy at {(s.cpu_seconds - prev.cpu_seconds) / dt * 100:.0f}% of a core"
        self._cpu_points.append((s.t, s.cpu_seconds))
        self._new_processes(s, r)
        for d in s.died:
            if d.name in COMPILERS:
                r.compiler_cpu.append(d.cpu_seconds)
            if d.name in COMPILERS and d.pid not in self.known_pids:
                r.strong.append(("process", self.compiles.ran(s.t, d.name)))  # began and ended between samples
                self.known_pids.add(d.pid)
            if s.t - d.started < rules.worker_min_age_s or d.name in COMPILERS:
                continue  # a short-lived helper (a compiler, nvidia-smi) finishing is normal
            self._warn(r, Evidence("process", f"child {d.name}[{d.pid}] died while the server process lives", s.t),
                       d.pid, s.t)
        for p in s.procs:
            if p.state == "disk-sleep":
                since = self._d_since.setdefault(p.pid, s.t)
                if s.t - since >= rules.d_state_seconds and p.pid not in self._d_reported:
                    self._d_reported.add(p.pid)
                    self._warn(r, Evidence("process", f"{p.name}[{p.pid}] in state D (uninterruptible I/O wait) "
                                                      f"for {s.t - since:.0f}s", since), p.pid, s.t)
            else:
                self._d_since.pop(p.pid, None)
                self._d_reported.discard(p.pid)
        self._zombies(s, r)
        self.prev = s
        self.window.append(s)
        while len(self.window) > 2 and s.t - self.window[1].t >= _RATE_WINDOW_S:
            self.window.pop(0)
        return r

    def _zombies(self, s: ProcessSample, r: ProcessReading) -> None:
        """A child that exited and stays unreaped for ``zombie_seconds``: its parent is not waiting for it (hung,
        or never calls wait()). Once per process; a zombie reaped at once (the normal case) is never reported."""
        now = {p.pid: p for p in (*s.zombies, *(p for p in s.procs if p.state == "zombie"))}
        for pid in [pid for pid in self._zombie_since if pid not in now]:
            del self._zombie_since[pid]
        for pid, p in now.items():
            since = self._zombie_since.setdefault(pid, s.t)
            if s.t - since >= self.rules.zombie_seconds and pid not in self._zombies_reported:
                self._zombies_reported.add(pid)
                self._warn(r, Evidence("process", f"{p.name}[{pid}] is a zombie: exited, not reaped by its parent "
                                                  f"for {s.t - since:.0f}s", since), pid, s.t)

    def _warn(self, r: ProcessReading, ev: Evidence, pid: int, t: float) -> None:
        r.warnings.append(ev)
        r.events.append(Event(t, "warning", ev.value, {"pid": pid}))

    def _new_processes(self, s: ProcessSample, r: ProcessReading) -> None:
        new = [p for p in s.procs if p.pid not in self.known_pids]
        first = not self.known_pids
        self.known_pids |= {p.pid for p in new}
        if first or not new:
            return
        for p in new:
            if p.name in COMPILERS:
                r.strong.append(("process", self.compiles.ran(s.t, p.name)))
        others = [p for p in new if p.name not in COMPILERS]
        r.events += self.compiles.note(s.t)
        if others:
            names = ", ".join(f"{p.name}[{p.pid}]" for p in others)
            r.strong.append(("process", f"new process {names}"))
            r.events.append(Event(s.t, "note", f"new process in the tree: {names}"))

    def cpu_share_between(self, t0: float, t1: float) -> float | None:
        """The tree's CPU use between two times, in cores."""
        cpu = [(t, c) for t, c in self._cpu_points if t0 <= t <= t1]
        if len(cpu) >= 2 and cpu[-1][0] > cpu[0][0]:
            return (cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0])
        return None


class TreeTracker:
    """The server's process tree and the GPUs, as their samples come: who the server is (its PID, launched or
    attached), whether its tree can be watched at all and whether its sampler works (the sources' notes), each
    living sample read by the process tracker (compiler runs among it), each GPU sample by the GPU tracker. What
    they meant is marked as progress (``MarkTracker``), the compilers' CPU told to the anatomy, their warnings kept
    for every verdict's evidence. What an exit means is the judge's to say."""

    def __init__(self, rules: JudgeConfig, signals: Signals, marks: MarkTracker) -> None:
        self.signals = signals
        self.marks = marks
        self.compiles = CompileTracker()
        self.procs = ProcessTracker(rules, self.compiles)
        self.gpus = GpuTracker(rules.gpu_mem_step_bytes)
        self.pid: int | None = None
        self.launched = False
        # Only the process tree (its reads, memory, CPU) can tell a silent-but-loading server from a stuck one:
        # log silence or a flat GPU alone cannot, so without it firstlight never says "hung".
        self.has_stillness_signal = False
        # The process sampler's failure, while it lasts: its stillness is a missing signal, not a still server,
        # so no `hung` is judged from it; every verdict's evidence names it instead.
        self.process_failed: SourceNote | None = None
        self.warnings: list[Evidence] = []
        self.notes: list[SourceNote] = []

    def started(self, obs: Started) -> None:
        self.pid, self.launched = obs.pid, obs.launched
        if obs.pid is not None:
            self.has_stillness_signal = True

    def process(self, s: ProcessSample) -> list[Event]:
        """A sample of the living tree."""
        self.has_stillness_signal = True
        r = self.procs.feed(s)
        if r.weak is not None:
            self.marks.weak(s.t, "cpu", r.weak)
        for signal, value in r.strong:
            self.marks.strong(s.t, signal, value)
        for cpu in r.compiler_cpu:
            self.signals.compiler_ran(cpu)
        self.warnings += r.warnings
        return r.events

    def ended(self, s: ProcessSample) -> None:
        """The server's process is gone (how it died is the judge's to weigh): the last sample."""
        self.has_stillness_signal = True
        self.procs.prev = s

    def gpu(self, g: GpuSample) -> list[Event]:
        r = self.gpus.feed(g, self.procs.known_pids | ({self.pid} if self.pid else set()))
        if r.strong is not None:
            self.marks.strong(g.t, "gpu", r.strong)
        if r.weak is not None:
            self.marks.weak(g.t, "gpu", r.weak)
        events: list[Event] = []
        for ev, data in r.foreign:
            self.warnings.append(ev)
            events.append(Event(g.t, "warning", ev.value, data))
        return events

    def note(self, obs: SourceNote) -> list[Event]:
        """A source's note: a sampler failed, or works again."""
        self.notes.append(obs)
        if obs.source == "process":  # the process tree's sampler failed, or works again
            self.process_failed = obs if obs.failed else None
        return [Event(obs.t, "warning" if obs.failed else "note", f"{obs.source}: {obs.message}")]

    def activity_during(self, p: Probe, log: LogTracker) -> str | None:
        """What the server did while a generation probe was in flight (``SLOW_PROBE_S`` or longer), so a slow
        first request can be told from a stuck one."""
        t0 = p.t - (p.latency_s or 0.0)
        if p.t - t0 < SLOW_PROBE_S:
            return None
        return activity(t0, p.t, self.compiles, self.procs, self.gpus, log)

    def slow_generation(self, p: Probe, log: LogTracker) -> list[Event]:
        """A generation not answered yet after ``SLOW_PROBE_S``: a note of what the server did meanwhile."""
        meanwhile = self.activity_during(p, log)
        if meanwhile and (p.latency_s or 0) >= SLOW_PROBE_S:
            return [Event(p.t, "note", f"generation not answered after {p.latency_s or 0:.0f}s; meanwhile the "
                                       f"server: {meanwhile}")]
        return []


__all__ = ["COMPILERS", "COMPILE_WINDOW_S", "SLOW_PROBE_S", "CompileTracker", "GpuReading", "GpuTracker", "Mark",
           "MarkTracker", "ProcessReading", "ProcessTracker", "TreeTracker", "gb", "mb"]


class LadderTracker:
    """The readiness ladder as the probes climb it: the level that holds now, when each level was first reached,
    the last rung that failed, and the generations that answered wrong in a row. It says which levels a probe
    reached or lost; what that means (a phase, READY, a failure) is the judge's to say."""

    def __init__(self) -> None:
        self.level = Level.NONE
        self.since: dict[Level, float] = {}  # each level's first time reached
        self.last_failure: Probe | None = None
        self.bad_answers: list[Probe] = []  # definitive wrong answers of the generation rung, in a row

    def process_seen(self, t: float) -> None:
        """The server's process is alive: the lowest rung holds."""
        if self.level < Level.PROCESS:
            self.level = Level.PROCESS
            self.since.setdefault(Level.PROCESS, t)

    def held(self, p: Probe) -> list[Level]:
        """A rung held: the levels reached for the first time by it, lowest first."""
        new: list[Level] = []
        if p.level > self.level:
            for lv in Level:
                if self.level < lv <= p.level and lv not in self.since:
                    self.since[lv] = p.t
                    new.append(lv)
            self.level = p.level
        return new

    def failed(self, p: Probe, ready: bool) -> bool:
        """A rung failed: everything at and above it no longer holds (before READY). True when a level was lost."""
        self.last_failure = p
        lost = p.level <= self.level and not ready
        if lost:
            self.level = Level(p.level - 1)
        if p.level == Level.GENERATION:
            if p.state == "bad":
                self.bad_answers.append(p)
            else:
                self.bad_answers.clear()
        return lost


class ProgressTracker:
    """How far the start is, and when it will be done: the weights read (the process tree's bytes read against
    the weights' size on disk, else the engine's own shard bar), the last progress line, and the whole start's ETA
    from this deployment's history. It reads the other trackers; it decides nothing."""

    def __init__(self, started_at: float, expected_total_s: float | None) -> None:
        self.started_at = started_at
        self.expected_total_s = expected_total_s  # the whole-start estimate, from the history
        self.weights_total: WeightsTotal | None = None
        self.shard: tuple[int, int, float, float] | None = None  # done, total, fraction, when
        self.line: str | None = None  # the last progress line, clipped
        self.hub_first: HubDownload | None = None  # the model's hub-cache folder as first seen, and as last seen
        self.hub_last: HubDownload | None = None
        self._hub_window: deque[tuple[float, int]] = deque(maxlen=64)  # (t, bytes): the download's rate
        self.download_fraction: float | None = None  # the engine's download bar (pct), when it has one

    def hub(self, h: HubDownload) -> int:
        """The model's hub-cache folder sampled again: the bytes that arrived since the last sample (the first
        sample is the baseline: what was cached before)."""
        before = self.hub_last
        self.hub_first = self.hub_first or h
        self.hub_last = h
        self._hub_window.append((h.t, h.bytes))
        while len(self._hub_window) > 2 and h.t - self._hub_window[0][0] > _RATE_WINDOW_S:
            self._hub_window.popleft()
        return 0 if before is None else h.bytes - before.bytes

    def weights(self, w: WeightsTotal) -> list[Event]:
        """The weights' size on disk, once measured: said as a note."""
        self.weights_total = w
        return [Event(w.t, "note", f"weights: {gb(w.bytes)} in {w.files} files at {one_line(w.path)}")]

    def progress_line(self, t: float, text: str, kind: str, done: int | None, total: int | None,
                      fraction: float | None = None) -> None:
        """One of the engine's progress lines: a shard bar gives the weights' fraction when the reads cannot."""
        self.line = text
        if kind == "shards" and done is not None and total:
            self.shard = (done, total, done / total, t)
        elif kind == "download" and fraction is not None:
            self.download_fraction = fraction

    def progress(self, now: float, procs: ProcessTracker, gpus: GpuTracker, last_log: LogLine | None,
                 weights_started: float) -> Progress:
        """The progress at ``now``; ``weights_started``: when the weights phase began (the shard bar's ETA)."""
        p = Progress()
        s = procs.prev
        if s is not None and s.alive:
            p.cpu_seconds, p.rss_bytes, p.procs = s.cpu_seconds, s.rss_bytes, len(s.procs)
        base = procs.read_base or 0
        if s is not None:
            p.read_bytes = max(0, s.read_bytes - base)
        win = procs.window
        if len(win) >= 2 and win[-1].t > win[0].t:
            dt = win[-1].t - win[0].t
            p.read_rate = max(0, win[-1].read_bytes - win[0].read_bytes) / dt
            p.cpu_cores = max(0.0, win[-1].cpu_seconds - win[0].cpu_seconds) / dt
        total = self.weights_total
        if total is not None and total.bytes > 0:
            p.weights_bytes = total.bytes
            if p.read_bytes > 0:
                p.weights_fraction = min(1.0, p.read_bytes / total.bytes)
                p.weights_source = "disk"
                if p.read_rate and p.weights_fraction < 1.0:
                    p.eta_weights_s = (total.bytes - p.read_bytes) / p.read_rate
        if self.shard is not None:
            done, count, frac, t = self.shard
            p.shard = (done, count)
            if p.weights_fraction is None:
                p.weights_fraction, p.weights_source = frac, "log"
                elapsed = t - weights_started
                if 0 < frac < 1 and elapsed > 0:
                    p.eta_weights_s = max(0.0, elapsed / frac * (1 - frac) - (now - t))
        if total is not None and p.weights_fraction is not None and p.weights_fraction >= 1.0:
            p.eta_weights_s = 0.0
        p.progress_line = self.line
        self._download(p)
        if self.expected_total_s is not None:
            p.eta_total_s = max(0.0, self.expected_total_s - (now - self.started_at))
        if last_log is not None:
            p.since_last_log_s = max(0.0, now - last_log.t)
        g = gpus.last
        if g is not None and g.devices:
            p.gpu_memory_bytes = sum(d.memory_used for d in g.devices)
            utils = [d.utilization for d in g.devices if d.utilization is not None]
            p.gpu_util = sum(utils) / len(utils) if utils else None
        return p


    def _download(self, p: Progress) -> None:
        """The download's bytes and rate from the hub cache, its fraction from the engine's own bar."""
        first, last = self.hub_first, self.hub_last
        if first is not None and last is not None and (last.incomplete or last.bytes > first.bytes):
            p.download_bytes = max(0, last.bytes - first.bytes)
            p.download_file = last.file or None
            w = self._hub_window
            if len(w) >= 2 and w[-1][0] > w[0][0]:
                p.download_rate = max(0, w[-1][1] - w[0][1]) / (w[-1][0] - w[0][0])
        if self.download_fraction is not None:
            p.download_fraction = self.download_fraction


def activity(t0: float, t1: float, compiles: CompileTracker, procs: ProcessTracker, gpus: GpuTracker,
             log: LogTracker) -> str:
    """What the server did in [t0, t1], as the trackers saw it: JIT compiles, CPU, GPU, log lines."""
    parts = []
    runs = compiles.runs_between(t0, t1)
    if runs:
        parts.append(f"{runs} compiler runs")
    cores = procs.cpu_share_between(t0, t1)
    if cores is not None:
        parts.append(f"CPU {cores * 100:.0f}% of a core")
    gpu = gpus.mean_util_between(t0, t1)
    if gpu is not None:
        parts.append(f"GPU utilisation {gpu:.0f}%")
    parts.append(f"{log.lines_between(t0, t1)} log lines")
    return ", ".join(parts)




class AnswerTracker:
    """The known answer (``--known-answer check``): this deployment's answer before, from the history, and this
    start's first valid answer compared with it; the judge makes a different one ``wrong_answer``."""

    def __init__(self) -> None:
        self.known: KnownAnswer | None = None
        self.first: Probe | None = None  # the first valid answer: READY's, or the wrong one
        self.check: Comparison | None = None

    def know(self, known: KnownAnswer) -> list[Event]:
        """The reference, once per start (a second one is ignored): said as a note."""
        if self.known is not None:
            return []
        self.known = known
        run = f" (run {known.run})" if known.run is not None else ""
        return [Event(known.t, "note", f"known answer{run}: {shown(known.text, known.tokens, known.logprobs)}")]

    def differs(self, p: Probe) -> bool:
        """``p`` (a valid generation) against the known answer, the first one only: True when it differs."""
        if self.first is None:
            self.first = p
            if self.known is not None:
                self.check = compare(self.known, p)
        return self.check is not None and not self.check.same

    def wrong(self) -> tuple[list[Evidence], Comparison] | None:
        """Both answers and why they differ, as evidence, when the first answer is not the known one."""
        p, known, check = self.first, self.known, self.check
        if p is None or known is None or check is None or check.same:
            return None
        run = f"run {known.run}" if known.run is not None else "the history"
        return [Evidence("probe:generation", f"answer now: {shown(p.text, p.tokens, p.logprobs)}", p.t),
                Evidence("history", f"known answer ({run}): {shown(known.text, known.tokens, known.logprobs)}",
                         known.t if known.recorded_at is None else known.recorded_at),
                Evidence("known_answer", check.why, p.t)], check
