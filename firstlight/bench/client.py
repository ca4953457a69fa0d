"""A small streaming benchmark client for OpenAI-compatible servers, and a warm-up runner.

``run_bench`` keeps ``concurrency`` requests in flight (closed loop, like ``vllm bench serve --max-concurrency``
with an infinite request rate) until ``num_requests`` were sent or ``duration_s`` passed, whichever comes first.
Every request streams (SSE) and asks for ``usage`` with ``stream_options.include_usage`` so that output tokens
are the server's count; without it we count text chunks. Every request has a connect timeout, a read timeout
and an overall deadline (``request_timeout``), so a server that trickles bytes cannot hold the benchmark.
See :mod:`firstlight.bench.metrics` for the definitions of TTFT, ITL, TPOT and the throughputs.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import httpx

from firstlight.bench.metrics import BenchResult, RequestResult, median, summarize
from firstlight.errors import FirstlightError
from firstlight.probes.identify import identify_engine
from firstlight.wire import (
    AsyncWire,
    LineTooLong,
    NotJSON,
    SSELines,
    Wire,
    WireError,
    chunk_text,
    clean_text,
    join_url,
    model_ids,
    normalise_url,
    parse_json,
)
from firstlight.wire.content import MAX_SSE_LINE, snippet

APIS = ("completions", "chat")
PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_MAX_STREAM_BYTES = 16 << 20
# Short words that are one token in common tokenizers, for synthetic prompts of about N tokens.
_WORD_TEXT = (
    "the of and to in is it that for on with as was at by be this are or from an but not have one all we can her "
    "has there been if more when will would who so no time out up do about into than them some could only other "
    "new then its also two first any may these after most over way did"
)
_WORDS = tuple(_WORD_TEXT.split())


class BenchError(FirstlightError):
    """The benchmark cannot run at all: the server cannot be reached or answers something unusable."""


@dataclass
class BenchConfig:
    """What to send, how hard, and for how long. ``num_requests`` and ``duration_s`` both bound the run (the
    first reached stops it; at least one must be set). ``api_key`` is sent, never stored or printed."""

    url: str
    api: str = "completions"  # completions | chat
    model: str | None = None  # None: the first id /v1/models lists
    prompt_len: int = 128  # approximate prompt length in tokens (synthetic prompt)
    output_len: int = 128  # max_tokens
    concurrency: int = 1
    num_requests: int | None = 32
    duration_s: float | None = None
    request_timeout: float = 120.0  # overall deadline of one request (also its read timeout)
    connect_timeout: float = 5.0
    api_key: str | None = field(default=None, repr=False)
    ignore_eos: bool = False  # send ignore_eos so every request generates output_len tokens
    temperature: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        self.url = normalise_url(self.url)
        if self.api not in APIS:
            raise ValueError(f"api must be one of {', '.join(APIS)}, not {self.api!r}")
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("set num_requests or duration_s (or both)")
        for name in ("prompt_len", "output_len", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.num_requests is not None and self.num_requests < 1:
            raise ValueError("num_requests must be at least 1")
        for name in ("duration_s", "request_timeout", "connect_timeout"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive, finite number of seconds")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("api_key")
        return d


@dataclass
class WarmupResult:
    """Sequential warm-up requests: how much slower the first was than the steady state, and when it settled.

    ``steady_s`` is the median end-to-end latency of the requests after the first; ``steady_index`` is the first
    request index from which every successful request stays within ``tolerance`` of ``steady_s`` (None: never
    settled, or too few requests to tell).
    """

    requests: list[RequestResult]
    tolerance: float
    first_s: float | None
    steady_s: float | None
    steady_index: int | None

    @property
    def errors(self) -> int:
        return sum(1 for r in self.requests if not r.ok)

    @property
    def slowdown(self) -> float | None:
        if self.first_s is None or not self.steady_s:
            return None
        return self.first_s / self.steady_s

    def to_dict(self) -> dict[str, Any]:
        return {"n": len(self.requests), "errors": self.errors, "first_s": self.first_s, "steady_s": self.steady_s,
                "steady_index": self.steady_index, "slowdown": self.slowdown, "tolerance": self.tolerance,
                "latencies_s": [r.latency_s for r in self.requests],
                "error_samples": sorted({r.error for r in self.requests if r.error})[:5]}


# --- discovery (sync, short) ----------------------------------------------------------------------------------

USER_AGENT = "firstlight-bench"


def http_get(url: str, path: str, *, api_key: str | None = None, connect_timeout: float = 2.0,
             read_timeout: float = 5.0, transport: httpx.BaseTransport | None = None) -> tuple[int, bytes]:
    """GET through the wire layer: connect/read timeouts, a deadline on every byte, a capped body. Raises
    :class:`firstlight.wire.WireError`."""
    with Wire(url, api_key=api_key, connect_timeout=connect_timeout, user_agent=USER_AGENT,
              transport_=transport) as wire:
        a = wire.get(path, read_timeout=read_timeout)
        return a.status, a.body


def list_models(url: str, *, api_key: str | None = None, connect_timeout: float = 5.0,
                read_timeout: float = 10.0, path: str = "/v1/models") -> list[str] | None:
    """Model ids from the model list (the wire's parser, as the readiness probe reads it); ``None`` if the
    server has no such endpoint (404/405). Raises :class:`BenchError` when the server cannot be reached or
    answers garbage."""
    shown_url = normalise_url(url)
    try:
        status, body = http_get(url, path, api_key=api_key, connect_timeout=connect_timeout,
                                read_timeout=read_timeout)
    except WireError as e:
        raise BenchError(f"GET {join_url(shown_url, path)}: {e}") from None
    if status in (404, 405):
        return None
    if status != 200:
        raise BenchError(f"GET {path} -> {status}: {snippet(body, 120)}")
    try:
        ids = model_ids(parse_json(body))
    except NotJSON:
        ids = None
    if ids is None:
        raise BenchError(f"GET {path} -> 200 but not a model list: {snippet(body, 120)!r}")
    return ids


def detect_engine(url: str, *, api_key: str | None = None, timeout: float = 2.0) -> str | None:
    """The engine behind ``url`` from its endpoints (/v1/models owned_by, /server_info, /props, /version,
    /metrics ...), all asked at once; ``None`` when nothing says. ``timeout`` bounds it all."""
    with Wire(url, api_key=api_key, connect_timeout=timeout, user_agent=USER_AGENT) as wire:
        found = identify_engine(wire, budget_s=timeout)
    return found[0] if found else None


def with_model(cfg: BenchConfig) -> BenchConfig:
    """``cfg`` with ``model`` filled from /v1/models when it is None (BenchError if that fails)."""
    if cfg.model is not None:
        return cfg
    models = list_models(cfg.url, api_key=cfg.api_key, connect_timeout=cfg.connect_timeout,
                         read_timeout=min(cfg.request_timeout, 30.0))
    if models == []:
        raise BenchError("GET /v1/models lists no model; pass the model name")
    return replace(cfg, model=models[0] if models else None)


# --- requests -------------------------------------------------------------------------------------------------


def synth_prompt(n_tokens: int, index: int, seed: int = 0) -> str:
    """About ``n_tokens`` tokens of filler; the request index comes first so that no two prompts share a
    prefix (prefix caching would otherwise make every request after the first a cache hit)."""
    rng = random.Random(seed * 1_000_003 + index)
    words = [f"{index}:"] + [rng.choice(_WORDS) for _ in range(max(0, n_tokens - 2))]
    return " ".join(words)


def request_body(cfg: BenchConfig, index: int) -> dict[str, Any]:
    body: dict[str, Any] = {"max_tokens": cfg.output_len, "temperature": cfg.temperature, "stream": True,
                            "stream_options": {"include_usage": True}}
    prompt = synth_prompt(cfg.prompt_len, index, cfg.seed)
    if cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if cfg.model:
        body["model"] = cfg.model
    if cfg.ignore_eos:
        body["ignore_eos"] = True
    return body


class _BadAnswer(FirstlightError):
    """One request's answer is unusable: counted as an error, the run goes on."""


async def _error_body(resp: httpx.Response) -> bytes:
    raw = b""
    async for chunk in resp.aiter_bytes():
        raw += chunk
        if len(raw) > 2000:
            break
    return raw


async def _events(resp: httpx.Response) -> AsyncIterator[dict[str, Any] | None]:
    """The JSON events of an SSE answer; None for ``[DONE]``, and then no more. Lines are split here with a
    capped pending line and a cap on the whole answer, so a stream without newlines cannot eat memory."""
    lines = SSELines(MAX_SSE_LINE)
    size = 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > _MAX_STREAM_BYTES:
            raise _BadAnswer(f"answer larger than {_MAX_STREAM_BYTES >> 20} MiB")
        try:
            got = lines.feed(chunk)
        except LineTooLong as e:
            raise _BadAnswer(str(e)) from None
        for line in got:
            if not line or line.startswith(":") or line.startswith(("event:", "id:", "retry:")):
                continue
            if not line.startswith("data:"):
                raise _BadAnswer(f"not a server-sent event stream: {clean_text(line, 80)!r}")
            data = line[5:].strip()
            if data == "[DONE]":
                yield None
                return
            try:
                obj = parse_json(data)
            except NotJSON:
                raise _BadAnswer(f"bad JSON in the stream: {clean_text(data, 80)!r}") from None
            if not isinstance(obj, dict):
                raise _BadAnswer(f"unexpected event in the stream: {clean_text(data, 80)!r}")
            yield obj


async def _stream(wire: AsyncWire, cfg: BenchConfig, res: RequestResult, t0: float, deadline_at: float) -> None:
    chat = cfg.api == "chat"
    body = request_body(cfg, res.index)
    last = t0
    chunks = 0
    finished = False
    usage: dict[str, Any] | None = None
    async with wire.stream("POST", PATHS[cfg.api], json=body, deadline_at=deadline_at,
                           budget_s=cfg.request_timeout) as resp:
        if resp.status_code != 200:
            raise _BadAnswer(f"HTTP {resp.status_code}: {snippet(await _error_body(resp), 160)}")
        async for obj in _events(resp):
            if obj is None:  # [DONE]
                finished = True
                break
            if obj.get("error"):
                err = obj["error"]
                msg = err.get("message") if isinstance(err, dict) else err
                raise _BadAnswer(f"error in the stream: {clean_text(str(msg), 160)}")
            now = time.perf_counter()
            if chunk_text(obj, chat):
                if res.ttft_s is None:
                    res.ttft_s = now - t0
                else:
                    res.itl_s.append(now - last)
                last = now
                chunks += 1
            choices = obj.get("choices")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict) and choices[0].get(
                    "finish_reason"):
                finished = True
            if isinstance(obj.get("usage"), dict):
                usage = obj["usage"]
            if isinstance(obj.get("timings"), dict):
                res.timings = obj["timings"]
        end = time.perf_counter()
    if not finished:
        raise _BadAnswer(f"stream ended before the answer did ({chunks} text chunks)")
    if chunks == 0:
        raise _BadAnswer("no generated text in the stream")
    res.latency_s = end - t0
    completion = usage.get("completion_tokens") if usage else None
    if isinstance(completion, int) and completion > 0:
        res.output_tokens, res.tokens_from_usage = completion, True
    else:
        res.output_tokens = chunks
    prompt_tokens = usage.get("prompt_tokens") if usage else None
    res.input_tokens = prompt_tokens if isinstance(prompt_tokens, int) else None
    res.ok = True


