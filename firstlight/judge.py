"""The judge: the verdict rules. Observations in, the verdict at any moment out (ready, failed, hung, timeout,
wrong answer, interrupted, starting), with its phase, level, evidence and progress.

Pure: no clocks, no I/O. ``feed`` takes observations in arrival order, hands each to the trackers that read it and
returns the notable events they caused (a phase began, a level was reached, a fatal line); ``assess(now)`` gives
the verdict at ``now``. Replaying a recorded timeline through a fresh Judge reproduces every verdict
(tests/unit/judge/test_judge.py). What each observation meant, and the state it leaves, is the trackers' to keep
(``firstlight.trackers``: the log, the process tree and the GPUs, the progress marks, the ladder, the progress and
ETA, the known answer; ``firstlight.phases``: the phases, their budgets, the ETA by phase). Here are only the
facts a verdict turns on (READY and what showed it, the first fatal line, the exit, a stop signal, another server
on the port) and the rules that weigh them (``_verdict``, first match wins). Each assessment carries its time and
the facts the rest of a run reads (READY, the weights, the engine's figures), so nothing past the driver reaches
inside.

Progress, for telling slow from hung:
- strong: a new log line (not an HTTP access line, which our own probes cause), bytes read by the process
  tree, memory (RSS) growing, shard/graph progress lines, GPU memory changing, a process appearing, a
  readiness level newly reached;
- weak: CPU time or GPU utilisation alone (a deadlocked NCCL init busy-waits at 100 %).
``hung`` means no progress at all for stall_timeout, or only weak progress for spin_timeout.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from firstlight.anatomy import Signals
from firstlight.assessment import Assessment, Event, Evidence, PhaseSpan, Progress
from firstlight.budgets import Budgets, PhaseBudget
from firstlight.config import JudgeConfig
from firstlight.deaths import CRASH_SIGNALS, KILLED_HINT, OOM_HOST_HINT, crash_hint, describe_exit, exit_signal
from firstlight.engines.profile import EngineProfile
from firstlight.formats import duration, mb
from firstlight.interpret import FailureHit, Reading
from firstlight.logtext import is_access_line
from firstlight.phases import PhaseTracker
from firstlight.timeline import (
    EngineClock,
    GpuSample,
    HubDownload,
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
    LadderTracker,
    LogTracker,
    MarkTracker,
    ProgressTracker,
    TreeTracker,
    clip,
)
from firstlight.vocab import (
    BAD_GENERATION,
    CATEGORY_RANK,
    FAILED,
    HUNG,
    INTERRUPTED,
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
WRONG_ANSWER_HINT = ("the weights served are not the ones this deployment served before: a stale weight cache, a "
                     "different checkpoint, a quantization change; after a deliberate change, record the new answer "
                     "with --known-answer record")


class Judge:
    """Feed it observations in order; ask it for the verdict at any moment."""

    def __init__(self, rules: JudgeConfig, profile: EngineProfile, started_at: float) -> None:
        self.rules = rules
        self.profile = profile
        self.started_at = started_at
        self.first_generation: dict[str, Any] | None = None
        self.ready_at: float | None = None
        self.worker_listening: str | None = None  # a worker's READY: what its port rung saw (no generation)
        self.engine_ready: LogLine | None = None
        self.fatal: FailureHit | None = None  # the first fatal line, with its arrival time
        self.log_ended: float | None = None  # replay: the log is over (the equivalent of the process exiting)
        self.exited: ProcessSample | None = None
        self.interrupted: Interrupted | None = None
        self.port_conflict: PortConflict | None = None  # another server answers on our port: never our READY
        self._final: Assessment | None = None
        self._clocks: tuple[EngineClock, ...] = ()  # the engine's figures as the last assessment gave them
        # The trackers (firstlight.trackers, firstlight.phases): what each observation meant, and the state it left.
        self.signals = Signals()  # what the anatomy reads (firstlight.anatomy), from these same observations
        self.phases = PhaseTracker(started_at, self.signals.quiet, rules.spin_timeout)  # spans, budgets, ETA
        self.marks = MarkTracker(started_at, self.signals.quiet)  # the last strong and weak progress
        self.ladder = LadderTracker()  # the readiness levels that hold, and since when
        self.tree = TreeTracker(rules, self.signals, self.marks)  # the process tree, the GPUs, the sources' notes
        self.progress_tracker = ProgressTracker(started_at, rules.expected_total_s)  # how far, and the ETAs
        # The server's lines, read once (their interpretation is shared with replay): phase, progress, root cause.
        self.log = LogTracker(profile, self.signals, self.progress_tracker)
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
            return self.tree.gpu(obs)
        if isinstance(obs, WeightsTotal):
            return self.progress_tracker.weights(obs)
        if isinstance(obs, HubDownload):
            return self._on_hub(obs)
        if isinstance(obs, Started):
            self.tree.started(obs)
            return []
        if isinstance(obs, Interrupted):
            self.interrupted = self.interrupted or obs
            return []
        if isinstance(obs, KnownAnswer):  # only the first generation compares: one after READY compares nothing
            return self.answers.know(obs) if self.first_generation is None else []
        if isinstance(obs, PortConflict):
            if self.port_conflict is not None or self.ready_at is not None:
                return []
            self.port_conflict = obs
            return [Event(obs.t, "warning", f"the port is not the server's: {obs.detail}")]
        if isinstance(obs, SourceNote):
            return self.tree.note(obs)
        return []

    def use_profile(self, profile: EngineProfile) -> None:
        """The engine became known during the run (from its log lines or its endpoints)."""
        self.profile = profile
        self.log.lines.use_profile(profile)

    def expect_total(self, seconds: float | None) -> None:
        """The whole-start estimate (from this deployment's history), learnt once the engine is known."""
        self.progress_tracker.expected_total_s = seconds

    def use_budgets(self, budgets: Budgets | None) -> None:
        """The phase budgets learned from this deployment's earlier good starts of this start type."""
        self.phases.budgets = budgets

    def _on_log(self, line: LogLine) -> list[Event]:
        r, mark = self.log.feed(line)
        if mark is not None:
            self.marks.strong(line.t, "log", mark)
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
                return [*events, *self.phases.enter(line.t, "ready", "log", r.line)]
            events.append(Event(line.t, "engine_ready", "engine reports ready; confirming with a generation"))
        return events

    def _log_phase(self, line: LogLine, r: Reading) -> list[Event]:
        if r.phase is None or self.ready_at is not None or (r.phase == "ready" and not self.rules.ready_from_log):
            return []  # live, the engine's ready line is a claim: READY is the generation's to say
        return self.phases.enter(line.t, r.phase, "log", r.line)

    def end_of_log(self, t: float) -> None:
        """Replay: the log is over. Like a process exit, it settles a pending root cause and makes a log that
        stops inside an uncaught traceback a failure; a daemon left listening idle serves (``idle_ready``)."""
        self.log_ended = t
        idle = self.log.lines.idle_ready() if self.rules.ready_from_log and self.ready_at is None else None
        if idle is not None:
            at = idle.t if idle.t is not None else t
            self.engine_ready = LogLine(at, idle.text, "log", idle.line)
            self.ready_at = at
            self.phases.enter(at, "ready", "log", idle.line)

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
                self.marks.strong(p.t, f"probe:{lv.label}", f"{lv.label} reached")
                events.append(Event(p.t, "level", lv.label, {"detail": p.detail}))
            if p.level == Level.GENERATION and self.first_generation is None:
                self.first_generation = {"latency_s": p.latency_s, "text": p.text,
                                         "meanwhile": self.tree.activity_during(p, self.log)}
                self.ready_at = p.t
                events += self.phases.enter(p.t, "ready", "probe")
            elif (p.level == Level.PORT and self.rules.role == "worker" and self.ready_at is None
                  and (not self.profile.worker_ready_markers or self.engine_ready is not None)):
                # a worker generates nothing itself: its port, seen listening (never connected to), is its READY;
                # one that serves no port: its engines' ready line, then its connection to its head, seen
                self.ready_at, self.worker_listening = p.t, p.detail
                events += self.phases.enter(p.t, "ready", "probe")
            else:
                events += self.phases.probed(p, self.profile, self.rules.role, self.engine_ready is not None)
            return events
        # A failed rung: everything at and above it no longer holds.
        if self.ladder.failed(p, ready=self.ready_at is not None):
            events.append(Event(p.t, "lost", p.level.label, {"detail": p.detail}))
        if p.level == Level.GENERATION and p.state == "not_yet":
            events += self.tree.slow_generation(p, self.log)
        return events

    def _on_hub(self, h: HubDownload) -> list[Event]:
        """The model's hub-cache folder grew: bytes arrived (strong progress, quoting the file that grows); while
        files are still arriving the start is in its download (entered, or the load that has not begun yet
        relabelled: ``PhaseTracker.enter``)."""
        grew = self.progress_tracker.hub(h)
        if grew <= 0:
            return []
        where = h.file or h.path
        if len(self.signals.hub) < 4096:
            self.signals.hub.append((h.t, grew))
        self.marks.strong(h.t, "hub_cache", f"{where} grew by {mb(grew)} ({mb(h.bytes)} in the hub cache)")
        if not h.incomplete or self.ready_at is not None:
            return []
        if self.phases.before("download") or (self.phases.current.name == "weights_loading"
                                              and self.progress_tracker.shard is None):
            events = self.phases.enter(h.t, "download", "hub_cache")
            if events:
                self.log.lines.downloading()  # the engine's next load line moves the start on from there
            return events
        return []

    def _on_process(self, s: ProcessSample) -> list[Event]:
        if s.alive:
            self.ladder.process_seen(s.t)
            return self.tree.process(s)
        self.tree.ended(s)
        if self.exited is not None:
            return []
        self.exited = s
        return [Event(s.t, "warning", f"server process {describe_exit(s.exit_code)}",
                      {"exit_code": s.exit_code, "signal": exit_signal(s.exit_code)})]

    # -- judging ---------------------------------------------------------------------------------------
    @property
    def settled(self) -> bool:
        """The verdict is final: later observations no longer change it."""
        return self._final is not None

    def assess(self, now: float) -> Assessment:
        if self._final is not None:
            f = self._final
            # ... and a failed start's phase: the lines that tell its death after the first (the frames of its
            # traceback, the loader's word after the OOM's) say where it died, only forward (the line interpreter)
            phase = self.phases.current.name if f.verdict == FAILED else f.phase
            if (f.weights is not self.signals.weights or len(f.clocks) != len(self.signals.clocks)
                    or f.ready_at != self.ready_at or f.phase != phase):
                self._final = f = dataclasses.replace(f, ready_at=self.ready_at, weights=self.signals.weights,
                                                      clocks=tuple(self.signals.clocks), phase=phase)
            return f
        a = self._verdict(now)
        if a.final:
            self.phases.close(now)
            self._final = a
        return a

    def _base(self, now: float, verdict: str, evidence: list[Evidence], **kw: Any) -> Assessment:
        if len(self._clocks) != len(self.signals.clocks):
            self._clocks = tuple(self.signals.clocks)
        return Assessment(verdict=verdict, phase=self.phases.current.name, level=self.ladder.level,
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

    def _wrong_answer(self, now: float) -> Assessment | None:
        """A valid answer that is not the one this deployment gave before: failed, both answers as evidence."""
        wrong = self.answers.wrong()
        if wrong is None:
            return None
        evidence, check = wrong
        return self._base(now, FAILED, evidence, failure=WRONG_ANSWER, detail=f"not the known answer ({check.by})",
                          hint=WRONG_ANSWER_HINT)

    def _stall_hint(self) -> str | None:
        return STALL_HINTS.get(self.phases.current.name)

    def _failure(self, now: float) -> Assessment | None:
        ended = self.exited is not None or self.log_ended is not None
        if self.fatal is not None:
            best = self.log.lines.root_cause(ended)
            assert best is not None
            fatal_t = self.fatal.t if self.fatal.t is not None else now
            # A named cause settles as soon as its traceback is over (its frames say in which phase it died) and
            # the lines that may say where it died are read; a generic one waits for a more specific cause; the
            # exit, the log's end or 1.5 s settle either.
            lines = self.log.lines
            specific = (best.failure.rank > CATEGORY_RANK["other"] and not lines.root_traceback_open
                        and lines.death_placed)
            settled = specific or ended or now - fatal_t >= _FAILURE_SETTLE_S
            if settled:
                return self._exit_or_line(now, best, quote_exit=False)
        if self.log_ended is not None and self.exited is None:
            best = self.log.lines.root_cause(True)
            return self._failed_from_line(now, best) if best is not None else None
        if self.exited is not None:
            return self._exit_or_line(now, self.log.lines.root_cause(True))
        bad = self.ladder.bad_answers
        if len(bad) >= self.rules.generation_attempts:
            ev = [Evidence("probe:generation", f"{len(bad)} bad answers in a row; last: {bad[-1].detail}", bad[0].t)]
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
        phase = self.phases.current.name
        sep = ";" if s.exit_code is None else ""  # "ended; not our child, status unknown; before serving"
        how = Evidence("process", f"server process {describe_exit(s.exit_code)}{sep} before serving, in phase "
                                  f"{phase}", s.t)
        own = self._death_cause(s)
        if own is not None and (best is None or CATEGORY_RANK[own[0]] > best.failure.rank):
            category, hint, extra = own
            ev = [how, *extra, *self.log.tail_evidence()]
            if best is not None:
                ev.append(Evidence("log", f"line {best.line}: {clip(best.text)}", best.t))
            return self._base(now, FAILED, ev + self.tree.warnings, failure=category, hint=hint)
        if best is not None:
            return self._failed_from_line(now, best, [how] if quote_exit else None)
        return self._base(now, FAILED, [how, *self.log.tail_evidence(), *self.tree.warnings], failure="other",
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
        category = best.failure.category
        if category == "other" and self.phases.current.name == "warmup":
            category = "warmup_failed"  # a death the log names no cause of, in the warmup: the warmup failed
        if best.failure.category == "gpu_occupied":
            foreign = [w.value for w in self.tree.warnings if w.signal == "gpu"]
            if foreign:
                hint = f"{hint} ({'; '.join(foreign)})"
        return self._base(now, FAILED, ev + self.tree.warnings, failure=category, hint=hint)

    def _hang(self, now: float) -> Assessment | None:
        """``hung``: nothing at all moved for stall_timeout (longer where this deployment's history shows the
        phase is usually that still); then, in a phase with a learned budget, the phase ran past its budget with no
        strong progress for longer than its usual longest silence (the spin clock is only the ceiling of that
        silence; within its budget a phase is never hung by it); in a phase without one, only CPU/GPU busy for
        spin_timeout."""
        if not self.tree.has_stillness_signal:
            return None  # no process tree to watch: a quiet log and a closed port are what a slow load looks like too
        if self.tree.process_failed is not None:
            return None  # the process tree's signal is missing (its sampler failed), not still: only --timeout
        r = self.rules
        span, budget = self.phases.current, self.phases.budget()
        strong, weak = self.marks.last_strong, self.marks.last_weak
        strong_idle = now - strong.t
        last_any = max(strong.t, weak.t if weak else 0.0)
        still_limit = r.stall_timeout
        if budget is not None and budget.still_limit_s is not None:
            still_limit = max(still_limit, budget.still_limit_s)  # the history only lengthens the user's floor
        if now - last_any >= still_limit:
            ev = [Evidence(strong.signal, f"no progress for {now - last_any:.0f}s; last progress: {strong.value}",
                           strong.t)]
            if weak is not None:
                ev.append(Evidence(weak.signal, f"last activity: {weak.value}", weak.t))
            ev += self._budget_evidence(now, span, budget)
            ev += self._context_evidence(now, last_progress=False) + self.tree.warnings
            return self._base(now, HUNG, ev, detail="no progress", hint=self._stall_hint())
        if budget is not None:
            return self._past_budget(now, span, budget)
        if strong_idle >= r.spin_timeout and weak is not None:
            ev = [Evidence(weak.signal, f"{weak.value}, yet nothing else moved for {strong_idle:.0f}s", strong.t),
                  Evidence(strong.signal, f"last real progress: {strong.value}", strong.t)]
            ev += self._budget_evidence(now, span, None)
            ev += self._context_evidence(now, last_progress=False) + self.tree.warnings
            return self._base(now, HUNG, ev, detail="busy-wait suspected", hint=self._stall_hint())
        return None

    def _past_budget(self, now: float, span: PhaseSpan, budget: PhaseBudget) -> Assessment | None:
        ran = now - span.start
        silence = self.signals.quiet.silence(now)
        if ran <= budget.budget_s or silence <= self.phases.silence_allowed(budget):
            return None
        ev = self._budget_evidence(now, span, budget)
        strong, weak = self.marks.last_strong, self.marks.last_weak
        if weak is not None:
            ev.append(Evidence(weak.signal, f"meanwhile: {weak.value}", weak.t))
        ev.append(Evidence(strong.signal, f"last real progress: {strong.value}", strong.t))
        ev += self._context_evidence(now, last_progress=False) + self.tree.warnings
        return self._base(now, HUNG, ev, detail="past its learned budget", hint=self._stall_hint())

    def _budget_evidence(self, now: float, span: PhaseSpan, budget: PhaseBudget | None) -> list[Evidence]:
        """The phase against this deployment's past starts, as the verdict names it; nothing without a history."""
        budgets = self.phases.budgets
        if budgets is None:
            return []
        if budget is None:
            return [Evidence("budget", budgets.why_none(span.name), span.start)]
        usual = (f"usual at most {duration(budget.silence_s)}" if budget.silence_limit_s is not None
                 else "usual silence not measured")
        return [Evidence("budget", f"{span.name} has run {duration(now - span.start)}; {budget.source} (budget "
                                   f"{duration(budget.budget_s)}); no strong progress for "
                                   f"{duration(self.signals.quiet.silence(now))}, {usual}", span.start)]

    def _context_evidence(self, now: float, last_progress: bool = True) -> list[Evidence]:
        ev = []
        if self.tree.process_failed is not None:
            f = self.tree.process_failed
            ev.append(Evidence("sampler:process", f.message, f.t))
        strong = self.marks.last_strong
        if last_progress:
            ev.append(Evidence(strong.signal, f"last progress: {strong.value}", strong.t))
        failed, last = self.ladder.last_failure, self.log.last
        if failed is not None:
            ev.append(Evidence(f"probe:{failed.level.label}", failed.detail, failed.t))
        if last is not None:
            ev.append(Evidence("log", f"last line {last.lineno}: {clip(last.text)}", last.t))
        return ev

    # -- progress and ETA ------------------------------------------------------------------------------
    def progress(self, now: float) -> Progress:
        """How far the start is at ``now`` (``firstlight.trackers``), with the current phase against its budget and,
        before READY, the ETA by phase (``firstlight.phases``)."""
        p = self.progress_tracker.progress(now, self.tree.procs, self.tree.gpus, self.log.last,
                                           self.phases.start_of("weights_loading", self.started_at))
        return self.phases.weigh(now, p, ready=self.ready_at is not None)
