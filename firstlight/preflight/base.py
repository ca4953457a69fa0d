"""What a preflight check says: a typed result per check, and the report over all of them.

A check reads the machine, the environment or the model the launch command will use, never the server
itself (it has not started). Each says ``ok``, ``warn`` or ``fail`` with evidence (what was read, where) and,
unless ok, a one-line fix. ``category`` is the failure category (firstlight/vocab.py) the check guards
against, so a ``fail`` stops ``firstlight up`` with that category.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from firstlight.vocab import CATEGORY_RANK, FAILURE_CATEGORIES

OK = "ok"
WARN = "warn"
FAIL = "fail"
STATUSES: tuple[str, ...] = (OK, WARN, FAIL)
_RANK = {OK: 0, WARN: 1, FAIL: 2}


@dataclass(frozen=True)
class Check:
    """One check's finding. ``evidence`` says what was read and where; ``hint`` is the fix (None when ok)."""

    name: str
    status: str
    category: str
    evidence: str
    hint: str | None = None
    # the measured figures behind the evidence (the weights' bytes, the read rate, each device's fit), for the
    # forecast: never a second reading of the machine
    facts: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")
        if self.category not in FAILURE_CATEGORIES:
            raise ValueError(f"category {self.category!r} is not a failure category")

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "status": self.status, "category": self.category, "evidence": self.evidence,
               "hint": self.hint}
        return {**out, "facts": self.facts} if self.facts else out


def worst(statuses: list[str]) -> str:
    return max(statuses, key=_RANK.__getitem__, default=OK)


@dataclass
class PreflightReport:
    """All checks of one preflight, in a stable order, and the verdict: the worst status among them."""

    checks: list[Check] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def verdict(self) -> str:
        return worst([c.status for c in self.checks])

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def failure(self) -> Check | None:
        """The check a failed start is reported under: the most specific category (vocab's rank), then the
        first in check order."""
        failed = self.failed
        return max(failed, key=lambda c: CATEGORY_RANK.get(c.category, 0)) if failed else None

    @property
    def facts(self) -> dict[str, Any]:
        """Every check's measured figures, merged (each check names its own)."""
        out: dict[str, Any] = {}
        for c in self.checks:
            out.update(c.facts)
        return out

    def evidence(self, since: float) -> list[dict[str, Any]]:
        """The failed checks as the run's evidence (signal, value, since): the reported one first."""
        first = self.failure
        failed = [first, *(c for c in self.failed if c is not first)] if first else []
        return [{"signal": f"preflight:{c.name}", "value": c.evidence, "since": since} for c in failed]

    def to_dict(self) -> dict[str, Any]:
        return {"event": "preflight", "verdict": self.verdict, "checks": [c.to_dict() for c in self.checks],
                "elapsed_s": round(self.elapsed_s, 3)}