async def _one(wire: AsyncWire, cfg: BenchConfig, index: int) -> RequestResult:
    res = RequestResult(index)
    t0 = time.perf_counter()
    deadline_at = time.monotonic() + cfg.request_timeout
    try:  # the wire ends every byte by the deadline; wait_for is the second net
        await asyncio.wait_for(_stream(wire, cfg, res, t0, deadline_at), cfg.request_timeout + 1.0)
    except asyncio.TimeoutError:
        res.error, res.timed_out = f"no complete answer within {cfg.request_timeout:g}s", True
    except WireError as e:
        res.error, res.timed_out = str(e), e.timed_out
    except _BadAnswer as e:
        res.error = str(e)
    except Exception as e:  # whatever a server sends, a request ends as a counted error
        res.error = f"{type(e).__name__}: {clean_text(str(e), 160)}"
    if not res.ok:
        res.latency_s = time.perf_counter() - t0
    return res


def _client(cfg: BenchConfig) -> AsyncWire:
    return AsyncWire(cfg.url, api_key=cfg.api_key, connect_timeout=cfg.connect_timeout,
                     read_timeout=cfg.request_timeout, concurrency=cfg.concurrency, user_agent=USER_AGENT)


def fail_fast_after(concurrency: int) -> int:
    """Consecutive failures, with nothing completed yet, after which a benchmark stops sending: a server that
    refuses everything should not be hammered for the whole --duration."""
    return max(20, 2 * concurrency)


