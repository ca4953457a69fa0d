"""What the commands share: the exit codes, the one usage error, checked option types, the option groups of the
start commands (``up``, ``watch``, ``probe``, ``--unit``) and the Config parts built from them.

Every module of the CLI may import this one; it imports none of them, so ``app`` (the start commands) and
``unit`` (``--unit``) share it without importing each other.

Bad input is a usage error (exit 64, EX_USAGE) in one line, naming the option, before anything starts: ``nan``
never compares, ``inf`` and ``1e12`` overflow timers, a negative timeout is rejected deep inside socket code, a
host that does not resolve would look like a server that never opens its port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from click.shell_completion import CompletionItem

from firstlight import settings
from firstlight.config import KNOWN_ANSWER_MODES, AfterReadyConfig, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import PROFILES, ServerCommand
from firstlight.engines.profile import EngineProfile
from firstlight.errors import FirstlightError
from firstlight.history.location import Where, where
from firstlight.redact import Redactor
from firstlight.settings import DAY_S, NUMBERS, Number, SettingError
from firstlight.vocab import EXIT_CODES, EXIT_INTERNAL, EXIT_REGRESSION, EXIT_USAGE

EXIT_OK = 0
EXIT_FAILED = EXIT_CODES["failed"]
EXIT_TIMEOUT = EXIT_CODES["timeout"]
EXIT_INTERRUPTED = EXIT_CODES["interrupted"]
T = TypeVar("T")


class UsageFailure(click.UsageError, FirstlightError):
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
class Setting(click.ParamType):
    """An option checked by its one declaration in :mod:`firstlight.settings` (range, unit, whole or not): the
    API refuses the same values with the same words."""

    name = "number"

    def __init__(self, number: Number) -> None:
        self.number = number
        self.name = number.unit or ("integer" if number.integer else "number")

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return self.number.check(value)
        except SettingError as e:
            name = param.opts[0] if param is not None and param.opts else "value"
            raise UsageFailure(f"{name} {value}: {e.need}") from None


def Seconds(maximum: float = DAY_S) -> Setting:
    """A number of seconds: finite, above 0 and at most ``maximum``."""
    return Setting(Number("seconds", 1.0, 0.0, maximum, low_open=True, unit="seconds"))


def number_option(name: str, help: str | None = None, **kw: Any) -> Decorator:
    """``--NAME`` for the setting ``name``: its type, range and default from its one declaration."""
    n = NUMBERS[name]
    kw.setdefault("default", n.default)
    return click.option(f"--{name.replace('_', '-')}", name, type=Setting(n), show_default=True, help=help, **kw)


def usage(build: Callable[..., T], *args: Any, **kw: Any) -> T:
    """A settings builder called for the CLI: its refusal is the one-line usage error, naming the option."""
    try:
        return build(*args, **kw)
    except SettingError as e:
        raise UsageFailure(e.as_option()) from None


TIMEOUT = Seconds()

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def options(*opts: Decorator) -> Decorator:
    """Several click options as one decorator, listed in the order ``--help`` shows them."""

    def apply(f: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed(opts):
            f = opt(f)
        return f

    return apply


# -- options that several commands share, each declared once ----------------------------------------------------
def history_option() -> Decorator:
    return click.option("--history", "history_path", type=HistoryLocation(), default=None,
                        help="Run history: a SQLite file, or a postgresql:// URL that a fleet shares (default: "
                             "$FIRSTLIGHT_HISTORY, else a file in the user data directory).")


class HistoryLocation(click.ParamType):
    """``--history``: a path (SQLite) or a ``postgresql://`` URL, kept as text (a Path folds its ``//``)."""

    name = "PATH|URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Where | None:
        if value is None or not isinstance(value, str):
            return value
        if not value:
            self.fail("an empty history location", param, ctx)
        w = where(value)
        if isinstance(w, Path) and w.is_dir():
            self.fail(f"{value!r} is a directory (a history is a file or a postgresql:// URL)", param, ctx)
        return w


