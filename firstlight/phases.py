"""The phases of one start: each phase's span, as the server's log or the probes moved it (forward only); the
current phase against the budget learned from this deployment's earlier good starts (what status, /startupz and
the metrics carry, and what the past-budget rule reads); the time to READY by phase. The judge moves the phases
and reads them (``firstlight.judge``); nothing here decides a verdict."""

from __future__ import annotations

from typing import Any

from firstlight.assessment import Event, PhaseSpan, Progress
from firstlight.budgets import Budgets, PhaseBudget, QuietTracker, phase_eta
from firstlight.engines.profile import EngineProfile
from firstlight.timeline import Level, Probe
from firstlight.vocab import PHASE_INDEX, RELABELS


class PhaseTracker:
    """The start's phases, the first (``process_start``) from the moment the watch began; each phase entered is
    also told to the phases' silences (``QuietTracker``)."""

    def __init__(self, started_at: float, quiet: QuietTracker, spin_timeout: float) -> None:
        self.spans: list[PhaseSpan] = [PhaseSpan("process_start", started_at, source="start")]
        self.quiet = quiet
        self.spin_timeout = spin_timeout
        self.budgets: Budgets | None = None  # this deployment's learned phase budgets (its history), if any
        quiet.enter("process_start", started_at)

    @property
    def current(self) -> PhaseSpan:
        return self.spans[-1]

    def enter(self, t: float, name: str, source: str, line: int | None = None) -> list[Event]:
        """Phases only move forward within one start (whatever moved them: a log line or a probe), but for a
        relabel (``vocab.RELABELS``): a download found while the phase after it has shown no progress yet renames
        that phase's span (the caller says it showed none: the line interpreter, or the judge for the hub cache)."""
        current = self.spans[-1]
        if (RELABELS.get(name) == current.name and source != "probe"
                and (len(self.spans) < 2 or PHASE_INDEX[self.spans[-2].name] < PHASE_INDEX[name])):
            current.name = name  # from where it began: its start, its source and line stay
            self.quiet.enter(name, t)
            return [Event(t, "phase", name, {"source": source, "line": line, "relabel": RELABELS[name]})]
        if PHASE_INDEX[name] <= PHASE_INDEX[current.name]:
            return []
        current.end = t
        self.spans.append(PhaseSpan(name, t, source=source, line=line))
        self.quiet.enter(name, t)
        return [Event(t, "phase", name, {"source": source, "line": line})]

    def probed(self, p: Probe, profile: EngineProfile, role: str, engine_ready: bool) -> list[Event]:
        """A rung held (not READY's) moves the phase where the log has not: the engine's health up (warmup), its
        port or HTTP answering (http_listening)."""
        if (p.level == Level.HEALTH and not engine_ready and self.before("warmup")
                and profile.endpoints.health not in profile.endpoints.lying_while_loading):
            # the engine's health says it is up (Ollama's "/" says so before any model loads: not a phase)
            return self.enter(p.t, "warmup", "probe")
        if (p.level in (Level.PORT, Level.HTTP) and role != "worker" and not profile.endpoints.listens_before_ready
                and self.before("http_listening")):
            return self.enter(p.t, "http_listening", "probe")
        return []

    def before(self, phase: str) -> bool:
        """Is the current phase earlier than ``phase``? (Probe-derived phases only move forward.)"""
        return PHASE_INDEX[self.spans[-1].name] < PHASE_INDEX[phase]

    def start_of(self, name: str, default: float) -> float:
        for span in self.spans:
            if span.name == name:
                return span.start
        return default

    def close(self, now: float) -> None:
        """The verdict is final: the current phase ends there (or where it already ended)."""
        self.spans[-1].end = self.spans[-1].end or now
        self.quiet.close(self.spans[-1].end)

    def dicts(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.spans]

    def budget(self) -> PhaseBudget | None:
        """The current phase's learned budget, if its history gives one."""
        return self.budgets.get(self.spans[-1].name) if self.budgets is not None else None

    def silence_allowed(self, budget: PhaseBudget) -> float:
        """How long a phase past its budget may go without strong progress: its usual longest silence with its
        margin, at most spin_timeout (without measured silences: spin_timeout)."""
        lim = budget.silence_limit_s
        return self.spin_timeout if lim is None else min(lim, self.spin_timeout)

    def budget_use(self, now: float) -> dict[str, Any] | None:
        """The current phase against its learned budget (None: no history was read): what status, /startupz and
        the metrics carry."""
        if self.budgets is None:
            return None
        span = self.spans[-1]
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
                "silence_s": round(self.quiet.silence(now), 3),
                "silence_limit_s": round(self.silence_allowed(budget), 3), "note": budget.source}

    def weigh(self, now: float, p: Progress, ready: bool) -> Progress:
        """``p`` with the current phase against its budget and, before READY, the ETA by phase: where the start
        is, against what each phase usually takes (closer than the whole start's median)."""
        p.phase_budget = self.budget_use(now)
        span = self.spans[-1]
        by_phase = phase_eta(self.budgets, span.name, max(now - span.start, 0.0)) if not ready else None
        if by_phase is not None:
            p.eta_total_s = by_phase
        return p


__all__ = ["PhaseTracker"]
