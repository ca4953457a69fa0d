"""Benchmark a running server the way ``vllm bench serve`` does, warm it up, and read its spec-decoding counters.

>>> from firstlight.bench import BenchConfig, run_bench
>>> result = run_bench(BenchConfig("http://127.0.0.1:8000", concurrency=4, num_requests=32))  # doctest: +SKIP
"""

from __future__ import annotations

from firstlight.bench.client import (
    BenchConfig,
    BenchError,
    WarmupResult,
    detect_engine,
    list_models,
    run_bench,
    run_warmup,
)
from firstlight.bench.metrics import BenchResult, RequestResult, Stats
from firstlight.bench.spec import SpecSnapshot, bench_with_spec, read_spec_decoding, spec_report

__all__ = [
    "BenchConfig",
    "BenchError",
    "BenchResult",
    "RequestResult",
    "SpecSnapshot",
    "Stats",
    "WarmupResult",
    "bench_with_spec",
    "detect_engine",
    "list_models",
    "read_spec_decoding",
    "run_bench",
    "run_warmup",
    "spec_report",
]
