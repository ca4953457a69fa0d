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
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Protocol

import psutil

from firstlight import settings
from firstlight.assessment import Assessment, Evidence
from firstlight.config import Config
from firstlight.drive import Driver
from firstlight.engines.profile import EngineProfile
from firstlight.history.store import History, HistoryError
from firstlight.judge import Judge
from firstlight.preflight.disk import device_id
from firstlight.redact import Redactor
from firstlight.report.base import Reporter
from firstlight.result import RunFacts, RunResult
from firstlight.runner import policy
from firstlight.runner.after_ready import (
    HISTORY_BUSY_S,
    compare_with_history,
    engine_clock_endpoints,
    post_ready_checks,
)
from firstlight.runner.expectations import Expectations
from firstlight.runner.feed import Feed
from firstlight.runner.guard import RecordFile, guard_reporter, install_stop_handlers
from firstlight.runner.launcher import STOP_SIGNALS  # the one tuple: a dropped ssh session (SIGHUP) included
from firstlight.runner.outcome import Outcome
from firstlight.runner.pump import Pump, drain
from firstlight.runner.serving import ServingWatch
from firstlight.runner.sources import Echo, Sink, Sources
from firstlight.serving import ServingStatus
from firstlight.timeline import Interrupted, PortConflict, SourceNote, Started
from firstlight.vocab import EXIT_CODES, EXIT_INTERNAL, EXIT_REGRESSION, EXIT_USAGE, READY, TIMEOUT

if TYPE_CHECKING:
    from firstlight.engines.command import ServerCommand
    from firstlight.preflight import PreflightReport

__all__ = ["EXIT_CODES", "EXIT_INTERNAL", "EXIT_REGRESSION", "EXIT_USAGE", "STOP_SIGNALS", "Outcome", "Session",
           "SourcesFactory"]



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
        self._profile = profile  # until the driver exists, which then owns it (the engine may be learnt)
        self.detect = cfg.engine is None and profile.name == "generic"  # engine not named nor told: learn it
        self.preflight = preflight  # the checks `up` ran before launch; kept with the run in the history
        # The parts: what the history says to expect, the observation path (sources in, judge and reporters
        # out), the sources. Each talks to the others directly; none calls back into the session.
        self.expectations = Expectations(cfg, self.plan, self.reporter.message, preflight)
        self.feed = Feed(self.redactor, self.reporter, self.record, self.expectations, clock)
        self.q = self.feed.q
        self.sources = sources(cfg, self.feed.put, self.feed.echo, self.detect, clock, self.q.qsize,
                               self.plan.server)
        self.feed.sources = self.sources
        self.driver: Driver | None = None

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
    @property
    def history(self) -> History | None:
        return self.expectations.history

    def run(self) -> Outcome:
        started_at = self.clock()
        expect = self.expectations
        expect.open(self.profile)
        driver = self.driver = self.feed.driver = Driver(self.cfg.judge, self.profile, started_at,
                                                         detect=self.detect)
        driver.expect_total(expect.expected_total_s)
        driver.use_budgets(expect.budgets)
        restore = install_stop_handlers(self.feed.interrupt)  # none off the main thread (library use)
        try:
            try:
                if self.preflight is not None and self.preflight.failure is not None:
                    return self._preflight_failed(driver.judge, started_at)
                result = self._watch(started_at)
                if result is None:  # the command could not even be started
                    return self._launch_failed(driver.judge, started_at)
                result = result.with_preflight(self.preflight.to_dict() if self.preflight else None)
                result = result.with_forecast(expect.graded_forecast(result))
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
        finally:
            restore()

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
        feed, said = self.feed, self.expectations.forecast
        if said is not None:  # said once the start is told, before anything is judged
            self.reporter.message(f"forecast: {said.line()}")
        feed.feed(self.redactor.observation(Started(started_at, self.sources.pid, self.cfg.probe.url,
                                                     self.profile.name, launched=self.sources.server is not None)))
        if self.sources.pid is None and not self.cfg.command:
            feed.feed(SourceNote(started_at, "process", "no --pid: without the process tree's reads and CPU a "
                                  "slow start cannot be told from a hung one; only --timeout ends the wait"))
        feed.known_answer(started_at)
        if self.sources.port_conflict is not None:  # found before the launch: nothing was started
            feed.feed(PortConflict(started_at, self.sources.port_conflict))
        pump = Pump(feed.q, feed.feed, feed.settle_logs, feed.assess)
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
        result = result.with_forecast(self.expectations.graded_forecast(result))
        self.reporter.verdict(result)
        result = self._remember(result)
        self.reporter.summary(result)
        return Outcome(result, result.exit_code())

    def _engine_clock(self, result: RunResult) -> RunResult:
        """The engine's own startup figures from its endpoints, once READY holds: judged (and recorded) like every
        observation, then set beside the anatomy with those its log and stream gave."""
        for obs in engine_clock_endpoints(self.cfg, self.profile, self.clock):
            self.feed.feed(obs)
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
        expect = self.expectations
        key = expect.key(self.profile)
        kind = "up" if self.cfg.command else "watch"
        self.history.set_busy_timeout(HISTORY_BUSY_S)  # another writer's lock must not hold up stopping the server
        result = result.with_eta(expect.eta.to_dict() if expect.eta else None)
        result = result.with_known_answer(expect.known_answer_entry(self.judge.answers if self.judge else None))
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
    def _honour_stop_signal(self, result: RunResult, when: str = "as READY was reached") -> RunResult:
        """A stop signal fed to the judge after READY was final (it arrived with the probe that made READY, or
        while the console was blocked) is ignored by the judge: never supervise on as if it had not come."""
        sig = self.feed.stop_signal
        if sig is None or not result.serving:
            return result
        return result.interrupted(sig.signal, sig.t, when)

    def _facts(self, judge: Judge, started_at: float) -> RunFacts:
        return RunFacts(
            started_at=started_at, engine=self.profile.name, url=self.redactor.text(self.cfg.probe.url),
            pid=self.sources.pid, command=self.redactor.argv(self.cfg.command) if self.cfg.command else None,
            requests=self.sources.requests(),
            server_log=str(self.sources.server_log) if self.sources.server_log else None,
            cold_start_s=self._cold_start(judge, started_at), disk=self._disk())

    def _disk(self) -> dict[str, Any] | None:
        """The measured read rates of the filesystem holding the weights (``preflight --disk``), for the anatomy."""
        w = self.expectations.weights
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
