"""The judge: a timeline of observations in, phase, verdict, evidence and ETA out.

Pure: no clocks, no I/O. ``feed`` takes observations in arrival order and returns the notable events they
caused (a phase began, a level was reached, a fatal line); ``assess(now)`` gives the verdict at ``now``.
Replaying a recorded timeline through a fresh Judge reproduces every verdict (tests/unit/judge/test_judge.py).
What each observation meant is the trackers' to say (``firstlight.trackers``: the log, the process tree, the GPUs,
the ladder, the progress); the judge weighs their readings with the verdict rules (``_verdict``). Each assessment
carries its time and the facts the rest of a run reads (READY, the weights, the engine's figures), so nothing past
the driver reaches inside.

Progress, for telling slow from hung:
- strong: a new log line (not an HTTP access line, which our own probes cause), bytes read by the process
  tree, memory (RSS) growing, shard/graph progress lines, GPU memory changing, a process appearing, a
  readiness level newly reached;
- weak: CPU time or GPU utilisation alone (a deadlocked NCCL init busy-waits at 100 %).
``hung`` means no progress at all for stall_timeout, or only weak progress for spin_timeout.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from firstlight.anatomy import Signals
from firstlight.assessment import Assessment, Event, Evidence, PhaseSpan, Progress
from firstlight.budgets import Budgets, PhaseBudget, phase_eta
from firstlight.config import JudgeConfig
from firstlight.deaths import CRASH_SIGNALS, KILLED_HINT, OOM_HOST_HINT, crash_hint, describe_exit, exit_signal
from firstlight.engines.profile import EngineProfile
from firstlight.formats import duration, gb
from firstlight.interpret import FailureHit, LineInterpreter, Reading
from firstlight.logtext import is_access_line, one_line
from firstlight.timeline import (
    EngineClock,
    GpuSample,
    Interrupted,
    KnownAnswer,
    Level,
    LogLine,
    Observation,
    PortConflict,
    Probe,
    ProcessSample,
    SourceNote,
    Started,
    WeightsTotal,
)
from firstlight.trackers import (
    AnswerTracker,
    CompileTracker,
    GpuTracker,
    LadderTracker,
    LogTracker,
    ProcessTracker,
    ProgressTracker,
    activity,
    clip,
)
from firstlight.vocab import (
    BAD_GENERATION,
    CATEGORY_RANK,
    FAILED,
    HUNG,
    INTERRUPTED,
    PHASE_INDEX,
    READY,
    STALL_HINTS,
    STARTING,
    TIMEOUT,
    WRONG_ANSWER,
)

__all__ = ["STALL_HINTS", "Assessment", "Event", "Evidence", "Judge", "PhaseSpan", "Progress", "is_access_line"]

# A fatal line with a generic category waits this long for a more specific root cause (the exception header
# comes before its traceback) unless the process exits first.
_FAILURE_SETTLE_S = 1.5
# A generation probe in flight this long gets what the server did meanwhile attached to it.
_SLOW_PROBE_S = 5.0
WRONG_ANSWER_HINT = ("the weights served are not the ones this deployment served before: a stale weight cache, a "
                     "different checkpoint, a quantization change; after a deliberate change, record the new answer "
                     "with --known-answer record")

@dataclass
class _Mark:
    t: float
    signal: str
    value: str


class Judge:
    """Feed it observations in order; ask it for the verdict at any moment."""

    def __init__(self, rules: JudgeConfig, profile: EngineProfile, started_at: float) -> None:
        self.rules = rules
        self.profile = profile
        self.started_at = started_at
        self.pid: int | None = None
        self.launched = False
        self.phases: list[PhaseSpan] = [PhaseSpan("process_start", started_at, source="start")]
        self.ladder = LadderTracker()  # the readiness levels that hold, and since when
        self.last_strong = _Mark(started_at, "watch", "firstlight started watching")
        self.last_weak: _Mark | None = None
        self.first_generation: dict[str, Any] | None = None
        self.ready_at: float | None = None
        self.worker_listening: str | None = None  # a worker's READY: what its port rung saw (no generation)
        self.engine_ready: LogLine | None = None
        self.fatal: FailureHit | None = None  # the first fatal line, with its arrival time
        self.log_ended: float | None = None  # replay: the log is over (the equivalent of the process exiting)
        self.compiles = CompileTracker()
        self.exited: ProcessSample | None = None
        self.interrupted: Interrupted | None = None
        self.port_conflict: PortConflict | None = None  # another server answers on our port: never our READY
        self.warnings: list[Evidence] = []
        self.notes: list[SourceNote] = []
        # Only the process tree (its reads, memory, CPU) can tell a silent-but-loading server from a stuck one:
        # log silence or a flat GPU alone cannot, so without it firstlight never says "hung".
        self.has_stillness_signal = False
        # The process sampler's failure, while it lasts: its stillness is a missing signal, not a still server,
        # so no `hung` is judged from it; every verdict's evidence names it instead.
        self.process_failed: SourceNote | None = None
        self.procs = ProcessTracker(rules, self.compiles)
        self.gpus = GpuTracker(rules.gpu_mem_step_bytes)
        self.progress_tracker = ProgressTracker(started_at, rules.expected_total_s)  # how far, and the ETAs
        self._final: Assessment | None = None
        self.signals = Signals()  # what the anatomy reads (firstlight.anatomy), from these same observations
        # The server's lines, read once (their interpretation is shared with replay): phase, progress, root cause.
        self.log = LogTracker(profile, self.signals, self.progress_tracker)
        self._clocks: tuple[EngineClock, ...] = ()  # the engine's figures as the last assessment gave them
        self.budgets: Budgets | None = None  # this deployment's learned phase budgets (its history), if any
        self.signals.quiet.enter("process_start", started_at)
        self.answers = AnswerTracker()  # the known answer (--known-answer check) and this start's first answer

    # -- feeding ---------------------------------------------------------------------------------------
    def feed(self, obs: Observation) -> list[Event]:
        self.signals.feed(obs)
        if isinstance(obs, LogLine):
            return self._on_log(obs)
        if isinstance(obs, Probe):
            return self._on_probe(obs)
        if isinstance(obs, ProcessSample):
            return self._on_process(obs)
        if isinstance(obs, GpuSample):
            return self._on_gpu(obs)
        if isinstance(obs, WeightsTotal):
            self.progress_tracker.weights_total = obs
            return [Event(obs.t, "note", f"weights: {gb(obs.bytes)} in {obs.files} files at {one_line(obs.path)}")]
        if isinstance(obs, Started):
            self.pid, self.launched = obs.pid, obs.launched
            if obs.pid is not None:
                self.has_stillness_signal = True
            return []
        if isinstance(obs, Interrupted):
            self.interrupted = self.interrupted or obs
            return []
        if isinstance(obs, KnownAnswer):
            return self._on_known_answer(obs)
        if isinstance(obs, PortConflict):
            if self.port_conflict is not None or self.ready_at is not None:
                return []
            self.port_conflict = obs
            return [Event(obs.t, "warning", f"the port is not the server's: {obs.detail}")]
        if isinstance(obs, SourceNote):
            self.notes.append(obs)
            if obs.source == "process":  # the process tree's sampler failed, or works again
                self.process_failed = obs if obs.failed else None
            return [Event(obs.t, "warning" if obs.failed else "note", f"{obs.source}: {obs.message}")]
        return []

    def _strong(self, t: float, signal: str, value: str) -> None:
        self.signals.quiet.mark(t, signal, strong=True)
        if t >= self.last_strong.t:
            self.last_strong = _Mark(t, signal, value)

    def _weak(self, t: float, signal: str, value: str) -> None:
        self.signals.quiet.mark(t, "cpu" if signal == "cpu" else "gpu_util", strong=False)
        self.last_weak = _Mark(t, signal, value)

    def use_profile(self, profile: EngineProfile) -> None:
        """The engine became known during the run (from its log lines or its endpoints)."""
        self.profile = profile
        self.log.lines.use_profile(profile)

    def expect_total(self, seconds: float | None) -> None:
        """The whole-start estimate (from this deployment's history), learnt once the engine is known."""
        self.progress_tracker.expected_total_s = seconds

    def use_budgets(self, budgets: Budgets | None) -> None:
        """The phase budgets learned from this deployment's earlier good starts of this start type."""
        self.budgets = budgets

    @property
    def lines(self) -> LineInterpreter:
        """The one interpretation of the server's lines (the log tracker's)."""
        return self.log.lines

    @property
    def last_log(self) -> LogLine | None:
        return self.log.last

    @property
    def log_lines(self) -> int:
        return self.log.count

    @property
    def level(self) -> Level:
        """The highest readiness level that holds now."""
        return self.ladder.level

    @property
    def level_since(self) -> dict[Level, float]:
        return self.ladder.since

    @property
    def bad_answers(self) -> list[Probe]:
        return self.ladder.bad_answers

    @property
    def last_probe_failure(self) -> Probe | None:
        return self.ladder.last_failure

    @property
    def expected_total_s(self) -> float | None:
        return self.progress_tracker.expected_total_s

    @property
    def weights_total(self) -> WeightsTotal | None:
        return self.progress_tracker.weights_total

    def _enter_phase(self, t: float, name: str, source: str, line: int | None = None) -> list[Event]:
        """Phases only move forward within one start (whatever moved them: a log line or a probe)."""
        current = self.phases[-1]
        if PHASE_INDEX[name] <= PHASE_INDEX[current.name]:
            return []
        current.end = t
        self.phases.append(PhaseSpan(name, t, source=source, line=line))
        self.signals.quiet.enter(name, t)
        return [Event(t, "phase", name, {"source": source, "line": line})]

    def _on_log(self, line: LogLine) -> list[Event]:
        r, mark = self.log.feed(line)
        if mark is not None:
            self._strong(line.t, "log", mark)
        events = self._log_phase(line, r)
        if not line.final:  # a bar's redraw moves the interpreter's phase: the start enters it there too
            return events
        if r.failure is not None:
            events.append(Event(line.t, "failure_line", clip(line.text),
                                {"category": r.failure.failure.category, "fatal": r.failure.failure.fatal,
                                 "line": r.line, "serving": r.serving}))
        if r.first_fatal and r.failure is not None and self.ready_at is None:
            self.fatal = r.failure
        if r.match.worker_ready and self.rules.role == "worker" and self.engine_ready is None:
            # a worker that serves no port (vLLM --headless) says its engines are up: its READY once its
            # connection to its head is seen (a server prints the same line long before it serves)
            self.engine_ready = line
            events.append(Event(line.t, "engine_ready", "the worker's engines report ready; confirming its "
                                                         "connection to its head"))
        if r.ready and self.engine_ready is None:
            self.engine_ready = line
            if self.rules.ready_from_log:
                self.ready_at = line.t
                return [*events, *self._enter_phase(line.t, "ready", "log", r.line)]
            events.append(Event(line.t, "engine_ready", "engine reports ready; confirming with a generation"))
        return events

    def _log_phase(self, line: LogLine, r: Reading) -> list[Event]:
        if r.phase is None or self.ready_at is not None or (r.phase == "ready" and not self.rules.ready_from_log):
            return []  # live, the engine's ready line is a claim: READY is the generation's to say
        return self._enter_phase(line.t, r.phase, "log", r.line)

    def end_of_log(self, t: float) -> None:
        """Replay: the log is over. Like a process exit, it settles a pending root cause and makes a log that
        stops inside an uncaught traceback a failure."""
        self.log_ended = t

    def _on_probe(self, p: Probe) -> list[Event]:
        if self.port_conflict is not None:  # whatever answers on the port is the other server: never our levels
            return []
        events: list[Event] = []
        if p.ok and p.level == Level.GENERATION and self.first_generation is None and self.answers.differs(p):
            why = self.answers.check.why if self.answers.check is not None else ""
            return [Event(p.t, "warning", f"the answer is not this deployment's known answer: {why}",
                          {"category": WRONG_ANSWER})]
        if p.ok:
            for lv in self.ladder.held(p):
                self._strong(p.t, f"probe:{lv.label}", f"{lv.label} reached")
                events.append(Event(p.t, "level", lv.label, {"detail": p.detail}))
            if p.level == Level.GENERATION and self.first_generation is None:
                self.first_generation = {"latency_s": p.latency_s, "text": p.text,
                                         "meanwhile": self.activity_during(p)}
                self.ready_at = p.t
                events += self._enter_phase(p.t, "ready", "probe")
            elif (p.level == Level.PORT and self.rules.role == "worker" and self.ready_at is None
                  and (not self.profile.worker_ready_markers or self.engine_ready is not None)):
                # a worker generates nothing itself: its port, seen listening (never connected to), is its READY;
                # one that serves no port: its engines' ready line, then its connection to its head, seen
                self.ready_at, self.worker_listening = p.t, p.detail
                events += self._enter_phase(p.t, "ready", "probe")
            elif (p.level == Level.HEALTH and self.engine_ready is None and self._before("warmup")
                  and self.profile.endpoints.health not in self.profile.endpoints.lying_while_loading):
                # the engine's health says it is up (Ollama's "/" says so before any model loads: not a phase)
                events += self._enter_phase(p.t, "warmup", "probe")
            elif (p.level in (Level.PORT, Level.HTTP) and self.rules.role != "worker"
                  and not self.profile.endpoints.listens_before_ready
                  and self._before("http_listening")):
                events += self._enter_phase(p.t, "http_listening", "probe")
            return events
        # A failed rung: everything at and above it no longer holds.
        if self.ladder.failed(p, ready=self.ready_at is not None):
            events.append(Event(p.t, "lost", p.level.label, {"detail": p.detail}))
        if p.level == Level.GENERATION and p.state == "not_yet":
            meanwhile = self.activity_during(p)
            if meanwhile and (p.latency_s or 0) >= _SLOW_PROBE_S:
                events.append(Event(p.t, "note", f"generation not answered after {p.latency_s or 0:.0f}s; "
                                                 f"meanwhile the server: {meanwhile}"))
        return events

    def activity_during(self, p: Probe) -> str | None:
        """What the server did while a generation probe was in flight, so a slow first request can be told from
        a stuck one (``firstlight.trackers.activity``)."""
        t0 = p.t - (p.latency_s or 0.0)
        if p.t - t0 < _SLOW_PROBE_S:
            return None
        return activity(t0, p.t, self.compiles, self.procs, self.gpus, self.log)

    def _before(self, phase: str) -> bool:
        """Is the current phase earlier than ``phase``? (Probe-derived phases only move forward.)"""
        return PHASE_INDEX[self.phases[-1].name] < PHASE_INDEX[phase]

    def _on_process(self, s: ProcessSample) -> list[Event]:
        self.has_stillness_signal = True
        if not s.alive:
            self.procs.prev = s
            if self.exited is not None:
                return []
            self.exited = s
            return [Event(s.t, "warning", f"server process {describe_exit(s.exit_code)}",
                          {"exit_code": s.exit_code, "signal": exit_signal(s.exit_code)})]
        self.ladder.process_seen(s.t)
        r = self.procs.feed(s)
        if r.weak is not None:
            self._weak(s.t, "cpu", r.weak)
        for signal, value in r.strong:
            self._strong(s.t, signal, value)
        for cpu in r.compiler_cpu:
            self.signals.compiler_ran(cpu)
        self.warnings += r.warnings
        return r.events

    def compile_runs(self, now: float) -> int:
        return self.compiles.runs(now)

    def _on_gpu(self, g: GpuSample) -> list[Event]:
        r = self.gpus.feed(g, self.procs.known_pids | ({self.pid} if self.pid else set()))
        if r.strong is not None:
            self._strong(g.t, "gpu", r.strong)
        if r.weak is not None:
            self._weak(g.t, "gpu", r.weak)
        events: list[Event] = []
        for ev, data in r.foreign:
            self.warnings.append(ev)
            events.append(Event(g.t, "warning", ev.value, data))
        return events

    # -- judging ---------------------------------------------------------------------------------------
    @property
    def settled(self) -> bool:
        """The verdict is final: later observations no longer change it."""
        return self._final is not None

    def assess(self, now: float) -> Assessment:
        if self._final is not None:
            f = self._final
            if (f.weights is not self.signals.weights or len(f.clocks) != len(self.signals.clocks)
                    or f.ready_at != self.ready_at):
                self._final = f = dataclasses.replace(f, ready_at=self.ready_at, weights=self.signals.weights,
                                                      clocks=tuple(self.signals.clocks))
            return f
        a = self._verdict(now)
        if a.final:
            self.phases[-1].end = self.phases[-1].end or now
            self.signals.quiet.close(self.phases[-1].end)
            self._final = a
        return a

    def _base(self, now: float, verdict: str, evidence: list[Evidence], **kw: Any) -> Assessment:
        if len(self._clocks) != len(self.signals.clocks):
            self._clocks = tuple(self.signals.clocks)
        return Assessment(verdict=verdict, phase=self.phases[-1].name, level=self.level,
                          elapsed_s=now - self.started_at, evidence=evidence, progress=self.progress(now),
                          engine_ready=self.engine_ready is not None, t=now, ready_at=self.ready_at,
                          weights=self.signals.weights, clocks=self._clocks, **kw)

    def _verdict(self, now: float) -> Assessment:
        """The verdict rules, first match wins: a stop signal (interrupted); a first answer that is not this
        deployment's known answer (failed, wrong_answer); another server on the port (failed, port_in_use); a
        generation answered, or replay's ready line (ready); a settled fatal line, the log's end
        inside a traceback, the process's exit, or bad answers in a row (failed, with the most specific cause);
        --timeout (timeout); no progress, or only CPU/GPU busy-waiting, with a process tree to watch (hung, with
        the phase's stall hint); else starting (with the stall hint once a replayed log is over)."""
        r = self.rules
        if self.interrupted is not None:
            return self._base(now, INTERRUPTED,
                              [Evidence("signal", f"{self.interrupted.signal} received", self.interrupted.t)])
        wrong = self._wrong_answer(now)
        if wrong is not None:
            return wrong
        if self.port_conflict is not None:
            return self._base(now, FAILED, [Evidence("port", self.port_conflict.detail, self.port_conflict.t)],
                              failure="port_in_use",
                              hint="another server already answers on this port: stop it, or give this one "
                                   "another port")
        if self.ready_at is not None:
            g = self.first_generation
            ev = []
            if g is not None:
                ev.append(Evidence("probe:generation",
                                   f"generation returned {g.get('text')!r} in {g.get('latency_s') or 0:.2f}s",
                                   self.ready_at))
            if self.worker_listening is not None:
                ev.append(Evidence("probe:port", f"worker ready: {self.worker_listening}", self.ready_at))
            if self.engine_ready is not None:
                ev.append(Evidence("log", f"line {self.engine_ready.lineno}: {clip(self.engine_ready.text)}",
                                   self.engine_ready.t))
            return self._base(now, READY, ev)
        failed = self._failure(now)
        if failed is not None:
            return failed
        if now - self.started_at >= r.timeout:
            ev = [Evidence("watch", f"no READY within --timeout {r.timeout:g}s", self.started_at)]
            ev += self._context_evidence(now)
            return self._base(now, TIMEOUT, ev)
        hung = self._hang(now)
        if hung is not None:
            return hung
        hint = self._stall_hint() if self.log_ended is not None else None  # a log that ends mid-start
        return self._base(now, STARTING, self._context_evidence(now), hint=hint)

    # -- the known answer ------------------------------------------------------------------------------------
    def _on_known_answer(self, known: KnownAnswer) -> list[Event]:
        """The answer this deployment gave before: the first generation must give it again before READY (one that
        comes after READY compares nothing)."""
        return self.answers.know(known) if self.first_generation is None else []

    def _wrong_answer(self, now: float) -> Assessment | None:
        """A valid answer that is not the one this deployment gave before: failed, both answers as evidence."""
        wrong = self.answers.wrong()
        if wrong is None:
            return None
        evidence, check = wrong
        return self._base(now, FAILED, evidence, failure=WRONG_ANSWER, detail=f"not the known answer ({check.by})",
                          hint=WRONG_ANSWER_HINT)

    def _stall_hint(self) -> str | None:
        return STALL_HINTS.get(self.phases[-1].name)

    def _failure(self, now: float) -> Assessment | None:
        ended = self.exited is not None or self.log_ended is not None
        if self.fatal is not None:
            best = self.lines.root_cause(ended)
            assert best is not None
            fatal_t = self.fatal.t if self.fatal.t is not None else now
            # A named cause settles as soon as its traceback is over (its frames say in which phase it died); a
            # generic one waits for a more specific cause; the exit, the log's end or 1.5 s settle either.
            specific = best.failure.rank > CATEGORY_RANK["other"] and not self.lines.root_traceback_open
            settled = specific or ended or now - fatal_t >= _FAILURE_SETTLE_S
            if settled:
                return self._exit_or_line(now, best, quote_exit=False)
        if self.log_ended is not None and self.exited is None:
            best = self.lines.root_cause(True)
            return self._failed_from_line(now, best) if best is not None else None
        if self.exited is not None:
            return self._exit_or_line(now, self.lines.root_cause(True))
        if len(self.bad_answers) >= self.rules.generation_attempts:
            last = self.bad_answers[-1]
            ev = [Evidence("probe:generation", f"{len(self.bad_answers)} bad answers in a row; last: {last.detail}",
                           self.bad_answers[0].t)]
            return self._base(now, FAILED, ev, failure=BAD_GENERATION,
                              hint="the server answers generations but not with valid text: check the model, "
                                   "its chat template and --expect")
        return None

    def _exit_or_line(self, now: float, best: FailureHit | None, quote_exit: bool = True) -> Assessment:
        """The process is gone (or a fatal line settled first): the log's root cause, or how the process died
        when that is the more specific of the two (a crash signal beats only a generic line; a log line that
        names a cause, a CUDA OOM before the SIGABRT, wins by rank)."""
        s = self.exited
        if s is None:
            assert best is not None
            return self._failed_from_line(now, best)
        phase = self.phases[-1].name
        sep = ";" if s.exit_code is None else ""  # "ended; not our child, status unknown; before serving"
        how = Evidence("process", f"server process {describe_exit(s.exit_code)}{sep} before serving, in phase "
                                  f"{phase}", s.t)
        own = self._death_cause(s)
        if own is not None and (best is None or CATEGORY_RANK[own[0]] > best.failure.rank):
            category, hint, extra = own
            ev = [how, *extra, *self.log.tail_evidence()]
            if best is not None:
                ev.append(Evidence("log", f"line {best.line}: {clip(best.text)}", best.t))
            return self._base(now, FAILED, ev + self.warnings, failure=category, hint=hint)
        if best is not None:
            return self._failed_from_line(now, best, [how] if quote_exit else None)
        return self._base(now, FAILED, [how, *self.log.tail_evidence(), *self.warnings], failure="other",
                          hint="the server exited without a recognised error; read its last log lines")

    def _death_cause(self, s: ProcessSample) -> tuple[str, str, list[Evidence]] | None:
        """(category, hint, evidence) when how the process died names a cause: a crash signal, or a kill with
        the kernel's OOM-kill traces; a SIGKILL without them is said to come from outside."""
        name = exit_signal(s.exit_code)
        if name in CRASH_SIGNALS:
            return "crashed", crash_hint(name), []
        if s.oom and (name is not None or s.exit_code is None):
            return "oom", OOM_HOST_HINT, [Evidence("memory", f"OOM kill: {e}", s.t) for e in s.oom]
        if name == "SIGKILL":
            return "other", KILLED_HINT, [Evidence("process", "killed by SIGKILL from outside (firstlight did "
                                                              "not send it; no OOM-kill trace found)", s.t)]
        return None

    def _failed_from_line(self, now: float, best: FailureHit, extra: list[Evidence] | None = None) -> Assessment:
        ev = [Evidence("log", f"line {best.line}: {clip(best.text)}", best.t)] + (extra or [])
        hint = best.failure.hint
        if best.failure.category == "gpu_occupied":
            foreign = [w.value for w in self.warnings if w.signal == "gpu"]
            if foreign:
                hint = f"{hint} ({'; '.join(foreign)})"
        return self._base(now, FAILED, ev + self.warnings, failure=best.failure.category, hint=hint)

    def _hang(self, now: float) -> Assessment | None:
        """``hung``: nothing at all moved for stall_timeout (longer where this deployment's history shows the
        phase is usually that still); then, in a phase with a learned budget, the phase ran past its budget with no
        strong progress for longer than its usual longest silence (the spin clock is only the ceiling of that
        silence; within its budget a phase is never hung by it); in a phase without one, only CPU/GPU busy for
        spin_timeout."""
        if not self.has_stillness_signal:
            return None  # no process tree to watch: a quiet log and a closed port are what a slow load looks like too
        if self.process_failed is not None:
            return None  # the process tree's signal is missing (its sampler failed), not still: only --timeout
        r = self.rules
        span = self.phases[-1]
        budget = self.budgets.get(span.name) if self.budgets is not None else None
        strong_idle = now - self.last_strong.t
        last_any = max(self.last_strong.t, self.last_weak.t if self.last_weak else 0.0)
        still_limit = r.stall_timeout
        if budget is not None and budget.still_limit_s is not None:
            still_limit = max(still_limit, budget.still_limit_s)  # the history only lengthens the user's floor
        if now - last_any >= still_limit:
            ev = [Evidence(self.last_strong.signal,
                           f"no progress for {now - last_any:.0f}s; last progress: {self.last_strong.value}",
                           self.last_strong.t)]
            if self.last_weak is not None:
                ev.append(Evidence(self.last_weak.signal, f"last activity: {self.last_weak.value}",
                                   self.last_weak.t))
            ev += self._budget_evidence(now, span, budget)
            ev += self._context_evidence(now, last_progress=False) + self.warnings
            return self._base(now, HUNG, ev, detail="no progress", hint=self._stall_hint())
        if budget is not None:
            return self._past_budget(now, span, budget)
        if strong_idle >= r.spin_timeout and self.last_weak is not None:
            ev = [Evidence(self.last_weak.signal, f"{self.last_weak.value}, yet nothing else moved for "
                                                  f"{strong_idle:.0f}s", self.last_strong.t),
                  Evidence(self.last_strong.signal, f"last real progress: {self.last_strong.value}",
                           self.last_strong.t)]
            ev += self._budget_evidence(now, span, None)
            ev += self._context_evidence(now, last_progress=False) + self.warnings
            return self._base(now, HUNG, ev, detail="busy-wait suspected", hint=self._stall_hint())
        return None

    def _silence_allowed(self, budget: PhaseBudget) -> float:
        """How long a phase past its budget may go without strong progress: its usual longest silence with its
        margin, at most spin_timeout (without measured silences: spin_timeout)."""
        lim = budget.silence_limit_s
        return self.rules.spin_timeout if lim is None else min(lim, self.rules.spin_timeout)

    def _past_budget(self, now: float, span: PhaseSpan, budget: PhaseBudget) -> Assessment | None:
        ran = now - span.start
        silence = self.signals.quiet.silence(now)
        if ran <= budget.budget_s or silence <= self._silence_allowed(budget):
            return None
        ev = self._budget_evidence(now, span, budget)
        if self.last_weak is not None:
            ev.append(Evidence(self.last_weak.signal, f"meanwhile: {self.last_weak.value}", self.last_weak.t))
        ev.append(Evidence(self.last_strong.signal, f"last real progress: {self.last_strong.value}",
                           self.last_strong.t))
        ev += self._context_evidence(now, last_progress=False) + self.warnings
        return self._base(now, HUNG, ev, detail="past its learned budget", hint=self._stall_hint())

    def _budget_evidence(self, now: float, span: PhaseSpan, budget: PhaseBudget | None) -> list[Evidence]:
        """The phase against this deployment's past starts, as the verdict names it; nothing without a history."""
        if self.budgets is None:
            return []
        if budget is None:
            return [Evidence("budget", self.budgets.why_none(span.name), span.start)]
        usual = (f"usual at most {duration(budget.silence_s)}" if budget.silence_limit_s is not None
                 else "usual silence not measured")
        return [Evidence("budget", f"{span.name} has run {duration(now - span.start)}; {budget.source} (budget "
                                   f"{duration(budget.budget_s)}); no strong progress for "
                                   f"{duration(self.signals.quiet.silence(now))}, {usual}", span.start)]

    def budget_use(self, now: float) -> dict[str, Any] | None:
        """The current phase against its learned budget (None: no history was read): what status, /startupz and
        the metrics carry."""
        if self.budgets is None:
            return None
        span = self.phases[-1]
        ran = max(now - span.start, 0.0)
        budget = self.budgets.get(span.name)
        if budget is None:
            b = self.budgets.phases.get(span.name)
            return {"phase": span.name, "learned": False, "starts": b.starts if b else 0,
                    "start_type": self.budgets.start_type, "used_s": round(ran, 3),
                    "note": self.budgets.why_none(span.name)}
        return {"phase": span.name, "learned": True, "starts": budget.starts, "start_type": budget.start_type,
                "used_s": round(ran, 3), "budget_s": round(budget.budget_s, 3),
                "used": round(ran / budget.budget_s, 4) if budget.budget_s > 0 else None,
                "median_s": round(budget.median_s, 3), "usual_s": [round(budget.min_s, 3), round(budget.max_s, 3)],
                "silence_s": round(self.signals.quiet.silence(now), 3),
                "silence_limit_s": round(self._silence_allowed(budget), 3), "note": budget.source}

    def _context_evidence(self, now: float, last_progress: bool = True) -> list[Evidence]:
        ev = []
        if self.process_failed is not None:
            f = self.process_failed
            ev.append(Evidence("sampler:process", f.message, f.t))
        if last_progress:
            ev.append(Evidence(self.last_strong.signal, f"last progress: {self.last_strong.value}",
                               self.last_strong.t))
        if self.last_probe_failure is not None:
            ev.append(Evidence(f"probe:{self.last_probe_failure.level.label}", self.last_probe_failure.detail,
                               self.last_probe_failure.t))
        if self.last_log is not None:
            ev.append(Evidence("log", f"last line {self.last_log.lineno}: {clip(self.last_log.text)}",
                               self.last_log.t))
        return ev

    # -- progress and ETA ------------------------------------------------------------------------------
    def progress(self, now: float) -> Progress:
        p = self.progress_tracker.progress(now, self.procs, self.gpus, self.last_log,
                                           self._phase_start("weights_loading", self.started_at))
        p.phase_budget = self.budget_use(now)
        # where the start is, against what each phase usually takes: closer than the whole start's median
        span = self.phases[-1]
        by_phase = phase_eta(self.budgets, span.name, max(now - span.start, 0.0)) if self.ready_at is None else None
        if by_phase is not None:
            p.eta_total_s = by_phase
        return p

    def _phase_start(self, name: str, default: float) -> float:
        for span in self.phases:
            if span.name == name:
                return span.start
        return default

    def phases_dicts(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.phases]
