"""Watching a systemd unit start: one session per attempt, where an attempt is one invocation of the unit.

A unit restarted by ``Restart=on-failure`` gets a new ``InvocationID``: that is a new attempt, judged from
its own lines and processes only. Each failed attempt is reported with its evidence (an ``attempt`` event),
and the watch goes on while systemd restarts the unit, up to ``--max-attempts``; the last attempt's verdict
is the watch's, and its summary carries every attempt (``unit.attempts``).

Two ways to know the unit:

* live: ``systemctl show`` gives the invocation, MainPID, cgroup, ExecStart (the URL and engine), restarts
  and the start timeout; the journal is followed with ``journalctl -u``;
* ``--journal-file``: a journal file (being written, or copied from another machine) is all there is: the
  invocations come from it, and the processes from ``--cgroup DIR`` when given.

(The journal file and systemctl are independent here: the tests give both, with a systemctl double.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from firstlight.assessment import Assessment
from firstlight.config import Config
from firstlight.engines.profile import EngineProfile
from firstlight.history.store import HistoryError
from firstlight.redact import Redactor
from firstlight.report.base import Reporter
from firstlight.result import RunResult
from firstlight.runner.after_ready import deployment_key, open_history
from firstlight.runner.outcome import Outcome
from firstlight.runner.restarts import HeldReporter, Loop, Step, report_attempt
from firstlight.runner.session import Session
from firstlight.samplers.base import Sampler
from firstlight.samplers.oom import OomTraces, memory_dirs
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.units.cgroup import CgroupSampler, cgroup_dir, read_pids
from firstlight.units.journal.follow import JournalFollower, JournalSource
from firstlight.units.sources import UnitSources
from firstlight.units.systemctl import Systemctl, SystemctlError, UnitState
from firstlight.vocab import FAILED, HUNG, INTERRUPTED

AGAIN = (FAILED, HUNG)  # verdicts after which systemd's next attempt is worth watching
POLL_S = 0.25


def engine_command(exec_start: Sequence[str]) -> tuple[list[str], str | None]:
    """The engine's command line in a unit's ExecStart, and the URL firstlight was told there, if any: the
    command itself, or what follows ``--`` when the unit runs ``firstlight up ... -- CMD`` (the notify
    wrapper)."""
    argv = list(exec_start)
    if argv and Path(argv[0]).name == "firstlight" and "--" in argv:
        opts = argv[1:argv.index("--")]
        url = opts[opts.index("--url") + 1] if "--url" in opts[:-1] else None
        return argv[argv.index("--") + 1:], url
    return argv, None


def start_timeout_warning(state: UnitState, expected_s: float | None) -> str | None:
    """A ``TimeoutStartSec`` shorter than the start this deployment usually takes, where it bites: a
    ``Type=notify`` (or forking/oneshot) unit whose main process is not firstlight (which extends it)."""
    limit = state.timeout_start_s
    if expected_s is None or limit is None or state.type not in ("notify", "notify-reload", "forking", "oneshot"):
        return None
    if state.exec_start and Path(state.exec_start[0]).name == "firstlight":
        return None
    if expected_s <= limit:
        return None
    return (f"{state.id}: TimeoutStartSec={limit:.0f}s is shorter than this deployment's usual start "
            f"({expected_s:.0f}s, median of its ready starts): systemd will kill the start before it is ready; "
            "raise TimeoutStartSec, or run the engine under firstlight (Type=notify, it sends "
            "EXTEND_TIMEOUT_USEC= while the start progresses)")


@dataclass
class UnitOptions:
    unit: str
    journal_file: Path | None = None
    cgroup: Path | None = None  # the unit's cgroup directory, instead of ControlGroup from systemctl
    max_attempts: int = 1
    restart_wait: float = 120.0  # after a failed attempt, how long to wait for systemd's next one
    restart_first: bool = False  # `up --unit`: restart (or start) the unit, then watch the new invocation
    stop_on_interrupt: bool = False


@dataclass(frozen=True)
class Invocation:
    """One attempt to watch: systemd's invocation of the unit (and its state then, live)."""

    number: int
    id: str
    state: UnitState | None


