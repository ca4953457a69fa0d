"""Helpers shared by tests/e2e/llama/test_readiness.py, tests/e2e/llama/test_serving.py,
tests/e2e/report/test_readiness.py, tests/e2e/runner/test_serving_live.py, tests/e2e/vllm/test_server.py,
tests/unit/report/test_readiness.py, tests/unit/serving/test_serving.py."""

from __future__ import annotations

import time
from typing import Any

import httpx

from firstlight.assessment import Assessment, Progress
from firstlight.result import RunResult
from firstlight.runner.outcome import Outcome
from firstlight.timeline import Level

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]


def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of a readiness endpoint; (0, {}) when nothing answers."""
    try:
        r = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2)
    except httpx.HTTPError:
        return 0, {}
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, {}


def answers(port: int, path: str, status: int, **fields: Any) -> dict[str, Any] | None:
    """The body when ``path`` answers ``status`` with these body fields, else None (for wait_for)."""
    code, body = get(port, path)
    return body if code == status and all(body.get(k) == v for k, v in fields.items()) else None


# -- the reporter on its own ---------------------------------------------------------------------------------
def _assessment(verdict: str = "starting", phase: str = "weights_loading") -> Assessment:
    return Assessment(verdict, phase, Level.PORT, 3.0, [], Progress(weights_fraction=0.4, eta_total_s=42.0))


def _outcome(verdict: str, **kw: Any) -> Outcome:
    now = time.time()
    result = RunResult(verdict=verdict, phase="ready" if verdict == "ready" else "weights_loading", started_at=now,
                       ended_at=now, engine="sim", url="http://127.0.0.1:1", **kw)
    return Outcome(result, result.exit_code())
