"""``firstlight bench URL``: a short serving benchmark of a running server, compared with its history."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import click

from firstlight.bench import (
    BenchConfig,
    BenchError,
    BenchResult,
    WarmupResult,
    bench_with_spec,
    detect_engine,
    run_warmup,
)
from firstlight.bench.client import with_model
from firstlight.bench.metrics import Stats
from firstlight.cli.options import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_TIMEOUT,
    TIMEOUT,
    Command,
    Seconds,
    UsageFailure,
    engine_option,
    history_option,
    number_option,
)
from firstlight.engines import get_profile
from firstlight.history import DeploymentKey, History, HistoryError
from firstlight.redact import Redactor
from firstlight.wire import clean_text

EXIT_HELP = """\b
Exit codes:
  0    every request completed (and no regression, with --fail-on-regression)
  1    failed: a request failed, the server could not be reached or answered garbage,
       or the history could not be used with --fail-on-regression
  3    timeout: no request failed otherwise, but some timed out
  4    regression against the history baseline (only with --fail-on-regression)
  64   usage error (bad option, bad URL)
  130  interrupted"""


def public_url(url: str, redactor: Redactor) -> str:
    """The URL as every command shows it (the one masker: Redactor.url)."""
    return redactor.url(url)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def format_result(r: BenchResult, engine: str | None, warm: WarmupResult | None, spec: dict[str, Any],
                  hist: dict[str, Any] | None) -> str:
    lines = [f"{r.url}  engine {engine or '?'}  model {r.model or '?'}  api {r.api}  concurrency {r.concurrency}"]
    if warm is not None:
        slow = f" ({warm.slowdown:.1f}x the steady {warm.steady_s:.2f}s)" if warm.slowdown and warm.steady_s else ""
        first = f"{warm.first_s:.2f}s" if warm.first_s is not None else "failed"
        lines.append(f"warm-up    {len(warm.requests)} requests, first {first}{slow}; not counted below")
    lines.append(f"requests   {r.sent} sent: {r.completed} completed, {r.errors} errors, {r.timeouts} timeouts "
                 f"in {r.duration_s:.2f}s")
    for msg, n in r.error_samples.items():
        lines.append(f"           {n} x {msg}")
    if r.stopped_early:
        lines.append(f"           {r.stopped_early}")
    lines.append(f"throughput {r.request_throughput:.2f} req/s, {r.output_throughput:.1f} output tok/s, "
                 f"{r.total_token_throughput:.1f} total tok/s")
    lines.append(f"{'':10} {'mean':>9} {'median':>9} {'p90':>9} {'p99':>9}  (ms)")
    stats: list[tuple[str, Stats]] = [("TTFT", r.ttft_ms), ("TPOT", r.tpot_ms), ("ITL", r.itl_ms),
                                      ("E2E", r.e2el_ms)]
    for name, s in stats:
        lines.append(f"{name:10} {_ms(s.mean):>9} {_ms(s.median):>9} {_ms(s.p90):>9} {_ms(s.p99):>9}")
    if r.completed and r.tokens_from_usage < r.completed:
        lines.append(f"note: {r.completed - r.tokens_from_usage} requests without usage: tokens counted as chunks")
    lines.append(f"spec decoding: {spec['status']}: {spec['message']}")
    if hist is not None:
        if hist.get("error"):
            lines.append(f"history: not used: {hist['error']}")
        else:
            base = hist.get("baseline_output_throughput")
            vs = f"; baseline {base:.1f} output tok/s" if base else "; first run of this deployment"
            lines.append(f"history: run {hist['run_id']} of deployment {hist['deployment']['hash']}{vs}")
            for reg in hist.get("regressions", []):
                lines.append(f"REGRESSION {reg['message']}")
    return "\n".join(line.rstrip() for line in lines)


@click.command("bench", cls=Command, epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("url")
@click.option("--api", type=click.Choice(["completions", "chat"]), default="completions", show_default=True)
@click.option("--served-model", "--model", "model", default=None,
              help="Model name sent in requests (default: the first /v1/models lists); as up's --served-model.")
@click.option("--concurrency", "-c", type=click.IntRange(1, 4096), default=1, show_default=True,
              help="Requests in flight at once.")
@click.option("--requests", "num_requests", type=click.IntRange(min=1), default=None,
              help="Requests to send (default 32, or unbounded when only --duration is given).")
@click.option("--duration", type=Seconds(7 * 86_400), default=None,
              help="Stop sending after this many seconds (with --requests: whichever comes first).")
@click.option("--prompt-len", type=click.IntRange(1, 1_000_000), default=128, show_default=True,
              help="Approximate prompt length in tokens (synthetic prompts).")
@click.option("--output-len", type=click.IntRange(1, 1_000_000), default=128, show_default=True,
              help="max_tokens of each request.")
@number_option("warmup", "Sequential warm-up requests before the benchmark, not counted.", default=1)
@engine_option("detect from the server's endpoints")
@click.option("--ignore-eos/--no-ignore-eos", default=None,
              help="Send ignore_eos so every request generates --output-len tokens (default: on for engines "
                   "that accept it).")
@click.option("--request-timeout", type=TIMEOUT, default=120.0, show_default=True,
              help="Overall deadline of one request (connect, headers and every byte of the answer), seconds.")
@click.option("--connect-timeout", type=TIMEOUT, default=5.0, show_default=True,
              help="Connect timeout, seconds (also bounds engine detection).")
@click.option("--api-key", envvar="FIRSTLIGHT_API_KEY", default=None,
              help="Bearer token for the server (or FIRSTLIGHT_API_KEY). Never printed or stored.")
@click.option("--gpus", type=click.IntRange(min=0), default=None, help="GPU count, part of the deployment key.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@history_option()
@click.option("--no-history", is_flag=True, help="Neither read nor write the history.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 4 when output throughput is below the baseline by more than --margin.")
@number_option("margin", "Allowed slack against the baseline (0.2: 20%).")
def bench_command(url: str, api: str, model: str | None, concurrency: int, num_requests: int | None,
                  duration: float | None, prompt_len: int, output_len: int, warmup: int, engine: str | None,
                  ignore_eos: bool | None, request_timeout: float, connect_timeout: float, api_key: str | None,
                  gpus: int | None, as_json: bool, history_path: Path | None, no_history: bool,
                  fail_on_regression: bool, margin: float) -> None:
    """Benchmark a running server: streaming requests at a fixed concurrency, with TTFT, TPOT, ITL and
    throughput as `vllm bench serve` defines them, spec-decoding acceptance, and a comparison with past runs.

    \b
    firstlight bench http://127.0.0.1:8000 -c 8 --requests 64 --output-len 256
    firstlight bench http://127.0.0.1:8000 --duration 60 --fail-on-regression --json
    """
    if no_history and (fail_on_regression or history_path):
        raise UsageFailure("--no-history cannot be combined with --history or --fail-on-regression")
    if num_requests is None and duration is None:
        num_requests = 32
    redactor = Redactor()
    redactor.add_from_env()
    redactor.add(api_key)
    try:
        cfg = BenchConfig(url, api=api, model=model, prompt_len=prompt_len, output_len=output_len,
                          concurrency=concurrency, num_requests=num_requests, duration_s=duration,
                          request_timeout=request_timeout, connect_timeout=connect_timeout, api_key=api_key)
    except ValueError as e:
        raise UsageFailure(str(e)) from None
    shown_url = public_url(cfg.url, redactor)
    out: dict[str, Any] = {"event": "bench", "url": shown_url, "engine": engine, "model": model}

    def finish(code: int, verdict: str, error: str | None = None) -> NoReturn:
        out.update(verdict=verdict, exit_code=code, error=redactor.text(clean_text(error, 300)) if error else None)
        if as_json:  # server error bodies end up in here too: mask anything secret-looking
            click.echo(redactor.text(json.dumps(out, default=str)))
        if error:
            click.echo(f"firstlight bench: {out['error']}", err=True)
        sys.exit(code)

    try:
        engine = engine or detect_engine(cfg.url, api_key=api_key, timeout=min(connect_timeout, 2.0))
        cfg = with_model(cfg)
        accepts = get_profile(engine).ignore_eos if engine else False  # others may refuse an unknown field
        cfg = replace(cfg, ignore_eos=ignore_eos if ignore_eos is not None else accepts)
        shown_model = clean_text(cfg.model, 200) if cfg.model else None  # a server-given name: made printable
        out.update(engine=engine, model=shown_model, config=cfg.to_dict() | {"url": shown_url, "model": shown_model})
        warm = None
        if warmup:
            warm = run_warmup(cfg, warmup)
            out["warmup"] = warm.to_dict()
            if warm.errors == len(warm.requests):
                timed_out = all(r.timed_out for r in warm.requests)
                finish(EXIT_TIMEOUT if timed_out else EXIT_FAILED, "timeout" if timed_out else "failed",
                       f"every warm-up request failed: {warm.requests[0].error}")
        result, spec = bench_with_spec(cfg, get_profile(engine) if engine else None)
    except BenchError as e:
        finish(EXIT_FAILED, "failed", str(e))
    except KeyboardInterrupt:
        finish(EXIT_INTERRUPTED, "interrupted", "interrupted")
    result.url = shown_url
    result.model = clean_text(result.model, 200) if result.model else None
    out.update(bench=result.to_dict(), spec_decoding=spec)

    if result.errors or (result.completed == 0 and not result.timeouts):
        code, verdict = EXIT_FAILED, "failed"
    elif result.timeouts:
        code, verdict = EXIT_TIMEOUT, "timeout"
    else:
        code, verdict = EXIT_OK, "ok"

    hist: dict[str, Any] | None = None
    if not no_history:
        hist = {}
        try:
            with History(history_path, warn=lambda m: click.echo(f"firstlight: warning: {m}", err=True),
                         redactor=redactor) as h:
                h.send_spooled()  # a benchmark writes a run: the node's spooled runs go first
                key = DeploymentKey.create(engine, cfg.model, None, gpus, redactor)
                regressions = (h.check_regression(key, output_throughput=result.output_throughput, margin=margin)
                               if result.all_ok else [])
                hist.update(path=str(h.path), deployment=key.to_dict(),
                            baseline_output_throughput=h.baseline(key, "output_throughput"),
                            regressions=[r.to_dict() for r in regressions], warnings=h.warnings)
                summary = {"verdict": verdict, "url": shown_url, "engine": engine, "model": cfg.model,
                           "spec_decoding": spec, "warmup": out.get("warmup")}
                hist["run_id"] = h.record_run("bench", summary, key, bench=result.to_dict())
        except HistoryError as e:
            hist["error"] = str(e)
            if fail_on_regression and code == EXIT_OK:
                code, verdict = EXIT_FAILED, "failed"
        if code == EXIT_OK and fail_on_regression and hist.get("regressions"):
            code, verdict = EXIT_REGRESSION, "regression"
        out["history"] = hist
    if not as_json:
        click.echo(redactor.text(format_result(result, engine, warm, spec, hist)))
    if hist and hist.get("error"):
        click.echo(f"firstlight bench: history not used: {hist['error']}", err=True)
    finish(code, verdict)
