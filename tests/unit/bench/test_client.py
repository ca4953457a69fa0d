"""The benchmark client against real sockets: the simulated server at a known token rate, and small fake servers
that refuse, stall, trickle or answer garbage. Tolerances are stated where they are asserted.

The in-process tests of this subject; the others: ``tests/e2e/bench/test_client.py``.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from firstlight.bench import BenchConfig, BenchError, run_bench
from firstlight.bench.client import synth_prompt
from firstlight.bench.metrics import RequestResult, percentile, summarize
from firstlight.sim.fixtures import free_port
from tests.support.bench import _sse_head, fake_server


def test_a_server_that_is_down_counts_errors_or_says_so_in_one_line():
    url = f"http://127.0.0.1:{free_port()}"
    r = run_bench(BenchConfig(url, model="m", num_requests=3, concurrency=2, connect_timeout=1))
    assert (r.completed, r.errors, r.timeouts) == (0, 3, 0)
    assert r.error_samples == {"connection refused": 3}
    with pytest.raises(BenchError, match="connection refused"):
        run_bench(BenchConfig(url, num_requests=1))  # the model must be discovered: nothing to count
    t0 = time.monotonic()
    r = run_bench(BenchConfig(url, model="m", num_requests=None, duration_s=60, concurrency=2, connect_timeout=1))
    assert time.monotonic() - t0 < 10 and r.stopped_early and "refused" in r.stopped_early
    assert r.errors == r.sent >= 20  # every request sent is counted


def test_a_server_that_never_answers_counts_timeouts_within_the_deadline():
    def stall(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        stop.wait(30)

    with fake_server(stall) as url:
        t0 = time.monotonic()
        r = run_bench(BenchConfig(url, model="m", num_requests=4, concurrency=2, request_timeout=0.5))
        elapsed = time.monotonic() - t0
    assert (r.completed, r.errors, r.timeouts) == (0, 0, 4)
    assert elapsed < 15  # two rounds of 0.5 s deadlines: ended by them, long before the server's 30 s stall


def test_a_server_that_trickles_forever_hits_the_overall_deadline():
    def trickle(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        _sse_head(h)
        while not stop.wait(0.05):
            h.wfile.write(b'data: {"choices": [{"index": 0, "text": "x"}]}\n\n')
            h.wfile.flush()

    with fake_server(trickle) as url:
        t0 = time.monotonic()
        r = run_bench(BenchConfig(url, num_requests=2, concurrency=2, request_timeout=0.6))
        assert time.monotonic() - t0 < 3
    assert r.timeouts == 2 and r.completed == 0
    assert any("within 0.6s" in e for e in r.error_samples)


def test_garbage_answers_are_errors_with_a_readable_reason():
    def garbage(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        body = b"<html>hello</html>\n"
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def http_500(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        body = b'{"error": "CUDA error: an illegal memory access"}'
        h.send_response(500)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with fake_server(garbage) as url:
        r = run_bench(BenchConfig(url, num_requests=2))
    assert r.errors == 2 and r.completed == 0
    assert "not a server-sent event stream" in next(iter(r.error_samples))
    with fake_server(http_500) as url:
        r = run_bench(BenchConfig(url, num_requests=1))
    assert r.errors == 1 and "HTTP 500" in next(iter(r.error_samples))


def test_models_endpoint_with_garbage_is_a_bench_error():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with pytest.raises(BenchError, match="not a model list"):
            run_bench(BenchConfig(f"http://127.0.0.1:{server.server_address[1]}", num_requests=1))
    finally:
        server.shutdown()
        server.server_close()


def test_without_usage_tokens_are_counted_as_chunks():
    def no_usage(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        _sse_head(h)
        for w in ("a", "b", "c"):
            h.wfile.write(f'data: {{"choices": [{{"index": 0, "text": "{w}"}}]}}\n\n'.encode())
        h.wfile.write(b'data: {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}\n\ndata: [DONE]\n\n')

    with fake_server(no_usage) as url:
        r = run_bench(BenchConfig(url, num_requests=1))
    assert r.completed == 1 and r.total_output_tokens == 3 and r.tokens_from_usage == 0
    assert r.model == "fake-model"


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="URL"):
        BenchConfig("ftp://x")
    with pytest.raises(ValueError, match="num_requests or duration_s"):
        BenchConfig("http://x", num_requests=None)
    with pytest.raises(ValueError, match="concurrency"):
        BenchConfig("http://x", concurrency=0)
    assert "api_key" not in BenchConfig("http://x", api_key="sk-secret").to_dict()
    assert "sk-secret" not in repr(BenchConfig("http://x", api_key="sk-secret"))


def test_prompts_have_about_the_asked_length_and_distinct_prefixes():
    a, b = synth_prompt(100, 0), synth_prompt(100, 1)
    assert len(a.split()) == 99 and a.split()[0] != b.split()[0]
    assert synth_prompt(100, 0) == a  # deterministic


def test_metrics_follow_the_vllm_conventions():
    reqs = [RequestResult(0, ok=True, ttft_s=0.1, itl_s=[0.02, 0.04], latency_s=0.16, output_tokens=3),
            RequestResult(1, ok=True, ttft_s=0.3, itl_s=[], latency_s=0.3, output_tokens=1),
            RequestResult(2, error="HTTP 500: x"), RequestResult(3, error="deadline", timed_out=True)]
    r = summarize(reqs, 2.0, url="u", api="completions", model="m", concurrency=1, prompt_tokens_estimate=10)
    assert (r.completed, r.errors, r.timeouts, r.sent) == (2, 1, 1, 4)
    assert r.tpot_ms.n == 1 and r.tpot_ms.median == pytest.approx(30.0)  # (0.16-0.1)/(3-1); 1-token request skipped
    assert r.itl_ms.n == 2 and r.itl_ms.mean == pytest.approx(30.0)
    assert r.output_throughput == pytest.approx(2.0) and r.request_throughput == pytest.approx(1.0)
    assert r.total_token_throughput == pytest.approx((20 + 4) / 2.0)
    assert percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)  # numpy's linear method
    d = r.to_dict()
    assert d["sent"] == 4 and "requests" not in d and "TPOT" in d["conventions"]
