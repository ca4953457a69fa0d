"""One watch from start to verdict, in named steps: open the history, start the sources, pump observations
into the judge until its verdict is final, check the serving server (warm-up, benchmark), compare with the
history, then apply the policy for the server (stop, detach, keep, supervise).

Threads: the sources run on their own clocks and only put observations on one queue; the pump (on this
thread) is the only reader, the only caller of the judge; this module alone decides what to do with the
server. Whatever ends the run (a verdict, a signal, an exception), a launched server is not left behind
unless ``--detach`` asked for it.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, Protocol

import psutil

from firstlight import forecast, settings
from firstlight.answers import answer_dict, known_from, request_fingerprint
from firstlight.assessment import Assessment, Evidence
from firstlight.budgets import Budgets, budgets_note, learn
from firstlight.config import Config
from firstlight.drive import Driver, Step
from firstlight.engines.profile import EngineProfile
from firstlight.forecast import Forecast
from firstlight.history.store import DeploymentKey, History, HistoryError, StartEstimate
from firstlight.judge import Judge
from firstlight.logtext import is_access_line
from firstlight.preflight.disk import device_id
from firstlight.probes.loop import EngineIdentified
from firstlight.redact import Redactor
from firstlight.report.base import Reporter
from firstlight.result import RunFacts, RunResult
from firstlight.runner import policy
from firstlight.runner.after_ready import (
    HISTORY_BUSY_S,
    compare_with_history,
    deployment_key,
    engine_clock_endpoints,
    open_history,
    post_ready_checks,
)
from firstlight.runner.guard import RecordFile, guard_reporter, install_stop_handlers
from firstlight.runner.launcher import STOP_SIGNALS  # the one tuple: a dropped ssh session (SIGHUP) included
from firstlight.runner.pump import Pump, drain
from firstlight.runner.serving import ServingWatch
from firstlight.runner.sources import Echo, Sink, Sources
from firstlight.serving import ServingStatus
from firstlight.starts import predicted_type
from firstlight.timeline import Interrupted, Level, LogLine, Observation, PortConflict, Probe, SourceNote, Started
from firstlight.vocab import EXIT_CODES, EXIT_INTERNAL, EXIT_REGRESSION, EXIT_USAGE, READY, TIMEOUT

if TYPE_CHECKING:
    from firstlight.engines.command import ServerCommand
    from firstlight.preflight import PreflightReport
    from firstlight.timeline import WeightsTotal

__all__ = ["EXIT_CODES", "EXIT_INTERNAL", "EXIT_REGRESSION", "EXIT_USAGE", "STOP_SIGNALS", "Outcome", "Session",
           "SourcesFactory"]



@dataclass
class Outcome:
    result: RunResult
    exit_code: int

    @property
    def verdict(self) -> str:
        return self.result.verdict

    @property
    def summary(self) -> dict[str, Any]:
        return self.result.to_dict()

    @property
    def server_pid(self) -> int | None:
        return self.result.pid


class _Words:
    """What the checks after READY say, until they are abandoned: a benchmark left running by a stop signal ends
    when the stopped server stops answering, and its last words must not follow the run's summary."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say, self._lock, self._open = say, threading.Lock(), True

    def say(self, text: str) -> None:
        with self._lock:  # a word under way when the checks are abandoned is out before close() returns
            if self._open:
                self._say(text)

    def close(self) -> None:
        with self._lock:
            self._open = False


class SourcesFactory(Protocol):
    """Makes a session's sources, given where they put what they observe: ``Sources`` itself, or the sources of a
    unit's invocation or a container (``functools.partial`` of theirs), so that a session is composed, never
    subclassed."""

    def __call__(self, cfg: Config, sink: Sink, echo: Echo, identify: bool, clock: Callable[[], float],
                 backlog: Callable[[], int] | None, command: ServerCommand | None) -> Sources: ...