async def _closed_loop(cfg: BenchConfig, on_request: Callable[[RequestResult], None] | None
                       ) -> tuple[list[RequestResult], float, str | None]:
    results: list[RequestResult] = []
    counter = itertools.count()
    start = time.perf_counter()
    stop_at = start + cfg.duration_s if cfg.duration_s is not None else None
    limit = fail_fast_after(cfg.concurrency)
    state: dict[str, Any] = {"ok": False, "failed_in_a_row": 0, "stopped": None}

    async def worker(client: AsyncWire) -> None:
        while (stop_at is None or time.perf_counter() < stop_at) and state["stopped"] is None:
            i = next(counter)
            if cfg.num_requests is not None and i >= cfg.num_requests:
                return
            r = await _one(client, cfg, i)
            results.append(r)
            state["ok"] = state["ok"] or r.ok
            state["failed_in_a_row"] = 0 if r.ok else state["failed_in_a_row"] + 1
            if not state["ok"] and state["failed_in_a_row"] >= limit and state["stopped"] is None:
                state["stopped"] = f"stopped early: the first {limit} requests all failed ({r.error})"
            if on_request is not None:
                on_request(r)

    async with _client(cfg) as client:
        await asyncio.gather(*(worker(client) for _ in range(cfg.concurrency)))
    return sorted(results, key=lambda r: r.index), time.perf_counter() - start, state["stopped"]


