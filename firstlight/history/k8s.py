"""Kubernetes probe budgets from a deployment's own history (``firstlight history --k8s-probe DEPLOYMENT``).

The published LLM charts give every model the same startup budget, about ten minutes (60 x 10 s); a start that
takes eleven restart-loops forever. This sizes the ``startupProbe`` from what this deployment's good starts
took instead:

- budget = p95 of the good cold starts x SAFETY_FACTOR. 1.5: a start half again as slow as the slowest usual
  one (a colder page cache, a busier disk, a node with slower NVMe) still fits, while a start that is stuck is
  cut off at a bound the operator can defend. The regression margin (20 %) is well inside it, so a start
  slow enough to be flagged as a regression is still not killed.
- ``periodSeconds``: 10 s for budgets of five minutes and more (the charts' value; a probe answered from
  firstlight's memory costs nothing, but 10 s is fine-grained enough against minutes), 5 s from one minute,
  else 1 s; ``failureThreshold`` = ceil(budget / period).
- the Deployment's ``progressDeadlineSeconds``: a rollout step waits for the new Pod to be Ready, which takes
  scheduling, the image pull and volume attach (PULL_MARGIN_S) on top of the start itself; its default,
  600 s, trips on a ten-minute start. Rounded up to a whole minute and never below the default.

p95 is the nearest-rank percentile (an observed start, never an interpolation above the slowest one); with
fewer than 20 good starts it is the slowest start seen, which says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

SAFETY_FACTOR = 1.5
PULL_MARGIN_S = 300  # scheduling + image pull + volume attach, on top of the start (a multi-GB engine image)
DEFAULT_PROGRESS_DEADLINE_S = 600  # Kubernetes' default for Deployment.spec.progressDeadlineSeconds
MIN_STARTS_FOR_P95 = 20  # below this, nearest-rank p95 is the maximum anyway


def nearest_rank(values: list[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0..100) of ``values``: always one of the values."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class ProbeBudget:
    deployment: str
    starts: int  # good cold starts the budget is computed from
    p50_s: float
    p95_s: float
    max_s: float
    safety_factor: float
    budget_s: float  # p95 x safety factor
    period_s: int
    failure_threshold: int
    progress_deadline_s: int

    @property
    def covered_s(self) -> int:
        """What the probe settings actually allow: period x threshold (>= budget)."""
        return self.period_s * self.failure_threshold

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "covered_s": self.covered_s}


def period_for(budget_s: float) -> int:
    return 10 if budget_s >= 300 else 5 if budget_s >= 60 else 1


def probe_budget(deployment: str, cold_starts: list[float], safety_factor: float = SAFETY_FACTOR) -> ProbeBudget:
    """startupProbe and progressDeadlineSeconds covering p95 x ``safety_factor`` of ``cold_starts`` (seconds).
    ValueError when there are none."""
    if not cold_starts:
        raise ValueError("no good cold starts")
    p95 = nearest_rank(cold_starts, 95)
    budget = p95 * safety_factor
    period = period_for(budget)
    threshold = max(1, math.ceil(budget / period))
    deadline = max(DEFAULT_PROGRESS_DEADLINE_S, math.ceil((period * threshold + PULL_MARGIN_S) / 60) * 60)
    return ProbeBudget(deployment, len(cold_starts), nearest_rank(cold_starts, 50), p95, max(cold_starts),
                       safety_factor, budget, period, threshold, deadline)


def format_budget(b: ProbeBudget, readiness_port: int = 8081) -> str:
    """YAML to paste into the engine container and the Deployment spec, every number explained."""
    p95 = "p95" if b.starts >= MIN_STARTS_FOR_P95 else f"p95 (only {b.starts} good starts: the slowest one)"
    return "\n".join([
        f"# deployment {b.deployment}: {b.starts} good cold starts, median {b.p50_s:.0f}s, {p95} {b.p95_s:.0f}s, "
        f"max {b.max_s:.0f}s",
        f"# budget = {b.p95_s:.0f}s x safety factor {b.safety_factor:g} = {b.budget_s:.0f}s",
        "startupProbe:",
        f"  httpGet: {{path: /startupz, port: {readiness_port}}}  # firstlight's --serve-readiness port",
        f"  periodSeconds: {b.period_s}",
        f"  failureThreshold: {b.failure_threshold}  # {b.failure_threshold} x {b.period_s}s = {b.covered_s}s "
        f">= {b.budget_s:.0f}s",
        "  timeoutSeconds: 2  # answered from firstlight's memory, never by the engine",
        "# in the Deployment's spec:",
        f"progressDeadlineSeconds: {b.progress_deadline_s}  # {b.covered_s}s start + {PULL_MARGIN_S}s scheduling "
        f"and image pull, whole minutes, >= the {DEFAULT_PROGRESS_DEADLINE_S}s default",
    ])