def _known_engine(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and value not in PROFILES:  # read at parse time: a plugin may have added a profile
        raise UsageFailure(f"--engine {value}: give one of {', '.join(sorted(PROFILES))}")
    return value


class _EngineOption(click.Option):
    """``--engine``: its help and completions are the registered profiles, read each time they are shown (a plugin
    may have added one after the commands were declared)."""

    def __init__(self, *args: Any, when_absent: str = "detect", **kwargs: Any) -> None:
        self._when_absent = when_absent
        super().__init__(*args, **kwargs)

    @property
    def help(self) -> str:
        serving = ", ".join(name for name, p in PROFILES.items() if p.role == "server")  # a worker is its command's
        return f"Engine profile (default: {self._when_absent}): one of {serving}."

    @help.setter
    def help(self, value: str | None) -> None:
        pass  # click stores the help it was given; this one is generated

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        return [CompletionItem(name) for name in PROFILES if name.startswith(incomplete)]


def engine_option(default: str = "detect") -> Decorator:
    return click.option("--engine", cls=_EngineOption, when_absent=default, default=None, callback=_known_engine,
                        metavar="ENGINE")


judge_options = (  # up, watch and report: when the verdict gives up
    number_option("timeout", "Overall deadline in seconds."),
    number_option("stall_timeout", "No progress of any kind for this long: hung."),
    number_option("spin_timeout", "Only CPU/GPU busy, nothing else moving, for this long: hung (busy-wait)."),
)


# -- the option groups of the start commands -------------------------------------------------------------------
probe_options = options(  # up, watch and probe: how to talk to the server
    engine_option(),
    click.option("--api", type=click.Choice(["completions", "chat"]), default="completions", show_default=True,
                 help="Which endpoint the generation probe uses."),
    click.option("--prompt", default=None, help="Prompt of the generation probe (deterministic: temperature 0)."),
    number_option("max_tokens", "Tokens the generation probe asks for."),
    click.option("--expect", default=None, metavar="REGEX",
                 help="The generated text must match this regular expression."),
    click.option("--served-model", default=None,
                 help="Model name sent in requests (default: the first one /v1/models lists)."),
    click.option("--api-key", envvar="FIRSTLIGHT_API_KEY", default=None,
                 help="Bearer token for the server (or FIRSTLIGHT_API_KEY). Never printed."),
    click.option("--health-path", default=None, help="Override the engine's health endpoint."),
    number_option("connect_timeout", "Connect timeout of every probe, seconds."),
    number_option("read_timeout", "Read timeout of health and model-list requests (each request must also end within "
                      "connect + read timeout, however the server trickles)."),
    number_option("generation_timeout", "Read timeout of a generation probe (separate from the polling period)."),
    click.option("--json", "as_json", is_flag=True, help="JSON Lines events on stdout; the last is the summary."),
)

after_ready_options = options(  # up and watch: what to do once READY holds, and how to remember it
    number_option("warmup", "After READY, send N requests one by one: first vs steady-state latency."),
    click.option("--bench", "bench", is_flag=True, help="After READY, run a short streaming benchmark "
                 "(TTFT, ITL, TPOT, throughput) and read speculative-decoding acceptance."),
    number_option("bench_requests", "Requests of the benchmark after READY."),
    number_option("bench_concurrency", "Requests in flight at once during that benchmark."),
    number_option("bench_duration", "Upper bound on the benchmark's time, seconds."),
    number_option("bench_output_len", "Tokens each benchmark request generates."),
    history_option(),
    click.option("--no-history", is_flag=True, help="Neither read nor write the run history."),
    click.option("--fail-on-regression", is_flag=True,
                 help="Exit 4 when the cold start or throughput is worse than the baseline by over --margin."),
    number_option("margin", "Regression margin, as a fraction of the baseline."),
    click.option("--known-answer", "known_answer", type=click.Choice(KNOWN_ANSWER_MODES),
                 default=HistoryConfig.known_answer, show_default=True,
                 help="check: READY only when the first answer (tokens and log-probabilities at temperature 0) "
                      "is the one this deployment gave at its first verified start, recorded then; record: this "
                      "start's answer becomes the reference (after a deliberate model change); off: neither."),
)

watch_options = options(  # up and watch (the long-running commands): when to give up, what to sample
    *judge_options,
    number_option("serving_interval", "After READY, while supervising or as a sidecar: one 1-token generation when the "
                      "engine's counters showed nothing completed for this long (0: no serving checks)."),
    click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
                 help="Model weights on disk, for the fraction read (default: from the command line)."),
    number_option("poll_min", "Polling period right after a change or a new log line."),
    number_option("poll_max", "Polling period after a quiet spell."),
    number_option("sample_interval", "Process and GPU sampling period."),
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
    number_option("member_port", "Under LeaderWorkerSet (LWS_* env, on the leader): the members' readiness port."),
)


# -- the Config parts built from them, by firstlight.settings ----------------------------------------------------
def profile_for(engine: str | None, command: Sequence[str] = (), server: ServerCommand | None = None
                ) -> EngineProfile:
    """``--engine``, else the one the command line names (``server``: as already read), else generic."""
    return usage(settings.profile, engine, command, server)


def probe_config(url: str, profile: EngineProfile, kw: dict[str, Any],
                 resolve_within: float = settings.RESOLVE_S) -> ProbeConfig:
    return usage(settings.probe, url, profile, api=kw["api"], prompt=kw["prompt"], expect=kw["expect"],
                 max_tokens=kw["max_tokens"], served_model=kw["served_model"], api_key=kw["api_key"],
                 health_path=kw["health_path"], connect_timeout=kw["connect_timeout"],
                 read_timeout=kw["read_timeout"], generation_timeout=kw["generation_timeout"],
                 poll_min=kw.get("poll_min", NUMBERS["poll_min"].default),
                 poll_max=kw.get("poll_max", NUMBERS["poll_max"].default), resolve_within=resolve_within)


def check_expect(expect: str | None) -> None:
    usage(settings.check_expect, expect)


def judge_config(kw: dict[str, Any]) -> JudgeConfig:
    return usage(settings.judge, kw["timeout"], kw["stall_timeout"], kw["spin_timeout"])


def after_ready_config(kw: dict[str, Any]) -> tuple[AfterReadyConfig, HistoryConfig]:
    after = usage(settings.after_ready, kw["warmup"], kw["bench"], kw["bench_requests"], kw["bench_concurrency"],
                  kw["bench_duration"], kw["bench_output_len"])
    history = usage(settings.history, not kw["no_history"], kw["history_path"], kw["fail_on_regression"],
                    kw["margin"], kw.get("known_answer", HistoryConfig.known_answer))
    return after, history


def url_from_command(command: Sequence[str], profile: EngineProfile, server: ServerCommand | None = None) -> str:
    return usage(settings.url_from_command, command, profile, server)


def redactor_for(command: Sequence[str], api_key: str | None) -> Redactor:
    """The secrets of this run: in the server's command line, the environment, and the API key."""
    return settings.redactor(command, api_key)


__all__ = ["EXIT_FAILED", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REGRESSION", "EXIT_TIMEOUT",
           "EXIT_USAGE", "TIMEOUT", "Command", "Seconds", "Setting", "UsageFailure",
           "after_ready_config", "after_ready_options", "check_expect", "engine_option", "history_option",
           "judge_config", "judge_options", "number_option", "options", "probe_config", "probe_options",
           "profile_for", "redactor_for", "url_from_command", "usage", "watch_options"]
