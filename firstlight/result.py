"""The run's result: one typed, immutable record, built only by the constructors in this module.

The session makes it from the judge's final assessment (``from_judge``), then derives new versions as the run
goes on (checks after READY, the history's comparison, serving that ended, the server stopped): each step
returns a new ``RunResult`` instead of rewriting a shared dict, so every reporter (console, JSON Lines,
systemd, Prometheus, readiness endpoints) reads the same facts. ``to_dict`` is the JSON summary docs/usage.md
documents.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from firstlight.analysis import analyse
from firstlight.anatomy import compare_clocks
from firstlight.deaths import CRASH_SIGNALS, OOM_HOST_HINT, crash_hint, describe_exit, exit_signal
from firstlight.summary import (
    AnatomyDict,
    BaselineDict,
    EngineClockDict,
    EtaDict,
    EvidenceDict,
    FirstGeneration,
    ForecastDict,
    KnownAnswerDict,
    PhaseDict,
    ProgressDict,
    RegressionDict,
    StartTypeDict,
    json_schema,
)
from firstlight.vocab import FAILED, INTERRUPTED, READY, REGRESSION, SERVING_VERDICTS, TIMEOUT, exit_code

if TYPE_CHECKING:
    from firstlight.assessment import Assessment, Evidence
    from firstlight.judge import Judge


@dataclass(frozen=True)
class RunFacts:
    """What the session knows about the run besides the judge's view."""

    started_at: float
    engine: str
    url: str
    pid: int | None = None
    command: list[str] | None = None  # secrets already masked
    requests: dict[str, int] = field(default_factory=dict)
    server_log: str | None = None
    cold_start_s: float | None = None
    disk: dict[str, Any] | None = None  # the device's measured read rates (preflight --disk, from the history)


