"""Per-request records and the summary statistics of a benchmark run.

Conventions follow ``vllm bench serve`` (and ``sglang.bench_serving``, which agrees) so that numbers can be
compared with theirs:

* TTFT: from sending the request to the first chunk that carries generated text (queueing, prefill and the
  network included).
* ITL: the gaps between consecutive text chunks of a request, *pooled across all requests* before taking
  percentiles. With speculative decoding one chunk may carry several tokens, so ITL is per chunk, not per token.
* TPOT per request: ``(e2e_latency - ttft) / (output_tokens - 1)``, only for requests with more than one output
  token (the first token is TTFT's).
* E2E latency: from sending the request to receiving the end of the response, on the client side.
* Throughputs divide by the benchmark's wall-clock duration: ``request_throughput = completed / duration``,
  ``output_throughput = sum(output tokens of completed requests) / duration``,
  ``total_token_throughput = (input + output tokens) / duration``.

Times are stored in seconds and reported in milliseconds (``*_ms``), like the peers do.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RequestResult:
    """One request. ``error`` is None when it completed; ``timed_out`` marks failures that were timeouts."""

    index: int
    ok: bool = False
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    latency_s: float | None = None
    output_tokens: int = 0
    tokens_from_usage: bool = False  # True: the server's ``usage`` said; False: counted text chunks
    input_tokens: int | None = None  # the server's ``usage.prompt_tokens``, when given
    error: str | None = None
    timed_out: bool = False
    timings: dict[str, Any] | None = None  # llama.cpp ``timings`` of the final chunk, if any

    @property
    def tpot_s(self) -> float | None:
        if not self.ok or self.output_tokens <= 1 or self.ttft_s is None or self.latency_s is None:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def decode_rate(self) -> float | None:
        """Output tokens per second after the first token (1 / TPOT)."""
        tpot = self.tpot_s
        return 1.0 / tpot if tpot else None


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), ``q`` in 0..100."""
    if not values:
        raise ValueError("no values")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


@dataclass
class Stats:
    """mean / median / p90 / p99 of one metric, in milliseconds; ``n`` samples (0: all None)."""

    n: int = 0
    mean: float | None = None
    median: float | None = None
    p90: float | None = None
    p99: float | None = None

    @classmethod
    def of_seconds(cls, values: Sequence[float]) -> Stats:
        if not values:
            return cls()
        ms = [v * 1000.0 for v in values]
        return cls(len(ms), sum(ms) / len(ms), percentile(ms, 50), percentile(ms, 90), percentile(ms, 99))


@dataclass
class BenchResult:
    """What a benchmark measured. Failed requests are counted, never dropped: ``completed + errors + timeouts``
    is the number of requests sent (``errors`` excludes timeouts)."""

    url: str
    api: str
    model: str | None
    concurrency: int
    duration_s: float
    completed: int
    errors: int
    timeouts: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    ttft_ms: Stats
    itl_ms: Stats
    tpot_ms: Stats
    e2el_ms: Stats
    decode_rate_median: float | None  # median per-request output tokens/s after the first token
    tokens_from_usage: int  # completed requests whose token count came from the server's usage
    error_samples: dict[str, int]  # distinct error messages (at most 5) and how often each was seen
    response_timings: dict[str, float]  # llama.cpp per-response timings summed (draft_n, draft_n_accepted, ...)
    requests: list[RequestResult] = field(default_factory=list, repr=False)
    stopped_early: str | None = None  # why the benchmark stopped sending before its bounds, if it did

    @property
    def sent(self) -> int:
        return self.completed + self.errors + self.timeouts

    @property
    def all_ok(self) -> bool:
        return self.completed > 0 and self.errors == 0 and self.timeouts == 0

    def to_dict(self, per_request: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d.pop("requests")
        d["sent"] = self.sent
        d["conventions"] = "vllm bench serve: TPOT=(e2e-ttft)/(out-1) for out>1; ITL pooled across requests"
        if per_request:
            d["requests"] = [asdict(r) for r in self.requests]
        return d


def summarize(results: Sequence[RequestResult], duration_s: float, *, url: str, api: str, model: str | None,
              concurrency: int, prompt_tokens_estimate: int) -> BenchResult:
    """Aggregate request records into a :class:`BenchResult` (pure)."""
    done = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    timeouts = sum(1 for r in failed if r.timed_out)
    dur = max(duration_s, 1e-9)
    out_tokens = sum(r.output_tokens for r in done)
    in_tokens = sum(r.input_tokens if r.input_tokens is not None else prompt_tokens_estimate for r in done)
    errors = Counter(r.error or "unknown error" for r in failed)
    timings: dict[str, float] = {}
    for r in done:
        for k, v in (r.timings or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                timings[k] = timings.get(k, 0) + v
    rates = [x for r in done if (x := r.decode_rate) is not None]
    return BenchResult(
        url=url, api=api, model=model, concurrency=concurrency, duration_s=duration_s,
        completed=len(done), errors=len(failed) - timeouts, timeouts=timeouts,
        total_input_tokens=in_tokens, total_output_tokens=out_tokens,
        request_throughput=len(done) / dur, output_throughput=out_tokens / dur,
        total_token_throughput=(in_tokens + out_tokens) / dur,
        ttft_ms=Stats.of_seconds([r.ttft_s for r in done if r.ttft_s is not None]),
        itl_ms=Stats.of_seconds([gap for r in done for gap in r.itl_s]),
        tpot_ms=Stats.of_seconds([t for r in done if (t := r.tpot_s) is not None]),
        e2el_ms=Stats.of_seconds([r.latency_s for r in done if r.latency_s is not None]),
        decode_rate_median=median(rates) if rates else None,
        tokens_from_usage=sum(1 for r in done if r.tokens_from_usage),
        error_samples=dict(errors.most_common(5)),
        response_timings=timings,
        requests=list(results),
    )
