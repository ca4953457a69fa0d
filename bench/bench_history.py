"""What a start spends on its history, SQLite against a shared PostgreSQL. Run by hand (PostgreSQL 15 from
Debian's package, started here as in the tests, on loopback in a temporary directory; about a minute):

    .venv/bin/python bench/bench_history.py [--runs 30] [--starts 10000]

1. **A start's history work**: what one `firstlight up` does with its history, timed whole: open it (connect
   and check the schema), the ETA, the regression check, the two baselines, the anatomy's baseline run, and the
   record of the run (one transaction). The median of ``--runs`` starts, each on a deployment with 20 past starts.
2. **Baselines of a big deployment**: the ETA, the cold-start baseline and the regression check of a deployment
   with ``--starts`` past starts in the history (the fleet's): the median of ``--runs`` reads.

Prints one JSON object; docs/benchmarks.md quotes the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.history import DeploymentKey, History  # noqa: E402
from tests.support.postgres import postgres_server  # noqa: E402


def _summary(s: float) -> dict[str, Any]:
    return {"verdict": "ready", "started_at": 1000.0, "ready_at": 1000.0 + s, "start_type": {"type": "cold"}}


def _key(name: str) -> DeploymentKey:
    return DeploymentKey.create("vllm", name, ["vllm", "serve", name], 1)


def a_start(where: str | Path, key: DeploymentKey) -> None:
    """The history work of one start, as the session does it."""
    with History(where, busy_timeout=1.0) as h:
        h.expected_start(key, "cold")
        h.check_regression(key, cold_start_s=41.0, start_type="cold")
        h.baseline(key, "cold_start_s", start_type="cold")
        h.baseline(key, "output_throughput")
        h.runs(key, limit=50)
        h.record_run("up", _summary(41.0), key)


def baselines(h: History, key: DeploymentKey) -> None:
    h.expected_start(key, "cold")
    h.baseline(key, "cold_start_s", start_type="cold")
    h.check_regression(key, cold_start_s=41.0, start_type="cold")


def _median_ms(fn: Callable[[], None], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


def measure(where: str | Path, runs: int, starts: int) -> dict[str, float]:
    small, big = _key("small-model"), _key("big-model")
    with History(where) as h:
        for i in range(20):
            h.record_run("up", _summary(40.0 + i % 3), small)
        t0 = time.perf_counter()
        for i in range(starts):
            h.record_run("up", _summary(40.0 + i % 7), big, created_at=1e9 + i)
        filled = time.perf_counter() - t0
        read_ms = _median_ms(lambda: baselines(h, big), runs)
    return {"start_history_ms": _median_ms(lambda: a_start(where, small), runs),
            "baselines_of_big_deployment_ms": read_ms, "record_run_ms": round(filled / starts * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--starts", type=int, default=10_000)
    a = ap.parse_args()
    os.environ.setdefault("FIRSTLIGHT_NODE", "bench")
    with tempfile.TemporaryDirectory() as d:
        os.environ["XDG_STATE_HOME"] = d
        out: dict[str, Any] = {"runs": a.runs, "starts": a.starts,
                               "sqlite": measure(Path(d) / "h.sqlite3", a.runs, a.starts)}
        with postgres_server() as pg:
            out["postgresql"] = measure(pg.url, a.runs, a.starts)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
