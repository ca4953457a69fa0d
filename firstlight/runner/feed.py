"""The observation path of one watch. In: every source's observation, from its own thread, with its secrets
taken out (log lines, probe details such as a 401 body echoing the Authorization header, notes), onto one queue;
a stop signal as an observation too. Out, on the pump's thread: each observation in arrival order to the record,
the driver of the judge and the reporters; what a step learns (the engine, the weights' page cache) goes to the
sources (the engine's endpoints) and to the expectations (the ETA and budgets of this type of start), never
back through the session."""

from __future__ import annotations

import queue
import signal
from collections.abc import Callable
from types import FrameType

from firstlight.assessment import Assessment
from firstlight.drive import Driver, Step
from firstlight.logtext import is_access_line
from firstlight.probes.loop import EngineIdentified
from firstlight.redact import Redactor
from firstlight.report.base import Reporter
from firstlight.runner.expectations import Expectations
from firstlight.runner.guard import RecordFile
from firstlight.runner.pump import drain
from firstlight.runner.sources import Sources
from firstlight.timeline import Interrupted, Level, LogLine, Observation, PortConflict, Probe


class Feed:
    def __init__(self, redactor: Redactor, reporter: Reporter, record: RecordFile | None,
                 expectations: Expectations, clock: Callable[[], float]) -> None:
        self.q: queue.Queue[Observation] = queue.Queue()
        self.redactor, self.reporter, self.record = redactor, reporter, record
        self.expectations = expectations
        self.clock = clock
        self.driver: Driver | None = None  # the run's, once it begins
        self.sources: Sources | None = None  # made with this feed's put and echo, then given here
        self.stop_signal: Interrupted | None = None  # the first stop signal: honoured whatever the verdict's state
        self._assessed_at = 0.0  # the time of the last assessment: held back by a backlog, never moved backwards

    # -- in: from the sources' threads and the signal handler ------------------------------------------------
    def put(self, obs: Observation) -> None:
        """Every source's observations come here: secrets out, then the queue."""
        self.q.put(self.redactor.observation(obs))

    def echo(self, stream: str, text: str) -> None:
        self.reporter.server_line(stream, self.redactor.text(text))

    def interrupt(self, signum: int, frame: FrameType | None) -> None:
        obs = Interrupted(self.clock(), signal.Signals(signum).name)
        if self.stop_signal is None:
            self.stop_signal = obs
        self.q.put(obs)

    # -- out: on the pump's thread ---------------------------------------------------------------------------
    def feed(self, obs: Observation) -> None:
        """One observation, in arrival order: the record, the driver of the judge, the reporters."""
        driver, sources = self.driver, self.sources
        assert driver is not None and sources is not None
        if isinstance(obs, EngineIdentified):  # for the run, not the judge's timeline
            if driver.detecting:
                self._report(driver.use_engine(obs.engine, obs.t, f"engine identified by its endpoints "
                                                                  f"({obs.how}): {obs.engine}"))
            return
        if isinstance(obs, Probe) and obs.level == Level.PORT and obs.ok:
            conflict = sources.check_port_owner()
            if conflict is not None and driver.judge.port_conflict is None:  # judged before what it leads to
                self.feed(PortConflict(obs.t, conflict))
        if self.record is not None:  # in the order judged: the record replays to the same verdict and levels
            self.record.write(obs.to_line())  # a failed write (a full disk) is one warning, and recording stops
        self._report(driver.feed(obs))
        observe = getattr(self.reporter, "observe", None)  # the dashboard draws GPUs, workers, the last line
        if observe is not None:
            observe(obs)
        if isinstance(obs, LogLine) and not is_access_line(obs.text):
            sources.new_log_line()

    def assess(self) -> Assessment:
        """The judge's assessment now; while observations wait on the queue (the pump fell behind: a slow step, a
        starved machine), at the oldest waiting one's time: a silence is never judged past evidence not yet heard
        (a pump held 30 s would else call a start hung whose ready line waits in the queue)."""
        assert self.driver is not None
        at = self.clock()
        with self.q.mutex:
            if self.q.queue:
                at = max(self._assessed_at, min(at, self.q.queue[0].t))
        self._assessed_at = at
        a = self.driver.assess(at)
        self.reporter.status(a)
        return a

    def settle_logs(self) -> list[Observation]:
        """After an exit: everything the log sources still hold, and everything queued."""
        assert self.sources is not None
        self.sources.settle_logs()
        return drain(self.q)

    def known_answer(self, t: float) -> None:
        """The deployment's known answer to the judge, when the history has one (looked up again once the engine
        is known: the deployment key names it; the judge keeps the first it gets)."""
        driver = self.driver
        assert driver is not None
        known = self.expectations.known_answer(driver.profile, driver.judge.answers, t)
        if known is not None:
            self.feed(known)

    def _report(self, step: Step) -> None:
        """The driver's step to the reporters; an engine learnt with it also changes what is probed and expected,
        and the weights' page cache, once known, what this type of start is expected to take."""
        driver, sources, expect = self.driver, self.sources, self.expectations
        assert driver is not None and sources is not None
        a = step.assessment
        if a.weights is not None and expect.weights is None:
            expect.weights = a.weights
            self._expect(driver)
        if step.engine is not None:
            sources.use_endpoints(driver.profile.endpoints)
            self._expect(driver)  # the deployment key names the engine: look again now it is known
            self.known_answer(a.t)
        for ev in step.events:
            self.reporter.event(ev, a)

    def _expect(self, driver: Driver) -> None:
        self.expectations.look(driver.profile)
        driver.expect_total(self.expectations.expected_total_s)
        driver.use_budgets(self.expectations.budgets)
