"""Phase budgets learned from a deployment's own past starts: what each phase normally takes, and how long its
signals are usually silent in it, so a phase that runs far past its usual time with nothing moving is named
``hung`` long before the fixed spin clock, and a phase that is long but usual is never ``hung`` by it.

Pure: no clocks, no I/O. Three parts:

- :class:`QuietTracker`: fed by the judge with every progress mark, it keeps per phase the longest silence of
  strong progress (``silence_s``), the longest stretch with nothing moving at all (``still_s``), the longest
  silence of each signal that moved (log, disk, memory, gpu, process, probe; cpu and gpu_util are the weak ones)
  and which signals moved. The anatomy carries it per phase (``quiet``), so every start's summary stores it.
- :func:`learn`: from the anatomies of the deployment's earlier good starts of the same start type, per phase
  its duration (median, p95, min, max) and its usual silences (the longest of each over those starts). Fewer
  than :data:`MIN_STARTS` starts with a phase: no budget for it (the fixed clocks apply, and the verdict says so).
- The rule, :meth:`PhaseBudget.budget_s` and :meth:`PhaseBudget.silence_limit_s`: a phase's budget is
  ``max(3 x p95, p95 + 30 s)``; its silence allowance ``max(2 x usual longest silence, usual + 30 s)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from firstlight.formats import duration
from firstlight.vocab import PHASE_INDEX

__all__ = ["BUDGET_FACTOR", "BUDGET_FLOOR_S", "MIN_STARTS", "SILENCE_FACTOR", "SILENCE_FLOOR_S", "WEAK", "WINDOW",
           "Budgets", "PhaseBudget", "QuietTracker", "budgets_note", "learn", "limit", "p95", "phase_eta",
           "signal_class"]

MIN_STARTS = 3  # good starts with a phase before it has a learned budget
BUDGET_FACTOR = 3.0  # a phase past 3 x its p95 ...
BUDGET_FLOOR_S = 30.0  # ... and past its p95 + 30 s has run past its budget (short phases jitter by seconds)
SILENCE_FACTOR = 2.0  # no strong progress for 2 x the usual longest silence ...
SILENCE_FLOOR_S = 30.0  # ... and for the usual + 30 s is unusual (a sampler's back-off, a busy machine)
WINDOW = 20  # the newest good starts of the type a budget is learned from
WEAK = ("cpu", "gpu_util")  # busy without progress: a deadlocked collective spins


def signal_class(signal: str) -> str:
    """The class of a judge's progress signal: ``probe:health`` is a probe."""
    return signal.split(":", 1)[0]


def p95(values: Sequence[float]) -> float:
    """The 95th percentile by nearest rank (with fewer than 20 values: the largest)."""
    s = sorted(values)
    return s[max(math.ceil(0.95 * len(s)) - 1, 0)]


def limit(usual: float, factor: float, floor: float) -> float:
    """The allowance over a usual figure: ``max(factor x usual, usual + floor)``."""
    return max(factor * usual, usual + floor)


@dataclass
class _Phase:
    name: str
    start: float
    last_strong: float
    last_any: float
    last: dict[str, float] = field(default_factory=dict)
    silence: float = 0.0
    still: float = 0.0
    per_signal: dict[str, float] = field(default_factory=dict)