class Session:
    def __init__(self, cfg: Config, profile: EngineProfile, reporter: Reporter, redactor: Redactor | None = None,
                 record: IO[str] | None = None, clock: Callable[[], float] = time.time,
                 preflight: PreflightReport | None = None, record_timeout: bool = True,
                 plan: settings.Plan | None = None, sources: SourcesFactory = Sources) -> None:
        """``plan``: the run as settings read it once (its command parsed, its redactor); without one (a caller
        holding only a Config), the plan is made here from ``cfg``, ``profile`` and ``redactor``. ``sources``:
        what the run watches (a unit's journal and cgroup, a container: their factories)."""
        # what the run is, read once: the session and its sources read the command from here, never parse it
        self.plan = plan or settings.plan(cfg, profile, redactor=redactor or Redactor())
        self.cfg = cfg  # read-only from here on: what the run learns lives in the session and its driver
        # The sidecar watches a start that outlived --timeout again, as the same start: its timeouts are not runs
        # of their own (one start is one run in the history, recorded at its real verdict).
        self.record_timeout = record_timeout
        self.reporter = guard_reporter(reporter)  # a closed output silences its reporter, never the run
        self.redactor = self.plan.redactor  # the command's, the environment's, the key's and the URL's secrets
        self.record = RecordFile(record, self.reporter.message) if record is not None else None
        self.clock = clock
        self.q: queue.Queue[Observation] = queue.Queue()
        self._profile = profile  # until the driver exists, which then owns it (the engine may be learnt)
        self.detect = cfg.engine is None and profile.name == "generic"  # engine not named nor told: learn it
        self.expected_total_s = cfg.judge.expected_total_s  # the whole-start estimate, from the history
        self.eta: StartEstimate | None = None  # ... and what it is from
        self._eta_said: str | None = None
        self.budgets: Budgets | None = None  # the phase budgets learned from the history (firstlight.budgets)
        self._budgets_said: str | None = None
        self.forecast: Forecast | None = None  # said before the watch begins, graded with the result
        self._weights: WeightsTotal | None = None  # the weights as the judge's assessments carry them, once measured
        self.sources = sources(cfg, self._sink, self._echo, self.detect, clock, self.q.qsize, self.plan.server)
        self.history: History | None = None
        self.driver: Driver | None = None
        self.preflight = preflight  # the checks `up` ran before launch; kept with the run in the history
        self.stop_signal: Interrupted | None = None  # the first stop signal: honoured whatever the verdict's state

    @property
    def profile(self) -> EngineProfile:
        return self.driver.profile if self.driver is not None else self._profile

    @property
    def judge(self) -> Judge | None:
        return self.driver.judge if self.driver is not None else None

    def assess(self, now: float) -> Assessment | None:
        """The judge's assessment at ``now`` (its verdict once final); None before the run began."""
        return self.driver.assess(now) if self.driver is not None else None

    # -- the run, step by step -----------------------------------------------------------------------------
    def run(self) -> Outcome:
        started_at = self.clock()
        self.history = open_history(self.cfg, self.redactor, self.reporter.message)
        self._expect_from_history()
        self._forecast()
        driver = self.driver = Driver(self.cfg.judge, self.profile, started_at, detect=self.detect)
        driver.expect_total(self.expected_total_s)
        driver.use_budgets(self.budgets)
        with self._signals():
            try:
                if self.preflight is not None and self.preflight.failure is not None:
                    return self._preflight_failed(driver.judge, started_at)
                result = self._watch(started_at)
                if result is None:  # the command could not even be started
                    return self._launch_failed(driver.judge, started_at)
                result = result.with_preflight(self.preflight.to_dict() if self.preflight else None)
                result = result.with_forecast(self._graded_forecast(result))
                result = self._honour_stop_signal(result)
                if result.verdict == READY:
                    result = self._engine_clock(result)
                    result = self._check_after_ready(result)
                result = self._remember(result)
                result = self._after_verdict(result)
                if self.sources.server is None:
                    # Watched, not launched: nothing reads the queue after this (a sidecar goes back to its own
                    # loop), so a signal that came during the checks after READY is honoured here, not lost.
                    result = self._honour_stop_signal(result, "after READY, during the checks")
                self.reporter.summary(result)  # always the last line
                return Outcome(result, result.exit_code(self.cfg.history.fail_on_regression))
            except BaseException:
                self._stop_server_on_escape()
                raise
            finally:
                self.sources.stop()
                if self.record is not None:
                    self.record.flush()  # the caller opened it and closes it

    def _watch(self, started_at: float) -> RunResult | None:
        """Start the sources and pump observations into the judge until its verdict is final."""
        error = self.sources.start()
        shown = self.redactor.argv(self.cfg.command) if self.cfg.command else None
        self.reporter.started({"started_at": started_at, "pid": self.sources.pid,
                               "launched": self.sources.server is not None, "engine": self.profile.name,
                               "role": self.cfg.judge.role, "node_rank": self._node_rank(),
                               "url": self.redactor.text(self.cfg.probe.url),
                               "command": " ".join(shown) if shown else None, "model": self._model_named(),
                               # False in the sidecar: a --timeout there is no verdict, the same start is
                               # watched on (counted once, at its real verdict)
                               "timeout_is_verdict": self.record_timeout})
        self._launch_error = error
        if error is not None:
            return None
        self.reporter.collectors(self.sources.collector_stats)
        if self.forecast is not None:  # said once the start is told, before anything is judged
            self.reporter.message(f"forecast: {self.forecast.line()}")
        self._feed(self.redactor.observation(Started(started_at, self.sources.pid, self.cfg.probe.url,
                                                     self.profile.name, launched=self.sources.server is not None)))
        if self.sources.pid is None and not self.cfg.command:
            self._feed(SourceNote(started_at, "process", "no --pid: without the process tree's reads and CPU a "
                                  "slow start cannot be told from a hung one; only --timeout ends the wait"))
        self._feed_known_answer(started_at)
        if self.sources.port_conflict is not None:  # found before the launch: nothing was started
            self._feed(PortConflict(started_at, self.sources.port_conflict))
        pump = Pump(self.q, self._feed, self._settle_logs, self._assess)
        a = pump.run()
        judge = self.judge
        assert judge is not None
        result = RunResult.from_judge(judge, a, self._facts(judge, started_at))
        self.reporter.verdict(result)
        return result

    def _node_rank(self) -> int | None:
        """The node's rank in a multi-node start, as its command says (``--node-rank``): for the labels."""
        return self.plan.server.node_rank if self.plan.server is not None else None

    def _model_named(self) -> str | None:
        """The model path or id the command names (``--model``), masked: for the reporters' labels."""
        cfg = self.cfg
        model = str(cfg.model_path) if cfg.model_path else self.plan.server.model if self.plan.server else None
        return self.redactor.text(model) if model else None

    def _launch_failed(self, judge: Judge, started_at: float) -> Outcome:
        assert self._launch_error is not None  # the sources' own words: why the command could not start
        now = self.clock()
        error = Evidence("process", self._launch_error, now)
        result = RunResult.launch_failed(judge, judge.assess(now), self._facts(judge, started_at), error)
        self.reporter.verdict(result)
        self.reporter.summary(result)
        return Outcome(result, result.exit_code())

    def _preflight_failed(self, judge: Judge, started_at: float) -> Outcome:
        """A check before launch failed: the run ends failed with that check's category, recorded in the
        history like any run, and no server process is started."""
        assert self.preflight is not None and self.preflight.failure is not None
        now, check = self.clock(), self.preflight.failure
        result = RunResult.preflight_failed(self._facts(judge, started_at), self.preflight.to_dict(), check.name,
                                            check.category, check.hint, self.preflight.evidence(now), now)
        result = result.with_forecast(self._graded_forecast(result))
        self.reporter.verdict(result)
        result = self._remember(result)
        self.reporter.summary(result)
        return Outcome(result, result.exit_code())

    def _engine_clock(self, result: RunResult) -> RunResult:
        """The engine's own startup figures from its endpoints, once READY holds: judged (and recorded) like every
        observation, then set beside the anatomy with those its log and stream gave."""
        for obs in engine_clock_endpoints(self.cfg, self.profile, self.clock):
            self._feed(obs)
        assert self.driver is not None  # the watch made it
        return result.with_engine_clock(self.driver.assess(self.clock()))

    def _check_after_ready(self, result: RunResult) -> RunResult:
        """Warm-up and benchmark in a thread, so that a stop signal meanwhile is honoured at once (the server
        is then stopped and the benchmark's requests end on their own)."""
        if not (self.cfg.after.warmup or self.cfg.after.bench):
            return result
        checks: dict[str, Any] = {}
        words = _Words(self.reporter.message)
        worker = threading.Thread(target=lambda: checks.update(post_ready_checks(
            self.cfg, self.profile, self.sources.model, words.say, self.plan.server_as(self.profile))), daemon=True)
        worker.start()
        while worker.is_alive():
            self._heartbeat()  # the server serves meanwhile: systemd's watchdog must not starve (--warmup 9 s)
            worker.join(0.1)
            for obs in drain(self.q):
                if isinstance(obs, Interrupted):
                    words.close()  # the abandoned checks end on their own, later: never after the summary
                    return result.interrupted(obs.signal, obs.t, "during the checks after READY")
        return result.with_checks(checks)

    def _remember(self, result: RunResult) -> RunResult:
        """Compare with this deployment's baseline and record the run. A regression is reported, never a stop."""
        if self.history is None or (result.verdict == TIMEOUT and not self.record_timeout):
            return result
        key = self._deployment_key()
        kind = "up" if self.cfg.command else "watch"
        self.history.set_busy_timeout(HISTORY_BUSY_S)  # another writer's lock must not hold up stopping the server
        result = result.with_eta(self.eta.to_dict() if self.eta else None)
        result = result.with_known_answer(self._known_answer_entry())
        result = compare_with_history(self.history, key, kind, result, self.cfg.history.margin)
        self.history.end_budget()  # the start's calls are done: its serving changes have their own deadlines
        for r in result.regression or ():
            self.reporter.message(f"REGRESSION: {r['message']}")
        return result

    def _heartbeat(self) -> None:
        """Between READY and the serving checks: the server still serves while its process lives."""
        server = self.sources.server
        if server is None or server.poll() is None or server.daemon_serving():
            self.reporter.heartbeat()

    def _after_verdict(self, result: RunResult) -> RunResult:
        server = self.sources.server
        if result.serving:
            self._heartbeat()  # after the history's writes, before supervision's first check
        if server is None:
            return result
        ctx = policy.Context(server, self.cfg, self.reporter.message, self.q, self.clock,
                             server_log=str(self.sources.server_log) if self.sources.server_log else None,
                             on_serving=self.reporter.summary, serving=self.serving_watch,
                             oom=self.sources.oom_evidence)
        return policy.choose(self.cfg, result).apply(ctx, result)

    def serving_watch(self, result: RunResult, pid: int | None = None) -> ServingWatch:
        """The serving checks after READY (``--serving-interval``), their changes recorded in the history."""
        pid = pid or self.sources.pid
        return ServingWatch(self.cfg, result, self.reporter, profile=self.profile, pid=pid, model=self.sources.model,
                            record=self._record_serving(result), clock=self.clock)

    def _record_serving(self, result: RunResult) -> Callable[[ServingStatus], None] | None:
        history = self.history
        run: int | str | None = result.history_run if result.history_run is not None else result.history_uid
        if history is None or run is None:
            return None

        def record(status: ServingStatus) -> None:
            with contextlib.suppress(HistoryError):  # a locked or full history never stops the checks
                history.record_serving(run, status.since, status.state, status.reason)
        return record

    def _stop_server_on_escape(self) -> None:
        """An exception escaped (a bug, a closed output stream): never leave the launched server behind."""
        server = self.sources.server
        if server is None or server.poll() is not None:
            return
        if self.cfg.after_ready == "detach" and self.judge is not None and self.judge.ready_at is not None:
            return
        with contextlib.suppress(Exception):
            server.stop(self.cfg.grace)

    # -- plumbing ------------------------------------------------------------------------------------------
    def _sink(self, obs: Observation) -> None:
        """Every source's observations come here (from their threads): secrets out (log lines, probe details
        such as a 401 body echoing the Authorization header, notes), then the queue."""
        self.q.put(self.redactor.observation(obs))

    def _echo(self, stream: str, text: str) -> None:
        self.reporter.server_line(stream, self.redactor.text(text))

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        obs = Interrupted(self.clock(), signal.Signals(signum).name)
        if self.stop_signal is None:
            self.stop_signal = obs
        self.q.put(obs)

    def _honour_stop_signal(self, result: RunResult, when: str = "as READY was reached") -> RunResult:
        """A stop signal fed to the judge after READY was final (it arrived with the probe that made READY, or
        while the console was blocked) is ignored by the judge: never supervise on as if it had not come."""
        sig = self.stop_signal
        if sig is None or not result.serving:
            return result
        return result.interrupted(sig.signal, sig.t, when)

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        restore = install_stop_handlers(self._on_signal)  # none off the main thread (library use)
        try:
            yield
        finally:
            restore()

    def _feed(self, obs: Observation) -> None:
        """One observation, in arrival order: the record, the driver of the judge, the reporters."""
        driver = self.driver
        assert driver is not None
        if isinstance(obs, EngineIdentified):  # for the session, not the judge's timeline
            if driver.detecting:
                self._report(driver.use_engine(obs.engine, obs.t, f"engine identified by its endpoints "
                                                                  f"({obs.how}): {obs.engine}"))
            return
        if isinstance(obs, Probe) and obs.level == Level.PORT and obs.ok:
            conflict = self.sources.check_port_owner()
            if conflict is not None and driver.judge.port_conflict is None:  # judged before what it leads to
                self._feed(PortConflict(obs.t, conflict))
        self._write_record(obs)  # in the order judged: the record replays to the same verdict and levels
        self._report(driver.feed(obs))
        observe = getattr(self.reporter, "observe", None)  # the dashboard draws GPUs, workers, the last line
        if observe is not None:
            observe(obs)
        if isinstance(obs, LogLine) and not is_access_line(obs.text):
            self.sources.new_log_line()

    def _write_record(self, obs: Observation) -> None:
        if self.record is not None:  # a failed write (a full disk) is one warning there, and recording stops
            self.record.write(obs.to_line())

    def _report(self, step: Step) -> None:
        """The driver's step to the reporters; an engine learnt with it also changes what is probed and expected."""
        assert self.driver is not None
        a = step.assessment
        if a.weights is not None and self._weights is None:
            self._weights = a.weights  # the page cache at start is known: the ETA of this type of start
            self._expect_from_history()
            self.driver.expect_total(self.expected_total_s)
            self.driver.use_budgets(self.budgets)
        if step.engine is not None:
            self.sources.use_endpoints(self.driver.profile.endpoints)
            self._expect_from_history()  # the deployment key names the engine: look again now it is known
            self.driver.expect_total(self.expected_total_s)
            self.driver.use_budgets(self.budgets)
            self._feed_known_answer(a.t)
        for ev in step.events:
            self.reporter.event(ev, a)

    def _assess(self) -> Assessment:
        assert self.driver is not None
        a = self.driver.assess(self.clock())
        self.reporter.status(a)
        return a

    def _settle_logs(self) -> list[Observation]:
        self.sources.settle_logs()
        return drain(self.q)

    def _deployment_key(self) -> DeploymentKey:
        """This deployment, from the plan's one reading of the command (by the engine known now)."""
        return deployment_key(self.cfg, self.profile, self.plan.argv, self.redactor, self.plan.server_as(self.profile))

    def _expect_from_history(self) -> None:
        """The whole-start ETA (the median time to READY of this deployment's previous good starts) and the phase
        budgets learned from them (``firstlight.budgets``), both of the start's type as far as it is known."""
        if self.history is None:
            return
        key = self._deployment_key()
        with contextlib.suppress(HistoryError):
            if self.cfg.judge.expected_total_s is None:
                self.eta = self.history.expected_start(key, self._predicted_type())
                self.expected_total_s = self.eta.seconds if self.eta else None
                if self.eta is not None and self.eta.note != self._eta_said:
                    self._eta_said = self.eta.note
                    self.reporter.message(f"history: {self.eta.note}: {self.eta.seconds:.1f}s")
            kind = self._predicted_type()
            if kind is None:  # budgets are per start type: a cold start is never held to a warm one's
                return
            self.budgets = learn(self.history.start_anatomies(key), kind)
            said = budgets_note(self.budgets)
            if said != self._budgets_said:
                self._budgets_said = said
                self.reporter.message(f"history: {said}")

    def _predicted_type(self) -> str | None:
        """This start's type as far as it is known now (``firstlight.starts.predicted_type``)."""
        return predicted_type(self._weights, self.plan.argv, self.profile.flags.attach)

    def _forecast(self) -> None:
        """The forecast of this start (``firstlight.forecast``), made before the watch begins and said once the start
        is told: from this deployment's history of starts of the type its command or the preflight's page-cache
        reading predicts, else from the weights' bytes, with the preflight's memory fit."""
        facts = self.preflight.facts if self.preflight is not None else {}
        fit = next((c for c in self.preflight.checks if c.name == "fit"), None) if self.preflight else None
        local = self.plan.server.model_local if self.plan.server is not None else None
        said = predicted_type(None, self.plan.argv, self.profile.flags.attach)  # what the command alone says
        self.forecast = forecast.from_store(self.history, self._deployment_key(), facts,
                                            fit.status if fit is not None else None, local, said)

    def _graded_forecast(self, result: RunResult) -> dict[str, Any] | None:
        """The forecast said at the start, with what happened beside it; None when none was said."""
        if self.forecast is None:
            return None
        return forecast.grade(self.forecast.to_dict(), result.anatomy, result.cold_start_s)

    def _feed_known_answer(self, t: float) -> None:
        """``--known-answer check``: this deployment's known answer to this request, from the history, to the judge
        (which compares the first answer with it before READY). Looked up again once the engine is known (the
        deployment key names it); the judge keeps the first it gets."""
        judge = self.judge
        if (self.history is None or not self.cfg.history.answers or self.cfg.history.known_answer != "check"
                or judge is None or judge.answers.known is not None):
            return
        with contextlib.suppress(HistoryError):
            found = self.history.known_answer(self._deployment_key(), request_fingerprint(self.cfg.probe))
            known = known_from(found[0], found[1], found[2], t) if found is not None else None
            if known is not None:
                self._feed(known)

    def _known_answer_entry(self) -> dict[str, Any] | None:
        """The summary's ``known_answer``: this start's first answer, recorded as the reference (the first verified
        start of this request, or ``--known-answer record``) or checked against it."""
        answers = self.judge.answers if self.judge is not None else None
        if not self.cfg.history.answers or answers is None or answers.first is None:
            return None
        mode = self.cfg.history.known_answer
        first = answer_dict(answers.first, request_fingerprint(self.cfg.probe))
        entry: dict[str, Any] = {"mode": mode, "answer": first}
        known, check = answers.known, answers.check
        if mode == "record":
            return {**entry, "outcome": "re-recorded"}
        if known is None or check is None:
            return {**entry, "outcome": "recorded"}
        return {**entry, "outcome": "same" if check.same else "different", "reference_run": known.run,
                "why": check.why}

    def _facts(self, judge: Judge, started_at: float) -> RunFacts:
        return RunFacts(
            started_at=started_at, engine=self.profile.name, url=self.redactor.text(self.cfg.probe.url),
            pid=self.sources.pid, command=self.redactor.argv(self.cfg.command) if self.cfg.command else None,
            requests=self.sources.requests(),
            server_log=str(self.sources.server_log) if self.sources.server_log else None,
            cold_start_s=self._cold_start(judge, started_at), disk=self._disk())

    def _disk(self) -> dict[str, Any] | None:
        """The measured read rates of the filesystem holding the weights (``preflight --disk``), for the anatomy."""
        w = self._weights
        if self.history is None or w is None:
            return None
        with contextlib.suppress(OSError):  # the weights' path gone: no filesystem to name
            return self.history.disk(device_id(w.path))
        return None

    def _cold_start(self, judge: Judge, started_at: float) -> float | None:
        """Seconds from the server's start to READY: from the launch, or from the watched process's birth."""
        if judge.ready_at is None:
            return None
        if self.sources.server is not None:
            return judge.ready_at - started_at
        if self.cfg.pid is not None:
            with contextlib.suppress(psutil.Error):
                return judge.ready_at - psutil.Process(self.cfg.pid).create_time()
        return None
