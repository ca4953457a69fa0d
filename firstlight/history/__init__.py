"""Run history: past starts and benchmarks per deployment, baselines, regressions and start-time estimates."""

from __future__ import annotations

from firstlight.history.errors import Unreachable
from firstlight.history.store import (
    DIRECTION,
    KINDS,
    STARTS,
    DeploymentKey,
    History,
    HistoryError,
    Regression,
    Run,
    StartEstimate,
    default_path,
    extract_metrics,
    is_good,
)

__all__ = [
    "DIRECTION",
    "KINDS",
    "STARTS",
    "DeploymentKey",
    "History",
    "HistoryError",
    "Regression",
    "Run",
    "StartEstimate",
    "Unreachable",
    "default_path",
    "extract_metrics",
    "is_good",
]