class QuietTracker:
    """Per phase: the longest silence of strong progress, of any progress, and of each signal that moved.
    Silences are counted within the phase (from its start at the earliest), live and in the history alike."""

    def __init__(self) -> None:
        self._cur: _Phase | None = None
        self.phases: dict[str, dict[str, Any]] = {}

    def enter(self, name: str, t: float) -> None:
        """A phase begins at ``t`` (the one before it ends there)."""
        self.close(t)
        self._cur = _Phase(name, t, t, t)

    def mark(self, t: float, signal: str, strong: bool) -> None:
        """``signal`` moved at ``t`` (strong progress, or weak: CPU or GPU busy)."""
        p = self._cur
        if p is None or t < p.start:
            return
        cls = signal_class(signal)
        p.still = max(p.still, t - p.last_any)
        p.last_any = max(p.last_any, t)
        if strong:
            p.silence = max(p.silence, t - p.last_strong)
            p.last_strong = max(p.last_strong, t)
        p.per_signal[cls] = max(p.per_signal.get(cls, 0.0), t - p.last.get(cls, p.start))
        p.last[cls] = max(p.last.get(cls, p.start), t)

    def close(self, t: float) -> None:
        """The current phase ends at ``t``: its silences up to its end are counted."""
        p = self._cur
        if p is None:
            return
        closed = self.of(p.name, max(t, p.start))
        assert closed is not None
        self.phases[p.name] = closed
        self._cur = None

    def of(self, name: str, end: float) -> dict[str, Any] | None:
        """The phase's silences: as closed, or (the current phase) up to ``end``."""
        p = self._cur
        if p is not None and p.name == name:
            return {"silence_s": round(max(p.silence, end - p.last_strong), 3),
                    "still_s": round(max(p.still, end - p.last_any), 3),
                    "signals": {c: round(max(s, end - p.last[c]), 3) for c, s in sorted(p.per_signal.items())},
                    "moved": sorted(p.per_signal)}
        return self.phases.get(name)

    def silence(self, now: float) -> float:
        """Seconds without strong progress in the current phase, at ``now``."""
        p = self._cur
        return max(now - p.last_strong, 0.0) if p is not None else 0.0


@dataclass(frozen=True)
class PhaseBudget:
    """What one phase normally takes in this deployment's good starts of one type."""

    phase: str
    starts: int  # good starts that had the phase
    start_type: str | None
    median_s: float
    p95_s: float
    min_s: float
    max_s: float
    silence_s: float | None  # the longest strong silence in it over those starts (None: none of them measured it)
    still_s: float | None  # the longest stretch with nothing moving at all
    quiet_starts: int = 0  # how many of those starts measured the silences
    per_signal: tuple[tuple[str, float], ...] = ()  # per signal that moved in every measured start: its longest silence
    moved: tuple[str, ...] = ()  # the signals that moved in every measured start

    @property
    def learned(self) -> bool:
        return self.starts >= MIN_STARTS

    @property
    def budget_s(self) -> float:
        """Past this the phase is unusually long: ``max(3 x p95, p95 + 30 s)``."""
        return limit(self.p95_s, BUDGET_FACTOR, BUDGET_FLOOR_S)

    @property
    def silence_limit_s(self) -> float | None:
        """No strong progress for longer than this is unusual in this phase; None: no start measured it."""
        if self.silence_s is None or self.quiet_starts < MIN_STARTS:
            return None
        return limit(self.silence_s, SILENCE_FACTOR, SILENCE_FLOOR_S)

    @property
    def still_limit_s(self) -> float | None:
        """Nothing at all moving for longer than this is unusual in this phase; None: not measured."""
        if self.still_s is None or self.quiet_starts < MIN_STARTS:
            return None
        return limit(self.still_s, SILENCE_FACTOR, SILENCE_FLOOR_S)

    @property
    def source(self) -> str:
        """Where the budget comes from, as the evidence says it."""
        kind = f" {self.start_type}" if self.start_type else ""
        took = (f"{duration(self.min_s)}" if self.min_s == self.max_s
                else f"{duration(self.min_s)}-{duration(self.max_s)}")
        return f"the {self.starts} earlier{kind} start{'s' if self.starts != 1 else ''} took {took} in it"

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "learned": self.learned, "starts": self.starts, "start_type": self.start_type,
                "median_s": round(self.median_s, 3), "p95_s": round(self.p95_s, 3), "min_s": round(self.min_s, 3),
                "max_s": round(self.max_s, 3), "budget_s": round(self.budget_s, 3) if self.learned else None,
                "silence_s": self.silence_s, "silence_limit_s": _r(self.silence_limit_s), "still_s": self.still_s,
                "still_limit_s": _r(self.still_limit_s), "moved": list(self.moved),
                "signals": dict(self.per_signal), "source": self.source}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


@dataclass(frozen=True)
class Budgets:
    """The phase budgets of one deployment and start type, as learned from its history."""

    start_type: str | None
    starts: int  # good starts read (of the type; of all types when the type is not known yet)
    phases: dict[str, PhaseBudget] = field(default_factory=dict)

    def get(self, phase: str) -> PhaseBudget | None:
        """The phase's learned budget; None: fewer than MIN_STARTS good starts had it."""
        b = self.phases.get(phase)
        return b if b is not None and b.learned else None

    def why_none(self, phase: str) -> str:
        """Why ``phase`` has no learned budget, as the output says it."""
        b = self.phases.get(phase)
        n = b.starts if b is not None else 0
        kind = f" {self.start_type}" if self.start_type else ""
        return (f"no learned budget for {phase}: {n} earlier good{kind} start{'s' if n != 1 else ''} had it "
                f"({MIN_STARTS} needed); the fixed clocks apply")

    def to_dict(self) -> dict[str, Any]:
        return {"start_type": self.start_type, "starts": self.starts,
                "phases": {n: b.to_dict() for n, b in self.phases.items()}}


