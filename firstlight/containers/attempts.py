"""A watched container's starts, one after another (:mod:`firstlight.runner.restarts`): each start its restart
policy makes (``--restart on-failure``, ``always``, ``unless-stopped``) is an attempt, judged on its own log
lines and processes, as a systemd unit's invocations are. A failed or hung attempt is reported with its
evidence (an ``attempt`` event) and the watch goes on while the runtime will start the container again, up to
``--max-attempts``; the last attempt's verdict is the watch's, and its summary carries every attempt
(``container.attempts``).

A new start is a new ``StartedAt`` with the container running (or already ended again); a restart is coming
while the runtime says ``restarting`` or the container stopped with a policy that restarts that exit
(:meth:`Container.restart_due`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from firstlight.assessment import Assessment
from firstlight.containers.runtime import Container
from firstlight.containers.watch import EXIT_SETTLE_S, Tracker
from firstlight.report.base import Reporter
from firstlight.runner.outcome import Outcome
from firstlight.runner.restarts import HeldReporter, Loop, Step, report_attempt
from firstlight.runner.session import Session
from firstlight.vocab import FAILED, HUNG, INTERRUPTED

AGAIN = (FAILED, HUNG)  # verdicts after which the runtime's next start is worth watching
POLL_S = 0.25


@dataclass(frozen=True)
class ContainerStart:
    """One start of the container: its number in this watch, and the runtime's state when it was found."""

    number: int
    container: Container


@dataclass
class ContainerAttempt:
    number: int
    started_at: str | None  # the runtime's StartedAt of this start
    restart_count: int
    verdict: str
    phase: str
    failure: str | None
    hint: str | None
    evidence: list[dict[str, Any]]
    ended_at: float | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class ContainerAttempts:
    """The attempts of one container (runner/restarts.py's ``Starts``). ``session``: one start's Session, given
    the container as found and the reporter its verdict goes to."""

    def __init__(self, tracker: Tracker, first: Container, session: Callable[[Container, Reporter], Session],
                 reporter: Reporter, max_attempts: int = 1, restart_wait: float = 120.0, *,
                 fail_on_regression: bool = False, clock: Callable[[], float] = time.time) -> None:
        self.tracker, self.first, self.session, self.reporter = tracker, first, session, reporter
        self.fail_on_regression = fail_on_regression
        self.max_attempts, self.restart_wait, self.clock = max_attempts, restart_wait, clock
        self.stop = threading.Event()  # set by a stop signal between attempts: every wait ends
        self.attempts: list[ContainerAttempt] = []
        self._last_assessment: Assessment | None = None

    def run(self) -> Outcome:
        loop = Loop(self)
        outcome = loop.run()
        assert outcome is not None  # the first start is the container as found: always watched
        if loop.signal is not None and outcome.verdict != INTERRUPTED:
            result = outcome.result.interrupted(loop.signal, self.clock(),
                                                "while waiting for the container's next start")
            outcome = Outcome(result, result.exit_code())
        result = outcome.result.with_container(self._facts())
        self.reporter.verdict(result)
        self.reporter.summary(result)
        return Outcome(result, result.exit_code(self.fail_on_regression))

    # -- the loop's three steps ------------------------------------------------------------------------------
    def next_start(self, previous: ContainerStart | None) -> ContainerStart | None:
        if previous is None:
            return ContainerStart(1, self.first)
        until = time.monotonic() + self.restart_wait
        while not self.stop.is_set():
            c = self.tracker.get(fresh=True)
            if c is None or self.tracker.gone:
                return None  # removed: no start is coming
            if c.started_at != previous.container.started_at:
                if (c.running and c.pid is not None) or c.exit_code is not None:
                    return ContainerStart(previous.number + 1, c)  # running, or already ended: judged either way
            elif not c.running and not c.restart_due():
                return None  # stopped for good
            if time.monotonic() >= until or self.stop.wait(POLL_S):
                return None
        return None

    def watch(self, start: ContainerStart) -> Outcome:
        self.tracker.watching = start.container.started_at
        session = self.session(start.container, HeldReporter(self.reporter))
        outcome = session.run()
        self._last_assessment = session.assess(outcome.result.ended_at) or self._last_assessment
        r = outcome.result
        self.attempts.append(ContainerAttempt(start.number, start.container.started_at,
                                              start.container.restart_count, r.verdict, r.phase, r.failure, r.hint,
                                              list(r.evidence), r.ended_at))
        return outcome

    def after(self, start: ContainerStart, outcome: Outcome) -> tuple[Step, Outcome]:
        if outcome.verdict not in AGAIN or start.number >= self.max_attempts:
            return Step.END, outcome
        if not self._restart_coming(start):
            return Step.END, outcome
        self._report_attempt()
        return Step.NEXT, outcome

    # -- between attempts ------------------------------------------------------------------------------------
    def _restart_coming(self, start: ContainerStart) -> bool:
        """Will the runtime start the container again? Already started again, restarting, or stopped with a
        policy that restarts this exit; a start that still runs (hung) is given the time the runtime takes to
        record an exit, then no restart is coming."""
        until = time.monotonic() + EXIT_SETTLE_S
        while not self.stop.is_set():
            c = self.tracker.get(fresh=True)
            if c is None or self.tracker.gone:
                return False
            if c.started_at != start.container.started_at or c.restart_due():
                return True
            if not c.running:
                return False
            if time.monotonic() >= until or self.stop.wait(POLL_S):
                return False
        return False

    def _report_attempt(self) -> None:
        a = self.attempts[-1]
        report_attempt(self.reporter, self._last_assessment, a, f"started {a.started_at}",
                       {"started_at": a.started_at}, "the container's next start", self.max_attempts, self.clock())

    def _facts(self) -> dict[str, Any]:
        c = self.tracker.last or self.first
        return {"name": c.name, "id": c.short_id, "runtime": self.tracker.runtime.name,
                "restart_policy": c.restart_policy or "no", "attempt": len(self.attempts),
                "max_attempts": self.max_attempts, "attempts": [a.to_dict() for a in self.attempts]}