def run_bench(cfg: BenchConfig, on_request: Callable[[RequestResult], None] | None = None) -> BenchResult:
    """Run the benchmark and summarize it (see the module docstring). Requests that fail are counted as
    errors or timeouts in the result; :class:`BenchError` only when the model must be discovered and cannot be.
    When the first :func:`fail_fast_after` requests all fail, it stops sending and says so in ``stopped_early``.
    The duration is wall-clock from the first request sent to the last answer received."""
    cfg = with_model(cfg)
    results, duration, stopped = asyncio.run(_closed_loop(cfg, on_request))
    result = summarize(results, duration, url=cfg.url, api=cfg.api, model=cfg.model, concurrency=cfg.concurrency,
                       prompt_tokens_estimate=cfg.prompt_len)
    result.stopped_early = stopped
    return result


def run_warmup(cfg: BenchConfig, n: int, tolerance: float = 0.2) -> WarmupResult:
    """Send ``n`` requests one after another (concurrency and num_requests of ``cfg`` are ignored) and tell how
    the latency settled: the first request after a cold start often pays for lazy compilation, cache
    allocation or autotuning, and should not count in a benchmark."""
    if n < 1:
        raise ValueError("n must be at least 1")
    cfg = with_model(replace(cfg, concurrency=1, num_requests=n, duration_s=None))

    async def sequential() -> list[RequestResult]:
        async with _client(cfg) as client:
            return [await _one(client, cfg, i) for i in range(n)]

    reqs = asyncio.run(sequential())
    ok = [(r.index, r.latency_s) for r in reqs if r.ok and r.latency_s is not None]
    first = reqs[0].latency_s if reqs[0].ok else None
    rest = [lat for i, lat in ok if i > 0]
    steady = median(rest) if rest else None
    steady_index: int | None = None
    if steady and len(rest) >= 2:
        for i, _ in ok:
            if all(abs(lat - steady) <= tolerance * steady for j, lat in ok if j >= i):
                steady_index = i
                break
    return WarmupResult(reqs, tolerance, first, steady, steady_index)
