
"""Speculative-decoding acceptance read where each engine exposes it, against the simulated server's dialects."""

from __future__ import annotations

import pytest

from firstlight.bench import BenchConfig, SpecSnapshot, bench_with_spec, read_spec_decoding, spec_report
from firstlight.bench.spec import parse_prometheus
from firstlight.engines import get_profile
from firstlight.sim.server import free_port
from tests.test_bench import running_sim

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


def test_unreachable_metrics_are_not_exposed_not_an_exception():
    snap = read_spec_decoding(f"http://127.0.0.1:{free_port()}", get_profile("vllm"), connect_timeout=0.5)
    assert not snap.exposed and snap.notes
    assert spec_report(snap, snap)["status"] == "not_exposed"


def test_vllm_counters_are_deltas_over_the_window():
    names = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
             "vllm:spec_decode_num_accepted_tokens_total")
    before = SpecSnapshot("vllm", ("prometheus",), dict(zip(names, (1000.0, 3000.0, 2000.0), strict=True)), True, True)
    after = SpecSnapshot("vllm", ("prometheus",), dict(zip(names, (1100.0, 3300.0, 2080.0), strict=True)), True, True)
    r = spec_report(before, after)
    assert r["mean_acceptance_length"] == pytest.approx(1.8)  # 1 + 80/100, not the lifetime 3.0
    assert r["acceptance_rate"] == pytest.approx(80 / 300, abs=1e-4)  # rounded to 4 places
    assert spec_report(after, after)["status"] == "no_data"


def test_trtllm_perf_metrics_totals():
    snap = SpecSnapshot("trtllm", ("perf_metrics",), {"speculative_decoding.total_accepted_draft_tokens": 60.0,
                                                      "speculative_decoding.total_draft_tokens": 120.0}, True, True)
    r = spec_report(None, snap, output_tokens=100)
    assert r["status"] == "ok" and r["acceptance_rate"] == pytest.approx(0.5)
    assert r["mean_acceptance_length"] == pytest.approx(100 / 40)


def test_parse_prometheus_sums_counters_and_averages_gauges():
    text = """# HELP x
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp="0"} 2.0
sglang:spec_accept_length{dp="1"} 3.0
vllm:spec_decode_num_drafts_total{model_name="m",engine="0"} 10
vllm:spec_decode_num_drafts_total{model_name="m",engine="1"} 5
vllm:spec_decode_num_drafts_created{model_name="m"} 1.7e9
bad line
nan_metric NaN
"""
    p = parse_prometheus(text)
    assert p["sglang:spec_accept_length"] == 2.5
    assert p["vllm:spec_decode_num_drafts_total"] == 15
    assert "nan_metric" not in p
