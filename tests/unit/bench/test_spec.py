"""Speculative decoding on a real llama-server (b11434, SmolLM2-135M as its own draft model).

Whether a server drafts at all is decided from what it says about itself (``/slots``: each slot's
``speculative`` flag; ``/props``' ``speculative.types`` is always "none" in b11434) or its command line,
never from the responses alone: b11434 puts ``draft_n`` in a response's timings only when something was
drafted, so an n-gram drafter that finds no n-gram to reuse looks, from the responses, exactly like no
drafter at all.

The first tests check that logic against canned answers (no server); the rest run the real server through
``firstlight up --bench`` and ``firstlight bench URL``.

The in-process tests of this subject; the others: ``tests/e2e/llama/test_spec.py``.

The in-process tests of this subject; the others: ``tests/e2e/bench/test_spec.py``.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from firstlight.bench.spec import (
    SpecSnapshot,
    apply_command,
    configured_from_command,
    parse_prometheus,
    read_spec_decoding,
    spec_report,
)
from firstlight.engines import get_profile
from firstlight.sim.fixtures import free_port
from tests.support.llama_server import FAST, llama, server_cmd  # noqa: F401  (llama is a fixture)


def _slots(*flags: bool) -> httpx.MockTransport:
    body = [{"id": i, "n_ctx": 2048, "speculative": f, "is_processing": False} for i, f in enumerate(flags)]
    return httpx.MockTransport(lambda req: httpx.Response(200, json=body) if req.url.path == "/slots"
                               else httpx.Response(404))


@pytest.mark.parametrize(("flags", "configured"), [((False,), False), ((True,), True), ((False, True), True)])
def test_slots_say_whether_llama_server_drafts(flags: tuple[bool, ...], configured: bool):
    snap = read_spec_decoding("http://llama.test", get_profile("llamacpp"), transport=_slots(*flags))
    assert snap.exposed and snap.configured is configured


def test_configured_without_draft_counts_is_no_data_not_off():
    after = SpecSnapshot("llamacpp", ("response_timings", "slots"), configured=True, exposed=True,
                         method="ngram-simple")
    r = spec_report(None, after, {"predicted_n": 200.0, "prompt_n": 500.0})
    assert r["status"] == "no_data" and "ngram-simple" in r["message"] and "configured" in r["message"]
    off = SpecSnapshot("llamacpp", ("response_timings", "slots"), configured=False, exposed=True)
    assert spec_report(None, off, {"predicted_n": 200.0})["status"] == "not_configured"


@pytest.mark.parametrize(("engine", "command", "expected"), [
    ("llamacpp", ["llama-server", "-m", "a.gguf", "-md", "a.gguf", "--spec-type", "draft-simple"],
     (True, "draft-simple")),
    ("llamacpp", ["llama-server", "-m", "a.gguf", "--spec-type=ngram-simple"], (True, "ngram-simple")),
    ("llamacpp", ["llama-server", "-m", "a.gguf", "--spec-type", "none"], (False, None)),
    ("llamacpp", ["llama-server", "-m", "a.gguf", "-md", "a.gguf"], (None, None)),  # the server infers: ask it
    ("vllm", ["vllm", "serve", "m", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}'],
     (True, "ngram")),
    ("vllm", ["vllm", "serve", "m"], (False, None)),
    ("sglang", ["python", "-m", "sglang.launch_server"], (None, None)),
    ("llamacpp", [], (None, None)),
])
def test_configured_from_the_command_line(engine: str, command: list[str], expected: tuple[Any, Any]):
    assert configured_from_command(engine, command) == expected


def test_what_the_server_says_wins_over_the_command_line():
    snap = SpecSnapshot("llamacpp", ("slots",), configured=False, exposed=True)
    apply_command(snap, ["llama-server", "--spec-type", "ngram-simple"])
    assert snap.configured is False
    unknown = apply_command(SpecSnapshot("llamacpp", ("slots",)), ["llama-server", "--spec-type", "ngram-simple"])
    assert unknown.configured is True and unknown.method == "ngram-simple"


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
