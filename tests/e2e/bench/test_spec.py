
"""Speculative-decoding acceptance read where each engine exposes it, against the simulated server's dialects.

The process-starting tests of this subject; the others: ``tests/unit/bench/test_spec.py``.
"""

from __future__ import annotations

import pytest

from firstlight.bench import BenchConfig, bench_with_spec, read_spec_decoding, spec_report
from firstlight.engines import get_profile
from tests.support.bench import running_sim

LENGTH_TOLERANCE = 0.05  # the sim rounds verify steps per request: 40 tokens / 2.5 = 16 steps exactly


def _measure(dialect: str, *spec: str) -> dict:
    with running_sim(*spec, dialect=dialect, rate=400.0) as url:
        result, report = bench_with_spec(BenchConfig(url, output_len=40, concurrency=2, num_requests=4),
                                         get_profile(dialect))
    assert result.completed == 4, result.error_samples
    return report


@pytest.mark.parametrize("dialect", ["sglang", "vllm", "llamacpp"])
def test_acceptance_length_is_reported(dialect: str):
    report = _measure(dialect, "--spec-accept", "2.5")
    assert report["status"] == "ok", report
    assert report["mean_acceptance_length"] == pytest.approx(2.5, rel=LENGTH_TOLERANCE)
    assert report["source"]


@pytest.mark.parametrize("dialect", ["sglang", "vllm", "llamacpp"])
def test_configured_but_nothing_accepted_is_said_plainly(dialect: str):
    report = _measure(dialect, "--spec-accept", "1.0")
    assert report["status"] == "zero_acceptance", report
    assert report["mean_acceptance_length"] == pytest.approx(1.0)
    assert report["acceptance_rate"] == 0.0
    assert "accepted NO draft token" in report["message"]


@pytest.mark.parametrize("dialect", ["sglang", "vllm", "llamacpp"])
def test_without_spec_decoding_it_is_not_configured(dialect: str):
    report = _measure(dialect)
    assert report["status"] == "not_configured", report
    assert report["mean_acceptance_length"] is None


def test_engines_without_acceptance_metrics_say_not_exposed():
    with running_sim(dialect="vllm") as url:
        for engine in ("tgi", "generic"):
            snap = read_spec_decoding(url, get_profile(engine))
            assert spec_report(snap, snap)["status"] == "not_exposed"
        snap = read_spec_decoding(url, None)
        assert spec_report(None, snap)["status"] == "not_exposed"
