"""Helpers shared by tests/e2e/report/test_prometheus.py, tests/unit/report/test_prometheus.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from firstlight.report.prometheus import PrometheusExporter
from firstlight.result import RunResult
from firstlight.sim.fixtures import free_port


# -- the fleet's series, from the exporter on its own ----------------------------------------------------------
def _result(verdict: str = "ready", **kw: Any) -> RunResult:
    base: dict[str, Any] = {"phase": "ready" if verdict in ("ready", "regression") else "weights_loading",
                            "started_at": 1000.0, "ended_at": 1030.0, "engine": "vllm", "url": "http://127.0.0.1:1"}
    if verdict in ("ready", "regression"):
        base.update(ready_at=1030.0, cold_start_s=30.0)
    return RunResult(verdict=verdict, **{**base, **kw})


def _one_start(ex: PrometheusExporter, result: RunResult, model: str | None = "/data/models/Qwen2-7B") -> None:
    """What a Session tells its reporters about one start, as often as it tells it."""
    ex.started({"started_at": result.started_at, "engine": result.engine, "model": model})
    ex.verdict(dataclasses.replace(result, regression=None, verdict="ready") if result.verdict == "regression"
               else result)
    ex.summary(result)  # the session's last line...
    ex.summary(result)  # ...and a supervising policy's own summary of the same start


@pytest.fixture
def exporter() -> Iterator[tuple[PrometheusExporter, int]]:
    port = free_port()
    ex = PrometheusExporter(port, deployment="chat-prod")
    yield ex, port
    ex.close()
