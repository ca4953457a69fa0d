"""Helpers shared by tests/e2e/hostile/test_history.py, tests/unit/history/test_damaged_store.py."""

from __future__ import annotations

from pathlib import Path

from firstlight.history import DeploymentKey, History

KEY = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m"])


def _two_runs(path: Path) -> None:
    with History(path) as h:
        h.record_run("up", {"verdict": "ready", "cold_start_s": 10.0}, KEY)
        h.record_run("up", {"verdict": "ready", "cold_start_s": 11.0}, KEY)