@dataclass(frozen=True)
class RunResult:
    verdict: str
    phase: str
    started_at: float
    ended_at: float
    engine: str
    url: str
    level: str = "none"
    detail: str | None = None
    failure: str | None = None
    hint: str | None = None
    evidence: Annotated[tuple[dict[str, Any], ...], list[EvidenceDict]] = ()
    ready_at: float | None = None
    cold_start_s: float | None = None
    levels: dict[str, float] = field(default_factory=dict)
    phases: Annotated[tuple[dict[str, Any], ...], list[PhaseDict]] = ()
    first_generation: Annotated[dict[str, Any] | None, FirstGeneration | None] = None
    engine_ready_at: float | None = None
    pid: int | None = None
    command: list[str] | None = None
    progress: Annotated[dict[str, Any], ProgressDict] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    server_log: str | None = None
    # after READY
    warmup: dict[str, Any] | None = None
    bench: dict[str, Any] | None = None
    spec_decoding: dict[str, Any] | None = None
    post_ready_error: str | None = None
    # the history's comparison
    baseline: Annotated[dict[str, Any] | None, BaselineDict | None] = None
    regression: Annotated[tuple[dict[str, Any], ...] | None, list[RegressionDict] | None] = None
    history_run: int | None = None
    history_uid: str | None = None  # the run's unique id in the history: stored, or waiting in the spool
    # before launch, and at the end
    preflight: dict[str, Any] | None = None
    server_stopped: str | None = None
    unit: dict[str, Any] | None = None  # --unit: the unit, the invocation judged, every attempt
    container: dict[str, Any] | None = None  # --container: the container, the start judged, every attempt
    # where the time went and what bound it (firstlight.anatomy)
    anatomy: Annotated[dict[str, Any] | None, AnatomyDict | None] = None
    # the engine's own figures beside the anatomy (firstlight.anatomy)
    engine_clock: Annotated[dict[str, Any] | None, EngineClockDict | None] = None
    # cold, warm_page_cache, restored, ... with evidence (firstlight.starts)
    start_type: Annotated[dict[str, Any] | None, StartTypeDict | None] = None
    engine_version: str | None = None  # as the engine's log says it
    # the ETA this start was given from the history, and what it came from
    eta: Annotated[dict[str, Any] | None, EtaDict | None] = None
    # the first answer recorded as this deployment's known answer, or checked against it (--known-answer)
    known_answer: Annotated[dict[str, Any] | None, KnownAnswerDict | None] = None
    # what the start was forecast to take and whether it fits, said before it began, graded after (firstlight.forecast)
    forecast: Annotated[dict[str, Any] | None, ForecastDict | None] = None

    # -- reading -------------------------------------------------------------------------------------------
    @property
    def serving(self) -> bool:
        """The server served (READY held), whatever was found about it afterwards (a regression)."""
        return self.verdict in SERVING_VERDICTS

    @property
    def elapsed_s(self) -> float:
        return round(self.ended_at - self.started_at, 3)

    def exit_code(self, fail_on_regression: bool = False) -> int:
        return exit_code(self.verdict, fail_on_regression)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            d[f.name] = list(v) if isinstance(v, tuple) else v
        d["elapsed_s"] = self.elapsed_s
        return d

    # -- building ------------------------------------------------------------------------------------------
    @classmethod
    def from_judge(cls, judge: Judge, a: Assessment, facts: RunFacts) -> RunResult:
        found = analyse(judge, a, cold_start_s=facts.cold_start_s, command=facts.command, disk=facts.disk)
        kind = found.start_type
        evidence = tuple(e.to_dict() for e in a.evidence)
        if "restored" in kind["labels"]:  # a silent start that serves: say why the stall rules did not fire
            rules = judge.rules
            why = (f"did not fire: READY {facts.cold_start_s:.1f}s after the start, before stall_timeout "
                   f"{rules.stall_timeout:g}s (no progress) and spin_timeout {rules.spin_timeout:g}s (busy without "
                   "progress) could pass; a silent start that serves is restored, not hung")
            stall = {"signal": "stall_rules", "value": why, "since": None}
            evidence = (*evidence, *kind["evidence"]["restored"], stall)
        return cls(
            start_type=kind, engine_version=found.engine_version,
            verdict=a.verdict, phase=a.phase, detail=a.detail, failure=a.failure, hint=a.hint,
            evidence=evidence,
            started_at=facts.started_at, ended_at=facts.started_at + a.elapsed_s, ready_at=judge.ready_at,
            cold_start_s=facts.cold_start_s, level=a.level.label,
            levels={lv.label: t for lv, t in sorted(judge.ladder.since.items())},
            phases=tuple(judge.phases.dicts()), first_generation=judge.first_generation,
            engine=facts.engine, engine_ready_at=judge.engine_ready.t if judge.engine_ready else None,
            url=facts.url, pid=facts.pid, command=facts.command, progress=a.progress.to_dict(),
            requests=dict(facts.requests),
            notes=tuple(n.message if n.source in n.message else f"{n.source}: {n.message}" for n in judge.tree.notes),
            server_log=facts.server_log,
            anatomy=found.summary_anatomy, engine_clock=found.engine_clock,
        )

    @classmethod
    def launch_failed(cls, judge: Judge, a: Assessment, facts: RunFacts, error: Evidence) -> RunResult:
        """The command could not be started at all (no such executable, not executable)."""
        return dataclasses.replace(cls.from_judge(judge, a, facts), verdict=FAILED, failure="other",
                                   hint="check the command: the executable must exist",
                                   evidence=(error.to_dict(),), ended_at=error.since or facts.started_at)

    @classmethod
    def preflight_failed(cls, facts: RunFacts, report: dict[str, Any], check: str, category: str, hint: str | None,
                         evidence: list[dict[str, Any]], now: float) -> RunResult:
        """The preflight ``check`` failed before launch: no server process was started."""
        return cls(verdict=FAILED, phase="process_start", failure=category, hint=hint, evidence=tuple(evidence),
                   started_at=facts.started_at, ended_at=now, engine=facts.engine, url=facts.url,
                   command=facts.command, preflight=report,
                   detail=f"preflight {check} failed: no server was started")

    def with_checks(self, checks: dict[str, Any]) -> RunResult:
        """Warm-up, benchmark and speculative decoding, measured against the serving server."""
        return dataclasses.replace(self, warmup=checks.get("warmup"), bench=checks.get("bench"),
                                   spec_decoding=checks.get("spec_decoding"),
                                   post_ready_error=checks.get("post_ready_error"))

    def with_history(self, baseline: dict[str, Any] | None, regression: list[dict[str, Any]] | None,
                     history_run: int | None, note: str | None = None, uid: str | None = None) -> RunResult:
        """The comparison with this deployment's baseline. A regression is a finding about a server that serves:
        it replaces ``ready``, never a failure, and never stops anything."""
        verdict = REGRESSION if regression and self.verdict == READY else self.verdict
        notes = (*self.notes, note) if note else self.notes
        return dataclasses.replace(self, verdict=verdict, baseline=baseline,
                                   regression=tuple(regression) if regression else None,
                                   history_run=history_run, history_uid=uid, notes=notes)

    def with_eta(self, eta: dict[str, Any] | None) -> RunResult:
        """The history's ETA of this start (``firstlight.history.policy.StartEstimate``)."""
        return dataclasses.replace(self, eta=eta)

    def with_forecast(self, forecast: dict[str, Any] | None) -> RunResult:
        """The forecast said before the start, graded against it (``firstlight.forecast.grade``)."""
        return dataclasses.replace(self, forecast=forecast)

    def with_known_answer(self, entry: dict[str, Any] | None) -> RunResult:
        """The first answer as recorded or checked (``firstlight.answers``): the history finds it again."""
        return dataclasses.replace(self, known_answer=entry)

    def with_anatomy_baseline(self, vs: dict[str, Any] | None) -> RunResult:
        """The anatomy against the deployment's baseline run's (firstlight.anatomy.compare)."""
        if self.anatomy is None or vs is None:
            return self
        return dataclasses.replace(self, anatomy={**self.anatomy, "vs_baseline": vs})

    def with_engine_clock(self, a: Assessment) -> RunResult:
        """The engine's figures again, with those read after READY (its endpoints), as the judge's latest
        assessment carries them."""
        return dataclasses.replace(self, engine_clock=compare_clocks(self.anatomy, list(a.clocks)))

    def with_preflight(self, report: dict[str, Any] | None) -> RunResult:
        return dataclasses.replace(self, preflight=report)

    def with_unit(self, unit: dict[str, Any]) -> RunResult:
        return dataclasses.replace(self, unit=unit)

    def with_container(self, container: dict[str, Any]) -> RunResult:
        return dataclasses.replace(self, container=container)

    def interrupted(self, signal: str, t: float, when: str) -> RunResult:
        """SIGINT/SIGTERM (or SIGHUP/SIGQUIT) after READY: during the checks, or while serving."""
        ev = {"signal": "signal", "value": f"{signal} received {when}", "since": t}
        return dataclasses.replace(self, verdict=INTERRUPTED, evidence=(ev,), ended_at=t)

    def died_serving(self, code: int | None, now: float, oom: tuple[str, ...] = (), pid: int | None = None
                     ) -> RunResult:
        """``oom``: the OOM-kill traces seen meanwhile (the server's cgroup counters, the kernel log), read as
        before READY: a kill by a signal, or an end nobody could tell, with such a trace is ``oom``. ``pid``:
        the process that ended, where it is not the one launched (a sidecar's watched pid)."""
        served = now - (self.ready_at or now)
        who = f"server pid {pid}" if pid is not None else "server"
        ev = {"signal": "process", "value": f"{who} {describe_exit(code)} after serving for {served:.0f}s",
              "since": now}
        name = exit_signal(code)
        if oom and (name is not None or code is None):
            traces = tuple({"signal": "memory", "value": f"OOM kill: {t}", "since": now} for t in oom)
            return dataclasses.replace(self, verdict=FAILED, phase="serving", failure="oom", ended_at=now,
                                       hint=OOM_HOST_HINT, evidence=(ev, *traces))
        if name in CRASH_SIGNALS:  # a native crash while serving is named like one at startup
            return dataclasses.replace(self, verdict=FAILED, phase="serving", failure="crashed", ended_at=now,
                                       hint=crash_hint(name), evidence=(ev,))
        return dataclasses.replace(self, verdict=FAILED, phase="serving", failure="other", ended_at=now,
                                   hint="the server exited after it was serving; read its last log lines",
                                   evidence=(ev,))

    def ended_serving(self, signal: str, what: str, now: float) -> RunResult:
        """A watched server (not launched by us) stopped serving: its process exited, or its port closed."""
        served = now - (self.ready_at or now)
        ev = {"signal": signal, "value": f"{what} after serving for {served:.0f}s", "since": now}
        return dataclasses.replace(self, verdict=FAILED, phase="serving", failure="other", ended_at=now,
                                   hint="the server stopped after it was serving; read its last log lines",
                                   evidence=(ev,))

    @classmethod
    def never_started(cls, url: str, engine: str, started_at: float, signal: str, now: float) -> RunResult:
        """Stopped by a signal while waiting for a server that never came (a sidecar's first wait)."""
        ev = {"signal": "signal", "value": f"{signal} received while waiting for the server to start", "since": now}
        return cls(verdict=INTERRUPTED, phase="process_start", started_at=started_at, ended_at=now, engine=engine,
                   url=url, evidence=(ev,))

    @classmethod
    def no_invocation(cls, url: str, engine: str, now: float, why: str, *, live: bool, error: bool,
                      interrupted: bool, unit: dict[str, Any]) -> RunResult:
        """A unit watch found no invocation to judge. Stopped by a signal first: interrupted. The unit is not
        running (``live``, systemd says so) or its journal cannot be read (``error``): failed. A journal file
        with no entries of the unit in time: a timeout."""
        if interrupted:
            verdict, why = INTERRUPTED, "interrupted before an invocation of the unit appeared"
        else:
            verdict = FAILED if live or error else TIMEOUT
        ev = {"signal": "systemd" if live else "journal", "value": why, "since": now}
        return cls(verdict=verdict, phase="process_start", started_at=now, ended_at=now, engine=engine, url=url,
                   failure="other" if verdict == FAILED else None,
                   hint="start the unit (firstlight up --unit UNIT restarts it and watches the start)",
                   evidence=(ev,), unit=unit)

    def stopped(self, how: str) -> RunResult:
        return dataclasses.replace(self, server_stopped=how)


__all__ = ["RunFacts", "RunResult", "summary_dict", "summary_schema"]


def summary_schema() -> dict[str, Any]:
    """The JSON Schema of a run's summary (``RunResult.to_dict``), generated from :class:`RunResult`'s fields: a
    field's ``Annotated`` shape (``firstlight.summary``) where it holds a dict, else its type."""
    hints = typing.get_type_hints(RunResult, include_extras=True)
    props = {f.name: json_schema(hints[f.name]) for f in dataclasses.fields(RunResult)}
    props["elapsed_s"] = {"type": "number"}
    required = sorted(props)
    props["event"] = {"const": "summary"}  # the summary line of --json (report/jsonl.py) names itself
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "firstlight run summary",
            "type": "object", "properties": props, "required": required, "additionalProperties": False}


def summary_dict(result: Any) -> dict[str, Any]:
    """The JSON summary of a run result (a typed result's ``to_dict()``, or a dict as it is)."""
    to_dict = getattr(result, "to_dict", None)
    return to_dict() if callable(to_dict) else dict(result)