def _base(start_type: str | None) -> str | None:
    """How the weights got there (``cold`` of ``cold+compile_cache_miss``): what a budget is learned by."""
    return start_type.split("+", 1)[0] if start_type else None


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 \
        else None


def learn(starts: Iterable[tuple[str | None, dict[str, Any] | None]], start_type: str | None,
          window: int = WINDOW) -> Budgets:
    """The budgets from earlier good starts, newest first: (their start type, their anatomy). With
    ``start_type``: only the starts of that type (by how the weights got there); without: all of them. A phase
    a start did not finish (its last before READY is finished too) counts only where its anatomy has seconds."""
    want = _base(start_type)
    used = [a for t, a in starts if isinstance(a, dict) and (want is None or _base(t) == want)][:window]
    seconds: dict[str, list[float]] = {}
    quiet: dict[str, list[dict[str, Any]]] = {}
    for anat in used:
        phases = anat.get("phases")
        if not isinstance(phases, list):
            continue
        for p in phases:
            if not isinstance(p, dict) or not isinstance(p.get("name"), str):
                continue
            s = _number(p.get("seconds"))
            if s is None:
                continue
            seconds.setdefault(p["name"], []).append(s)
            q = p.get("quiet")
            if isinstance(q, dict) and _number(q.get("silence_s")) is not None:
                quiet.setdefault(p["name"], []).append(q)
    out: dict[str, PhaseBudget] = {}
    for name, values in seconds.items():
        qs = quiet.get(name, [])
        sil = [v for q in qs if (v := _number(q.get("silence_s"))) is not None]
        still = [v for q in qs if (v := _number(q.get("still_s"))) is not None]
        moved_sets = [set(q.get("moved") or ()) for q in qs]
        moved = set.intersection(*moved_sets) if moved_sets else set()
        per: dict[str, float] = {}
        for q in qs:
            sigs = q.get("signals")
            if isinstance(sigs, dict):
                for c, v in sigs.items():
                    if c in moved and (x := _number(v)) is not None:
                        per[c] = max(per.get(c, 0.0), x)
        srt = sorted(values)
        out[name] = PhaseBudget(name, len(values), want, srt[len(srt) // 2] if len(srt) % 2 else
                                (srt[len(srt) // 2 - 1] + srt[len(srt) // 2]) / 2, p95(values), srt[0], srt[-1],
                                max(sil) if sil else None, max(still) if still else None, len(sil),
                                tuple(sorted(per.items())), tuple(sorted(moved)))
    return Budgets(want, len(used), out)


def budgets_note(b: Budgets) -> str:
    """One line for the output: which phases have a learned budget, from how many starts."""
    kind = f" {b.start_type}" if b.start_type else ""
    learned = [p for p in b.phases.values() if p.learned]
    if not learned:
        return (f"no learned phase budgets: {b.starts} earlier good{kind} start{'s' if b.starts != 1 else ''} "
                f"({MIN_STARTS} needed); the fixed clocks apply")
    return (f"phase budgets from {b.starts} earlier good{kind} starts: "
            + ", ".join(f"{p.phase} {duration(p.budget_s)}" for p in learned))


def phase_eta(b: Budgets | None, phase: str, in_phase_s: float) -> float | None:
    """Seconds to READY from what this deployment's earlier good starts of the type took in each phase: what is
    left of the current phase's median, plus the medians of the phases after it that at least half of those starts
    had. None when no earlier start had the current phase (the whole-start ETA applies)."""
    if b is None or phase not in b.phases or phase not in PHASE_INDEX:
        return None
    here = PHASE_INDEX[phase]
    later = [p.median_s for n, p in b.phases.items()
             if PHASE_INDEX.get(n, -1) > here and n != "ready" and 2 * p.starts >= b.starts]
    return max(0.0, b.phases[phase].median_s - in_phase_s) + sum(later)
