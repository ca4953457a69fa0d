"""What the commands share: the exit codes, the one usage error, checked option types, the option groups of the
start commands (``up``, ``watch``, ``probe``, ``--unit``) and the Config parts built from them.

Every module of the CLI may import this one; it imports none of them, so ``app`` (the start commands) and
``unit`` (``--unit``) share it without importing each other.

Bad input is a usage error (exit 64, EX_USAGE) in one line, naming the option, before anything starts: ``nan``
never compares, ``inf`` and ``1e12`` overflow timers, a negative timeout is rejected deep inside socket code, a
host that does not resolve would look like a server that never opens its port.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import click

from firstlight.config import AfterReadyConfig, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import detect_from_command, get_profile, read_command
from firstlight.engines.profile import EngineProfile
from firstlight.redact import Redactor
from firstlight.vocab import EXIT_CODES, EXIT_INTERNAL, EXIT_REGRESSION, EXIT_USAGE
from firstlight.wire import normalise_url, split_url
from firstlight.wire.deadline import resolve

EXIT_OK = 0
EXIT_FAILED = EXIT_CODES["failed"]
EXIT_TIMEOUT = EXIT_CODES["timeout"]
EXIT_INTERRUPTED = EXIT_CODES["interrupted"]
MAX_TIMEOUT_S = 86_400.0  # one day: longer than any cold start, small enough for every timer


class UsageFailure(click.UsageError):
    """The usage error of every command: exit 64 (click's own is 2, which means 'hung' here), shown as one line.
    ``usage``: also click's usage block, for what click's parser refused (a wrong option or argument), where the
    list of options helps; the command's own checks say all there is in their line."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, ctx: click.Context | None = None, usage: bool = False) -> None:
        super().__init__(message, ctx)
        self.usage = usage

    def show(self, file: IO[Any] | None = None) -> None:
        if self.usage:
            super().show(file)
        else:
            click.echo(f"Error: {self.format_message()}", file=file, err=True)


class Command(click.Command):
    """A click command whose usage errors exit 64 (EX_USAGE) even when run on its own."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            if e.exit_code == EXIT_USAGE:
                raise
            raise UsageFailure(e.format_message(), e.ctx, usage=True) from None


# -- checked option types --------------------------------------------------------------------------------------
class Seconds(click.ParamType):
    """A number of seconds: finite, above 0 and at most ``maximum``."""

    name = "seconds"

    def __init__(self, maximum: float = MAX_TIMEOUT_S) -> None:
        self.maximum = maximum

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float | int) and not isinstance(value, bool):
            number = float(value)
        else:
            try:
                number = float(str(value))
            except ValueError:
                number = math.nan
        name = param.opts[0] if param is not None and param.opts else "value"
        if not math.isfinite(number) or number <= 0 or number > self.maximum:
            raise UsageFailure(f"{name} {value}: give a number of seconds above 0 and at most {self.maximum:g}")
        return number


class FiniteRange(click.FloatRange):
    """A FloatRange that also refuses ``nan`` (which passes every comparison) and infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            name = param.opts[0] if param is not None and param.opts else "value"
            raise UsageFailure(f"{name} {value}: give a finite number")
        return number


TIMEOUT = Seconds()
PERIOD = Seconds(maximum=3600.0)  # sampling and polling periods: above 0, so nothing busy-loops
GRACE = Seconds(maximum=3600.0)

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def options(*opts: Decorator) -> Decorator:
    """Several click options as one decorator, listed in the order ``--help`` shows them."""

    def apply(f: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed(opts):
            f = opt(f)
        return f

    return apply


# -- the option groups of the start commands -------------------------------------------------------------------
probe_options = options(  # up, watch and probe: how to talk to the server
    click.option("--engine", default=None, help="Engine profile (default: detect). "
                 "One of: sglang, vllm, llamacpp, tgi, trtllm, lmdeploy, ollama, generic."),
    click.option("--api", type=click.Choice(["completions", "chat"]), default="completions", show_default=True,
                 help="Which endpoint the generation probe uses."),
    click.option("--prompt", default=None, help="Prompt of the generation probe (deterministic: temperature 0)."),
    click.option("--max-tokens", type=click.IntRange(1, 4096), default=8, show_default=True),
    click.option("--expect", default=None, metavar="REGEX",
                 help="The generated text must match this regular expression."),
    click.option("--served-model", default=None,
                 help="Model name sent in requests (default: the first one /v1/models lists)."),
    click.option("--api-key", envvar="FIRSTLIGHT_API_KEY", default=None,
                 help="Bearer token for the server (or FIRSTLIGHT_API_KEY). Never printed."),
    click.option("--health-path", default=None, help="Override the engine's health endpoint."),
    click.option("--connect-timeout", type=TIMEOUT, default=1.0, show_default=True,
                 help="Connect timeout of every probe, seconds."),
    click.option("--read-timeout", type=TIMEOUT, default=5.0, show_default=True,
                 help="Read timeout of health and model-list requests (each request must also end within "
                      "connect + read timeout, however the server trickles)."),
    click.option("--generation-timeout", type=TIMEOUT, default=120.0, show_default=True,
                 help="Read timeout of a generation probe (separate from the polling period)."),
    click.option("--json", "as_json", is_flag=True, help="JSON Lines events on stdout; the last is the summary."),
)

after_ready_options = options(  # up and watch: what to do once READY holds, and how to remember it
    click.option("--warmup", type=click.IntRange(0, 1000), default=0, show_default=True,
                 help="After READY, send N requests one by one: first vs steady-state latency."),
    click.option("--bench", "bench", is_flag=True, help="After READY, run a short streaming benchmark "
                 "(TTFT, ITL, TPOT, throughput) and read speculative-decoding acceptance."),
    click.option("--bench-requests", type=click.IntRange(1), default=32, show_default=True),
    click.option("--bench-concurrency", type=click.IntRange(1, 4096), default=4, show_default=True),
    click.option("--bench-duration", type=click.FloatRange(0, min_open=True), default=60.0, show_default=True,
                 help="Upper bound on the benchmark's time, seconds."),
    click.option("--bench-output-len", type=click.IntRange(1), default=64, show_default=True),
    click.option("--history", "history_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
                 help="Run history database (default: $FIRSTLIGHT_HISTORY, else the user data directory)."),
    click.option("--no-history", is_flag=True, help="Neither read nor write the run history."),
    click.option("--fail-on-regression", is_flag=True,
                 help="Exit 4 when the cold start or throughput is worse than the baseline by over --margin."),
    click.option("--margin", type=click.FloatRange(0, 10), default=0.2, show_default=True,
                 help="Regression margin, as a fraction of the baseline."),
)

watch_options = options(  # up and watch (the long-running commands): when to give up, what to sample
    click.option("--timeout", type=TIMEOUT, default=3600.0, show_default=True,
                 help="Overall deadline in seconds."),
    click.option("--stall-timeout", type=TIMEOUT, default=120.0, show_default=True,
                 help="No progress of any kind for this long: hung."),
    click.option("--spin-timeout", type=TIMEOUT, default=900.0, show_default=True,
                 help="Only CPU/GPU busy, nothing else moving, for this long: hung (busy-wait)."),
    click.option("--serving-interval", type=FiniteRange(0, 3600), default=10.0, show_default=True,
                 help="After READY, while supervising or as a sidecar: one 1-token generation when the "
                      "engine's counters showed nothing completed for this long (0: no serving checks)."),
    click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
                 help="Model weights on disk, for the fraction read (default: from the command line)."),
    click.option("--poll-min", type=PERIOD, default=0.1, show_default=True,
                 help="Polling period right after a change or a new log line."),
    click.option("--poll-max", type=PERIOD, default=1.0, show_default=True,
                 help="Polling period after a quiet spell."),
    click.option("--sample-interval", type=PERIOD, default=1.0, show_default=True,
                 help="Process and GPU sampling period."),
    click.option("--record", type=click.Path(path_type=Path), default=None,
                 help="Write every observation to this JSON Lines file (to replay through the judge)."),
    click.option("--report", "report_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
                 help="When the run ends, whatever the verdict, draw it as a self-contained HTML page here."),
    click.option("--trace", "trace_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
                 help="When the run ends, write it as Chrome trace-event JSON here (ui.perfetto.dev)."),
    click.option("--plain", is_flag=True, help="Plain lines on a terminal too (no live dashboard)."),
    click.option("--metrics-port", default=None, metavar="[HOST:]PORT",
                 help="Serve firstlight's view (phase, verdict, progress, ETA, starts) as Prometheus metrics "
                      "on HOST:PORT/metrics while it runs; PORT alone binds 127.0.0.1."),
    click.option("--deployment", default=None, envvar="FIRSTLIGHT_DEPLOYMENT", metavar="NAME",
                 help="The deployment label of firstlight_info in the metrics (default: the history's "
                      "deployment hash once known)."),
    click.option("--serve-readiness", default=None, metavar="HOST:PORT",
                 help="Serve /readyz, /livez and /startupz (Kubernetes probes) from firstlight's state; "
                      "PORT alone binds 127.0.0.1. With watch: a sidecar that watches start after start."),
    click.option("--member", "members", multiple=True, metavar="URL",
                 help="A member of a multi-node start (repeatable): the base URL of that node's own firstlight "
                      "--serve-readiness. The leader's /readyz is then the group's (docs/multinode.md)."),
    click.option("--member-port", type=click.IntRange(1, 65535), default=8081, show_default=True,
                 help="Under LeaderWorkerSet (LWS_* env, on the leader): the members' readiness port."),
)


# -- the Config parts built from them ------------------------------------------------------------------------
def profile_for(engine: str | None, command: Sequence[str] = ()) -> EngineProfile:
    """``--engine``, else the one the command line names, else generic."""
    name = engine or detect_from_command(list(command)) or "generic"
    try:
        return get_profile(name)
    except ValueError as e:
        raise UsageFailure(str(e)) from None


def probe_config(url: str, profile: EngineProfile, kw: dict[str, Any], resolve_within: float = 10.0) -> ProbeConfig:
    try:
        url = normalise_url(url)
        host, port = split_url(url)
    except ValueError as e:
        raise UsageFailure(str(e)) from None
    if kw.get("poll_min", 0.1) > kw.get("poll_max", 1.0):
        raise UsageFailure("--poll-min must not be above --poll-max")
    try:  # a typo in the host would otherwise look like a server that never opens its port, until --timeout
        resolve(host, port, resolve_within)  # bounded: getaddrinfo itself has no timeout
    except TimeoutError:
        raise UsageFailure(f"cannot resolve host {host!r} of {url} (no answer from the resolver)") from None
    except OSError as e:
        raise UsageFailure(f"cannot resolve host {host!r} of {url} ({e.strerror or e})") from None
    ep = profile.endpoints
    return ProbeConfig(
        url=url, api=kw["api"], prompt=kw["prompt"], max_tokens=kw["max_tokens"], expect=kw["expect"],
        model=kw["served_model"], api_key=kw["api_key"], health_path=kw["health_path"] or ep.health,
        models_path=ep.models, completions_path=ep.completions, chat_path=ep.chat,
        connect_timeout=kw["connect_timeout"], read_timeout=kw["read_timeout"],
        generation_timeout=kw["generation_timeout"],
        min_interval=kw.get("poll_min", 0.1), max_interval=kw.get("poll_max", 1.0),
        explicit=frozenset({"health_path"} if kw["health_path"] else ()),
    )


def check_expect(expect: str | None) -> None:
    if expect is None:
        return
    try:
        re.compile(expect)
    except re.error as e:
        raise UsageFailure(f"--expect is not a valid regular expression: {e}") from None


def judge_config(kw: dict[str, Any]) -> JudgeConfig:
    for name in ("timeout", "stall_timeout", "spin_timeout"):
        if kw[name] <= 0:
            raise UsageFailure(f"--{name.replace('_', '-')} must be positive")
    return JudgeConfig(timeout=kw["timeout"], stall_timeout=kw["stall_timeout"], spin_timeout=kw["spin_timeout"])


def after_ready_config(kw: dict[str, Any]) -> tuple[AfterReadyConfig, HistoryConfig]:
    after = AfterReadyConfig(warmup=kw["warmup"], bench=kw["bench"], bench_requests=kw["bench_requests"],
                             bench_concurrency=kw["bench_concurrency"], bench_duration=kw["bench_duration"],
                             bench_output_len=kw["bench_output_len"])
    history = HistoryConfig(enabled=not kw["no_history"], path=kw["history_path"],
                            fail_on_regression=kw["fail_on_regression"], margin=kw["margin"])
    return after, history


def url_from_command(command: Sequence[str], profile: EngineProfile) -> str:
    url = read_command(command, engine=profile.name, env=os.environ).url  # the server inherits this environment
    if url is None:
        raise UsageFailure("cannot tell the server's port from its command line; pass --url")
    return url


def redactor_for(command: Sequence[str], api_key: str | None) -> Redactor:
    """The secrets of this run: in the server's command line, the environment, and the API key."""
    r = Redactor()
    r.add_from_argv(command)
    r.add_from_env()
    r.add(api_key)
    return r


__all__ = ["EXIT_FAILED", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REGRESSION", "EXIT_TIMEOUT",
           "EXIT_USAGE", "GRACE", "PERIOD", "TIMEOUT", "Command", "FiniteRange", "Seconds", "UsageFailure",
           "after_ready_config", "after_ready_options", "check_expect", "judge_config", "options", "probe_config",
           "probe_options", "profile_for", "redactor_for", "url_from_command", "watch_options"]