@dataclass
class Attempt:
    number: int
    invocation: str
    verdict: str
    phase: str
    failure: str | None
    hint: str | None
    evidence: list[dict[str, Any]]
    started_at: float
    ended_at: float | None
    unit_state: str | None = None  # systemd's view after it, live

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class UnitWatch:
    def __init__(self, opts: UnitOptions, cfg: Config, profile: EngineProfile, reporter: Reporter,
                 redactor: Redactor, record: IO[str] | None = None, systemctl: Systemctl | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.opts, self.cfg, self.profile, self.reporter = opts, cfg, profile, reporter
        self.redactor, self.record, self.clock = redactor, record, clock
        self.systemctl = systemctl  # None: the journal is all there is (a journal file from elsewhere)
        self.live = systemctl is not None
        self.attempts: list[Attempt] = []
        self.deadline = 0.0
        self._last_assessment: Assessment | None = None
        self.stop = threading.Event()  # set by a stop signal between attempts: every wait ends
        self._first: UnitState | None = None
        self._follower: JournalFollower

    # -- the attempts ----------------------------------------------------------------------------------------
    def run(self, first: UnitState | None = None) -> Outcome:
        """``first``: the unit's state as the CLI saw it (live), so the first attempt is its invocation."""
        started = self.clock()
        self.deadline = started + self.cfg.judge.timeout
        since = None  # the journal from where this start began (not the unit's whole history), where known
        if self.opts.restart_first:
            since = started - 5.0
        elif first is not None and first.started_at is not None:
            since = first.started_at - 5.0
        self._first = first
        self._follower = JournalFollower(self.opts.unit, self.opts.journal_file, since=since, clock=self.clock)
        self._follower.start()
        try:
            loop = Loop(self)  # attempt after attempt (runner/restarts.py); stop signals between them
            outcome = loop.run()
        finally:
            self._follower.stop()
        if outcome is None:
            return self._nothing_to_watch(self._follower, loop.signal)
        if loop.signal is not None and outcome.verdict != INTERRUPTED:
            outcome = self._interrupted(outcome, loop.signal)
        return self._finish(outcome)

    # -- the loop's three steps ------------------------------------------------------------------------------
    def next_start(self, previous: Invocation | None) -> Invocation | None:
        number = previous.number + 1 if previous is not None else 1
        first = self._first
        if number == 1 and not self.opts.restart_first:
            found = self._first_invocation(self._follower, first)
        else:
            wait = self.opts.restart_wait if number > 1 else 60.0
            after = (previous.id if previous is not None else
                     first.invocation_id if first is not None else None)
            found = self._next_invocation(self._follower, after, wait, fresh_start=number == 1)
        return Invocation(number, *found) if found is not None else None

    def watch(self, start: Invocation) -> Outcome:
        return self._attempt(start.number, start.id, start.state, self._follower)

    def after(self, start: Invocation, outcome: Outcome) -> tuple[Step, Outcome]:
        """Another attempt is worth watching after a failed or hung one, while systemd will start it."""
        if outcome.verdict not in AGAIN or start.number == self.opts.max_attempts:
            return Step.END, outcome
        if not self._restart_possible(start.id):
            return Step.END, outcome
        self._report_attempt(outcome)
        return Step.NEXT, outcome

    def _first_invocation(self, follower: JournalFollower,
                          state: UnitState | None) -> tuple[str, UnitState | None] | None:
        if self.live:
            assert state is not None
            if state.restarting:  # between two attempts: watch the next one
                return self._next_invocation(follower, state.invocation_id, self.opts.restart_wait)
            return (state.invocation_id, state) if state.invocation_id else None
        inv = follower.wait_invocation(None, max(0.0, self.deadline - self.clock()), self.stop)
        return (inv, None) if inv is not None else None

    def _next_invocation(self, follower: JournalFollower, previous: str | None, wait: float,
                         fresh_start: bool = False) -> tuple[str, UnitState | None] | None:
        """The invocation after ``previous``, from systemctl (live) or the journal, within ``wait`` seconds.
        ``fresh_start``: we just asked systemd to start the unit, so an inactive unit is not the end yet."""
        until = min(self.deadline, self.clock() + wait)
        if not self.live:
            inv = follower.wait_invocation(previous, max(0.0, until - self.clock()), self.stop)
            return (inv, None) if inv is not None else None
        assert self.systemctl is not None
        while True:
            with contextlib.suppress(SystemctlError):
                state = self.systemctl.show(self.opts.unit)
                if state.invocation_id and state.invocation_id != previous and not state.restarting:
                    return state.invocation_id, state
                if not fresh_start and not state.restarting and not state.starting_or_up:
                    return None  # failed or stopped for good: no attempt is coming
            if self.clock() >= until or self.stop.wait(POLL_S):
                return None

    def _restart_possible(self, invocation: str, settle_s: float = 10.0) -> bool:
        """Will systemd start another attempt? Live: a restart is scheduled, or has begun, or the process is
        still there (a hung start that TimeoutStartSec may yet end); waits while the unit is deactivating."""
        if not self.live:
            return True  # only the journal can tell: wait for it (--restart-wait)
        assert self.systemctl is not None
        until = self.clock() + settle_s
        while True:
            try:
                state = self.systemctl.show(self.opts.unit)
            except SystemctlError:
                return False
            if state.restarting or (state.invocation_id and state.invocation_id != invocation):
                return True
            if state.active_state in ("failed", "inactive"):
                return False
            if state.active_state != "deactivating" or self.clock() >= until or self.stop.wait(POLL_S):
                return state.starting_or_up

    def _attempt(self, number: int, invocation: str, state: UnitState | None,
                 follower: JournalFollower) -> Outcome:
        cfg = self._attempt_config(state)
        notes = self._notes(number, invocation, state, cfg)
        for n in notes:
            self.reporter.message(n)
        processes = self._process_sampler(state, cfg, lambda: self._exit_code(follower, invocation),
                                          lambda: self._unit_result(invocation))
        sources = functools.partial(UnitSources, journal=JournalSource(follower, invocation), processes=processes,
                                    notes=notes)
        session = Session(cfg, self.profile, HeldReporter(self.reporter), self.redactor, self.record, self.clock,
                          sources=sources)
        outcome = session.run()
        self.profile = session.profile  # the engine may have been learnt from the lines
        self._last_assessment = session.assess(outcome.result.ended_at) or self._last_assessment
        unit_state = None
        if self.systemctl is not None:
            with contextlib.suppress(SystemctlError):
                unit_state = self.systemctl.show(self.opts.unit).describe()
        r = outcome.result
        self.attempts.append(Attempt(number, invocation, r.verdict, r.phase, r.failure, r.hint, list(r.evidence),
                                     r.started_at, r.ended_at, unit_state))
        return outcome

    def _attempt_config(self, state: UnitState | None) -> Config:
        judge = dataclasses.replace(self.cfg.judge, timeout=max(1.0, self.deadline - self.clock()))
        pid = state.main_pid if state is not None else None
        if pid is None and self.opts.cgroup is not None:  # no systemctl: the cgroup's first process
            pid = next(iter(read_pids(self.opts.cgroup)), None)
        return dataclasses.replace(self.cfg, judge=judge, pid=pid, log_file=None, command=[])

    def _process_sampler(self, state: UnitState | None, cfg: Config, exit_code: Callable[[], int | None],
                         unit_result: Callable[[], str | None]) -> Sampler | None:
        directory = self.opts.cgroup
        if directory is None and state is not None:
            directory = cgroup_dir(state.control_group)
        if directory is not None:
            main_pid = cfg.pid if self.live else None  # without systemd, any process of the cgroup may lead
            # a v1 hierarchy keeps the memory counters under the memory controller's own mount
            memory = [directory, *memory_dirs(main_pid)] if main_pid is not None else [directory]
            oom = OomTraces(main_pid, directories=list(dict.fromkeys(memory)), unit_result=unit_result)
            return CgroupSampler(directory, main_pid, cfg.sample_interval, exit_code, self.clock, oom)
        if cfg.pid is not None:  # no cgroup directory to read (v1 without the systemd hierarchy): the tree
            return ProcessTreeSampler(cfg.pid, cfg.sample_interval, exit_code, self.clock,
                                      oom=OomTraces(cfg.pid, unit_result=unit_result))
        return None

    def _unit_result(self, invocation: str) -> str | None:
        """systemd's Result for the invocation (``oom-kill`` is an OOM-kill trace), live only."""
        if self.systemctl is None:
            return None
        with contextlib.suppress(SystemctlError):
            state = self.systemctl.show(self.opts.unit)
            if state.invocation_id == invocation:
                return state.result
        return None

    def _exit_code(self, follower: JournalFollower, invocation: str) -> int | None:
        """How the main process ended: systemd's word for it (systemctl, live), else its journal message."""
        if self.systemctl is not None:
            with contextlib.suppress(SystemctlError):
                state = self.systemctl.show(self.opts.unit)
                if state.exit_code is not None and state.invocation_id == invocation:
                    return state.exit_code
        follower.quiet_for(0.25, 2.0)  # systemd's message may be a moment behind the death
        return follower.exit_code(invocation)

    def _notes(self, number: int, invocation: str, state: UnitState | None, cfg: Config) -> list[str]:
        where = f"attempt {number} of at most {self.opts.max_attempts}: " if self.opts.max_attempts > 1 else ""
        notes = [f"{where}{self.opts.unit} invocation {invocation or '(none)'}"
                 + (f"; {state.describe()}, MainPID {state.main_pid}" if state is not None else
                    f" from {self.opts.journal_file}")]
        if state is not None:
            warning = start_timeout_warning(state, self._expected_start(cfg))
            if warning:
                notes.append(warning)
        return notes

    def _expected_start(self, cfg: Config) -> float | None:
        history = open_history(cfg, self.redactor, lambda _: None)
        if history is None:
            return None
        with contextlib.suppress(HistoryError):
            key = deployment_key(cfg, self.profile, cfg.watched_command, self.redactor)
            return history.expected_start_seconds(key)
        return None

    # -- reporting -------------------------------------------------------------------------------------------
    def _report_attempt(self, outcome: Outcome) -> None:
        a = self.attempts[-1]
        report_attempt(self.reporter, self._last_assessment, a, a.invocation, {"invocation": a.invocation},
                       "systemd's next attempt", self.opts.max_attempts, self.clock())

    def _unit_facts(self) -> dict[str, Any]:
        return {"name": self.opts.unit, "invocation": self.attempts[-1].invocation if self.attempts else None,
                "journal_file": str(self.opts.journal_file) if self.opts.journal_file else None,
                "attempt": len(self.attempts), "max_attempts": self.opts.max_attempts,
                "attempts": [a.to_dict() for a in self.attempts]}

    def _finish(self, outcome: Outcome) -> Outcome:
        unit = self._unit_facts()
        if outcome.verdict == INTERRUPTED and self.opts.stop_on_interrupt and self.systemctl is not None:
            try:
                after = self.systemctl.stop(self.opts.unit)
                unit["stopped"] = after.describe()
                self.reporter.message(f"--stop-on-interrupt: {after.describe()}")
            except SystemctlError as e:
                self.reporter.message(f"--stop-on-interrupt: could not stop {self.opts.unit}: {e}")
        elif outcome.verdict == INTERRUPTED:
            self.reporter.message(f"stopped watching; {self.opts.unit} keeps running "
                                  "(--stop-on-interrupt stops it)")
        result = outcome.result.with_unit(unit)
        self.reporter.verdict(result)
        self.reporter.summary(result)
        return Outcome(result, result.exit_code(self.cfg.history.fail_on_regression))

    def _interrupted(self, outcome: Outcome, signal_name: str) -> Outcome:
        result = outcome.result.interrupted(signal_name, self.clock(), "while waiting for systemd's next attempt")
        return Outcome(result, result.exit_code())

    def _nothing_to_watch(self, follower: JournalFollower, signal_name: str | None = None) -> Outcome:
        """No invocation to watch: the unit never started (live), or the journal has none of it in time."""
        now = self.clock()
        why = follower.error or (f"no entries of {self.opts.unit} in {self.opts.journal_file}" if not self.live
                                 else f"{self.opts.unit} has no current invocation (it is not running)")
        result = RunResult.no_invocation(self.redactor.text(self.cfg.probe.url), self.profile.name, now, why,
                                         live=self.live, error=follower.error is not None,
                                         interrupted=signal_name is not None,
                                         unit=self._unit_facts())
        self.reporter.verdict(result)
        self.reporter.summary(result)
        return Outcome(result, result.exit_code())

