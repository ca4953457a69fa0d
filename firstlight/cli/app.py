"""The group and the start commands (up, watch, probe, replay, demo). They parse options into a Config, pick the
engine profile and reporters, run a Session, and map the verdict to an exit code. Nothing here judges or
samples.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import click
import psutil

from firstlight import __version__
from firstlight.cli.bench import bench_command
from firstlight.cli.explain import explain_command
from firstlight.cli.history import history_command
from firstlight.cli.params import TIMEOUT, FiniteRange, Seconds
from firstlight.cli.preflight import preflight_before_launch, preflight_command
from firstlight.cli.report import report_command
from firstlight.cli.unit import replay_unit, unit_options, watch_unit
from firstlight.config import AfterReadyConfig, Config, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import command_host, command_port, detect_from_command, get_profile
from firstlight.engines.profile import EngineProfile
from firstlight.preflight import PreflightReport
from firstlight.probes.ladder import Ladder
from firstlight.redact import Redactor
from firstlight.report.artifacts import RunArtifacts
from firstlight.report.base import Reporter, Reporters
from firstlight.report.console import ConsoleReporter
from firstlight.report.dashboard import DashboardReporter
from firstlight.report.jsonl import JsonLinesReporter
from firstlight.report.prometheus import PrometheusExporter
from firstlight.report.readiness import ReadinessServer, parse_bind
from firstlight.report.systemd import SystemdNotifier
from firstlight.runner.output import nonblocking_stderr
from firstlight.runner.rewatch import ProcessMatcher, Rewatch, Target
from firstlight.runner.serving import ServingWatch
from firstlight.runner.session import EXIT_CODES, EXIT_INTERNAL, EXIT_USAGE, Outcome, Session
from firstlight.samplers.weights import model_path_from_command
from firstlight.sim.scenarios import SCENARIOS
from firstlight.timeline import Level
from firstlight.vocab import ALL_FAILURES
from firstlight.wire import normalise_url, split_url
from firstlight.wire.deadline import resolve

PERIOD = Seconds(maximum=3600.0)  # sampling and polling periods: above 0, so nothing busy-loops
GRACE = Seconds(maximum=3600.0)

EXIT_HELP = """\b
Exit codes:
  0    ready: a real generation returned and checked out
  1    failed: the server exited, died of a signal (failure crashed), printed a fatal error, or answered
       with invalid generations
  2    hung: no progress for --stall-timeout (or only CPU/GPU busy for --spin-timeout)
  3    timeout: no verdict within --timeout
  4    regression (with --fail-on-regression): serving, but slower than this deployment's baseline
  130  interrupted (SIGINT/SIGTERM)
  64   usage error (bad option, bad URL)
  70   internal error of firstlight itself

\b
Failure categories (the summary's "failure"):
""" + "\n".join(textwrap.wrap(", ".join(ALL_FAILURES), 100, initial_indent="  ", subsequent_indent="  "))


class UsageFailure(click.UsageError):
    exit_code = EXIT_USAGE


def _fail_usage(message: str) -> UsageFailure:
    return UsageFailure(message)


def _probe_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by up, watch and probe: how to talk to the server."""
    opts = [
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
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _after_ready_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """What up and watch do once READY holds, and how they remember it."""
    opts = [
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
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _after_ready_config(kw: dict[str, Any]) -> tuple[AfterReadyConfig, HistoryConfig]:
    after = AfterReadyConfig(warmup=kw["warmup"], bench=kw["bench"], bench_requests=kw["bench_requests"],
                             bench_concurrency=kw["bench_concurrency"], bench_duration=kw["bench_duration"],
                             bench_output_len=kw["bench_output_len"])
    history = HistoryConfig(enabled=not kw["no_history"], path=kw["history_path"],
                            fail_on_regression=kw["fail_on_regression"], margin=kw["margin"])
    return after, history


def _watch_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options of the long-running commands (up, watch): when to give up, what to sample."""
    opts = [
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
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog=EXIT_HELP)
@click.version_option(__version__, prog_name="firstlight")
def cli() -> None:
    """firstlight: know when your LLM server really serves, and what it is doing until then.

    READY means a real generation returned and checked out: never an open port, /health or /v1/models alone.
    """


def _profile(engine: str | None, command: Sequence[str] = ()) -> EngineProfile:
    name = engine or detect_from_command(list(command)) or "generic"
    try:
        return get_profile(name)
    except ValueError as e:
        raise _fail_usage(str(e)) from None


def _probe_config(url: str, profile: EngineProfile, kw: dict[str, Any], resolve_within: float = 10.0) -> ProbeConfig:
    try:
        url = normalise_url(url)
        host, port = split_url(url)
    except ValueError as e:
        raise _fail_usage(str(e)) from None
    if kw.get("poll_min", 0.1) > kw.get("poll_max", 1.0):
        raise _fail_usage("--poll-min must not be above --poll-max")
    try:  # a typo in the host would otherwise look like a server that never opens its port, until --timeout
        resolve(host, port, resolve_within)  # bounded: getaddrinfo itself has no timeout
    except TimeoutError:
        raise _fail_usage(f"cannot resolve host {host!r} of {url} (no answer from the resolver)") from None
    except OSError as e:
        raise _fail_usage(f"cannot resolve host {host!r} of {url} ({e.strerror or e})") from None
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


def _check_expect(expect: str | None) -> None:
    if expect is None:
        return
    try:
        re.compile(expect)
    except re.error as e:
        raise _fail_usage(f"--expect is not a valid regular expression: {e}") from None


def _judge_config(kw: dict[str, Any]) -> JudgeConfig:
    for name in ("timeout", "stall_timeout", "spin_timeout"):
        if kw[name] <= 0:
            raise _fail_usage(f"--{name.replace('_', '-')} must be positive")
    return JudgeConfig(timeout=kw["timeout"], stall_timeout=kw["stall_timeout"], spin_timeout=kw["spin_timeout"])


def _url_from_command(command: Sequence[str], profile: EngineProfile) -> str:
    host = command_host(list(command), profile) or "127.0.0.1"
    if host in ("0.0.0.0", "::", "[::]", ""):
        host = "127.0.0.1"
    port = command_port(list(command), profile) or profile.default_port
    if not port:  # port 0 would silently become port 80
        raise _fail_usage("cannot tell the server's port from its command line; pass --url")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _reporters(as_json: bool, echo: bool, metrics_port: str | None = None, readiness: str | None = None,
               plain: bool = False, deployment: str | None = None) -> Reporter:
    live = sys.stderr.isatty() and not (plain or as_json)  # the dashboard; plain lines otherwise
    chosen: list[Reporter] = [DashboardReporter(echo_server=echo) if live else
                              ConsoleReporter(echo_server=echo, live=False if plain or as_json else None)]
    if as_json:
        chosen.append(JsonLinesReporter())
    if readiness is not None:
        chosen.append(_readiness_server(readiness, chosen[0]))
    if metrics_port is not None:
        try:
            host, port = parse_bind(metrics_port, "--metrics-port")
            if port == 0:
                raise ValueError(f"--metrics-port {metrics_port!r}: a scrape needs a fixed port (1..65535)")
            chosen.append(PrometheusExporter(port, host, deployment=deployment))
        except (ValueError, OSError) as e:
            for r in chosen:  # the console, and a readiness server already listening
                r.close()
            why = str(e) if isinstance(e, ValueError) else f"--metrics-port {metrics_port}: cannot listen " \
                                                            f"({e.strerror})"
            raise _fail_usage(why) from None
    notifier = SystemdNotifier()
    if notifier.enabled:  # running as a Type=notify unit
        chosen.append(notifier)
    return chosen[0] if len(chosen) == 1 else Reporters(*chosen)


def _is_loopback(host: str) -> bool:
    """Only this machine can reach ``host`` (no name lookup: a name other than localhost counts as not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _readiness_server(spec: str, console: Reporter) -> Reporter:
    try:
        server = ReadinessServer(*parse_bind(spec))
    except (ValueError, OSError) as e:
        console.close()
        why = str(e) if isinstance(e, ValueError) else f"--serve-readiness {spec}: cannot listen ({e.strerror or e})"
        raise _fail_usage(why) from None
    console.message(f"readiness endpoints: {server.url}/readyz /livez /startupz")
    if not _is_loopback(server.host):
        console.message(f"warning: --serve-readiness {spec} answers on every address it binds (not only this "
                        "machine): the pid, phase and evidence are visible to anyone who can reach the port")
    return server


def _run(cfg: Config, profile: EngineProfile, kw: dict[str, Any], redactor: Redactor | None = None,
         runner: Callable[[Reporter, IO[str] | None], Outcome] | None = None,
         preflight: PreflightReport | None = None) -> Outcome:
    redactor = redactor or _redactor(cfg.watched_command, kw["api_key"])
    for opt in ("report_path", "trace_path"):  # found out now, not after a ten-minute start
        if kw.get(opt) is not None and not os.access(kw[opt].parent.resolve(), os.W_OK):
            raise _fail_usage(f"--{opt.split('_')[0]} {kw[opt]}: cannot write in {kw[opt].parent}")
    try:
        artifacts = RunArtifacts(cfg, kw.get("record"), kw.get("report_path"), kw.get("trace_path"))
    except OSError as e:
        raise _fail_usage(f"--record {kw['record']}: cannot write ({e.strerror})") from None
    reporter = _reporters(kw["as_json"], cfg.echo_server_output, kw.get("metrics_port"), kw.get("serve_readiness"),
                          kw.get("plain", False), kw.get("deployment"))
    # After the summary, which stays the last JSON line: what was written goes to stderr only.
    artifacts.warn = lambda m: click.echo(f"firstlight: {m}", err=True)
    outcome: Outcome | None = None
    try:
        if runner is not None:  # a unit's attempts (firstlight.units)
            outcome = runner(reporter, artifacts.stream())
        else:
            outcome = Session(cfg, profile, reporter, redactor, artifacts.stream(), preflight=preflight).run()
        return outcome
    finally:
        reporter.close()
        for path in artifacts.finish(outcome.summary if outcome else None):
            click.echo(f"firstlight: wrote {path}", err=True)
        artifacts.close()


def _redactor(command: Sequence[str], api_key: str | None) -> Redactor:
    r = Redactor()
    r.add_from_argv(command)
    r.add_from_env()
    r.add(api_key)
    return r


@cli.command(epilog=EXIT_HELP)
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
@click.option("--url", default=None, help="Server URL (default: from the command's --host/--port, else the "
              "engine's default port).")
@_probe_options
@_watch_options
@_after_ready_options
@click.option("--detach", is_flag=True, help="Exit 0 at READY and leave the server running "
              "(its output goes to a log file).")
@click.option("--stop-when-ready", is_flag=True, help="Stop the server at READY and exit 0 (a start check for CI).")
@click.option("--keep-on-failure", is_flag=True, help="Leave a failed or hung server running for inspection.")
@click.option("--grace", type=GRACE, default=10.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL when stopping the server.")
@click.option("--quiet-server", is_flag=True, help="Do not echo the server's own output.")
@click.option("--no-preflight", is_flag=True, help="Skip the checks before launch (see `firstlight preflight`).")
@click.option("--no-disk-sample", is_flag=True, help="Preflight without the bounded read-rate sample.")
@unit_options(up=True)
def up(command: tuple[str, ...], url: str | None, detach: bool, stop_when_ready: bool, keep_on_failure: bool,
       grace: float, quiet_server: bool, no_preflight: bool, no_disk_sample: bool, **kw: Any) -> None:
    """Launch a server and watch it until it really serves.

    \b
    firstlight up -- python -m sglang.launch_server --model-path M --port 30000
    firstlight up --api chat --expect Paris -- llama-server -m model.gguf --port 8080

    CMD runs in its own process group; its output is echoed and read as a signal. After READY firstlight
    stays in the foreground supervising it (Ctrl-C stops it) unless --detach. A server that fails or hangs
    is stopped (SIGTERM, a second one at half --grace, SIGKILL after --grace) unless --keep-on-failure.
    """
    if kw["unit"]:  # restart the unit, watch its new invocation; Ctrl-C stops the watch, not the unit
        if command:
            raise _fail_usage("give --unit UNIT or a command, not both")
        watch_unit(url, kw, restart_first=True, echo=not quiet_server)
    if not command:
        raise _fail_usage("missing the server command (firstlight up -- CMD ...), or --unit UNIT")
    _check_expect(kw["expect"])
    if detach and stop_when_ready:
        raise _fail_usage("--detach and --stop-when-ready exclude each other")
    if detach and kw.get("serve_readiness") is not None:  # the endpoints would die at the exit, at READY
        raise _fail_usage("--detach exits at READY, and the readiness endpoints with it: run a sidecar "
                          "(firstlight watch --serve-readiness) instead")
    profile = _profile(kw["engine"], command)
    probe = _probe_config(url or _url_from_command(command, profile), profile, kw)
    after, history = _after_ready_config(kw)
    cfg = Config(after=after, history=history, command=list(command),
                 engine=kw["engine"] or detect_from_command(command), model_path=kw["model_path"], probe=probe,
                 judge=_judge_config(kw), sample_interval=kw["sample_interval"], grace=grace,
                 keep_on_failure=keep_on_failure, echo_server_output=not quiet_server,
                 after_ready="detach" if detach else "stop" if stop_when_ready else "supervise",
                 serving_interval=kw["serving_interval"])
    redactor = _redactor(command, kw["api_key"])
    # A failed check ends the run before launch (verdict failed, the check's category, no server process).
    report = None if no_preflight else preflight_before_launch(cfg, kw["as_json"], not no_disk_sample, redactor)
    outcome = _run(cfg, profile, kw, redactor, preflight=report)
    sys.exit(outcome.exit_code)


@cli.command(epilog=EXIT_HELP)
@click.argument("url", required=False)
@click.option("--url", "url_option", default=None, help="Server URL (instead of the URL argument).")
@click.option("--pid", type=int, default=None, help="The server's process id, to watch its process tree.")
@click.option("--pid-from", default=None, metavar="REGEX",
              help="Find the server's process by its command line (like pgrep -f): for a sidecar, where the PID "
                   "is unknown in advance and changes with every restart.")
@click.option("--log", "log_file", type=click.Path(path_type=Path), default=None,
              help="The server's log file (or FIFO), followed across rotation. An existing file is read from "
                   "its end, or with --pid from this run's first line by the log's own timestamps.")
@click.option("--log-from-start", is_flag=True, help="Read an existing --log file from its start (it holds only "
              "this run).")
@_probe_options
@_watch_options
@_after_ready_options
@unit_options()
def watch(url: str | None, url_option: str | None, pid: int | None, pid_from: str | None, log_file: Path | None,
          log_from_start: bool, **kw: Any) -> None:
    """Attach to a server that is already starting and exit with the verdict.

    With --serve-readiness it does not exit: it serves the last verdict and watches the next start (a new
    process matching the same command line, or the port closing and opening again) until SIGTERM/SIGINT.

    \b
    systemctl restart sglang && firstlight watch http://127.0.0.1:30000 --pid $(pgrep -f launch_server)
    systemctl restart sglang && firstlight watch --unit sglang --max-attempts 3
    firstlight watch http://127.0.0.1:8000 --pid-from 'vllm serve' --serve-readiness 127.0.0.1:8081
    """
    url = url or url_option
    kw["log_from_start"] = log_from_start
    if kw["unit"]:
        watch_unit(url, {**kw, "pid": pid, "log_file": log_file})
    if kw["journal_file"] is not None:
        raise _fail_usage("--journal-file needs --unit UNIT")
    if url is None:
        raise _fail_usage("missing the server URL (argument or --url), or --unit UNIT")
    _check_expect(kw["expect"])
    matcher = _matcher(pid, pid_from)
    if pid is not None and not psutil.pid_exists(pid):
        raise _fail_usage(f"no process with pid {pid}")
    if kw["serve_readiness"] is not None:
        sys.exit(_sidecar(url, pid, matcher, log_file, kw).exit_code)
    if matcher is not None:
        found = matcher.find(_port(url))
        if found is None:
            raise _fail_usage(f"--pid-from {pid_from!r}: no process matches")
        pid = found.pid
    outcome = _run(*_watch_setup(url, pid, log_file, kw), kw)
    sys.exit(outcome.exit_code)


def _port(url: str) -> int | None:
    """The URL's port, to prefer the --pid-from match that listens on it (None: a URL that is no URL)."""
    try:
        return split_url(url)[1]
    except ValueError:
        return None


def _matcher(pid: int | None, pid_from: str | None) -> ProcessMatcher | None:
    if pid is not None and pid_from is not None:
        raise _fail_usage("--pid and --pid-from exclude each other")
    try:
        return ProcessMatcher(pid_from) if pid_from is not None else None
    except re.error as e:
        raise _fail_usage(f"--pid-from is not a valid regular expression: {e}") from None


def _watch_setup(url: str, pid: int | None, log_file: Path | None, kw: dict[str, Any]
                 ) -> tuple[Config, EngineProfile]:
    command: list[str] = []
    if pid is not None:
        with contextlib.suppress(psutil.Error):  # gone, or another user's: watch it without its command line
            command = psutil.Process(pid).cmdline()
    profile = _profile(kw["engine"], command)
    probe = _probe_config(url, profile, kw)
    after, history = _after_ready_config(kw)
    model_path = kw["model_path"]
    if model_path is None and command:
        model = model_path_from_command(command)
        model_path = Path(model) if model else None
    cfg = Config(command=[], pid=pid, log_file=log_file, log_from_start=kw.get("log_from_start", False),
                 watched_command=command,
                 after=after, history=history,
                 engine=kw["engine"] or detect_from_command(command),
                 model_path=model_path, probe=probe, judge=_judge_config(kw),
                 sample_interval=kw["sample_interval"], serving_interval=kw["serving_interval"])
    return cfg, profile


def _sidecar(url: str, pid: int | None, matcher: ProcessMatcher | None, log_file: Path | None,
             kw: dict[str, Any]) -> Outcome:
    """watch --serve-readiness: start after start (runner/rewatch.py), one reporter set for all of them."""
    if kw.get("record"):
        raise _fail_usage("--record writes one start's observations: use it without --serve-readiness")
    probe = _probe_config(url, _profile(kw["engine"]), kw)  # a bad URL is a usage error now, not at each start
    _judge_config(kw)
    first = Target.of(pid) if pid is not None else None
    if first is not None and first.command:
        matcher = ProcessMatcher.exact(list(first.command))
    reporter = _reporters(kw["as_json"], True, kw.get("metrics_port"), kw["serve_readiness"],
                          deployment=kw.get("deployment"))
    born = psutil.Process().create_time()
    sessions: list[Session] = []  # the last start's session: its serving checks and history

    def run_start(target: Target) -> Outcome:
        cfg, profile = _watch_setup(url, target.pid, log_file, kw)
        if first is None and target.create_time is not None and target.create_time < born and cfg.history.enabled:
            # --pid-from found an engine older than this sidecar: the sidecar restarted under a running engine,
            # which is no cold start; keep it out of the budget (--pid names a start on purpose: recorded)
            cfg = dataclasses.replace(cfg, history=dataclasses.replace(cfg.history, enabled=False))
            reporter.message(f"pid {target.pid} started before this watch: not recorded in the history")
        session = Session(cfg, profile, reporter, _redactor(cfg.watched_command, kw["api_key"]), record_timeout=False)
        sessions[:] = [session]
        return session.run()

    def serving(outcome: Outcome, target: Target) -> ServingWatch | None:
        return sessions[-1].serving_watch(outcome.result, target.pid) if sessions else None

    try:
        return Rewatch(run_start, reporter, probe.url, matcher=matcher, first=first, log_file=log_file,
                       engine=kw["engine"] or "generic", serving=serving).run()
    finally:
        reporter.close()


@cli.command(epilog="""\b
Exit codes: 0 the level holds; 1 it does not; 64 usage error.""")
@click.argument("url")
@click.option("--level", default="generation", show_default=True,
              type=click.Choice([lv.label for lv in Level if lv > Level.PROCESS]),
              help="The rung that must hold.")
@click.option("--timeout", type=TIMEOUT, default=10.0, show_default=True,
              help="Give up after this many seconds, whatever happens: it bounds the whole check.")
@_probe_options
def probe(url: str, level: str, timeout: float, **kw: Any) -> None:
    """One-shot check for scripts and Kubernetes exec probes: does LEVEL hold right now?

    \b
    firstlight probe http://127.0.0.1:8080 --level generation --timeout 30
    """
    _check_expect(kw["expect"])
    deadline_at = time.monotonic() + timeout  # the whole call, however many requests it takes
    profile = _profile(kw["engine"])
    kw["read_timeout"] = min(kw["read_timeout"], timeout)
    kw["generation_timeout"] = min(kw["generation_timeout"], timeout)
    kw["connect_timeout"] = min(kw["connect_timeout"], timeout)
    cfg = _probe_config(url, profile, kw, resolve_within=min(10.0, timeout))
    redactor = _redactor((), kw["api_key"])
    top = Level.parse(level)
    with Ladder(cfg, endpoints=profile.endpoints) as ladder:
        results = ladder.climb(top, deadline_at=deadline_at)
    held = max((p.level for p in results if p.ok), default=Level.NONE)
    ok = held >= top
    last = results[-1] if results else None
    obj = {"url": redactor.url(cfg.url), "level": top.label, "ok": ok, "held": held.label,
           "checks": [{"level": p.level.label, "ok": p.ok, "detail": redactor.text(p.detail), "t": p.t,
                       "latency_s": p.latency_s} for p in results]}
    if kw["as_json"]:
        click.echo(json.dumps(obj))
    detail = redactor.text(last.detail) if last else ""
    click.echo(f"{'OK' if ok else 'FAIL'} {top.label}: {detail}", err=True)
    sys.exit(0 if ok else 1)


@cli.command()
@click.option("--scenario", default="demo", show_default=True, type=click.Choice(SCENARIOS),
              help="Simulator scenario.")
@click.option("--dialect", default="sglang", show_default=True, type=click.Choice(["sglang", "vllm", "llamacpp"]))
@click.option("--real", is_flag=True, help="Replay a real SGLang start with EAGLE speculative decoding (its own log "
              "lines, with their original timing) instead of a scenario.")
@click.option("--json", "as_json", is_flag=True)
def demo(scenario: str, dialect: str, real: bool, as_json: bool) -> None:
    """Watch a simulated large-model cold start (about 30 s) end to end: no GPU, no model needed."""
    from firstlight.sim.server import REAL_LOG, free_port, make_weights
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="firstlight-demo-"))
    try:
        make_weights(workdir / "model", 512 << 20, shards=8)
        command = [sys.executable, "-m", "firstlight.sim", "--scenario", scenario, "--dialect", dialect,
                   "--port", str(port), "--model-path", str(workdir / "model"), "--load-seconds", "12"]
        if real:
            dialect = "sglang"
            command = [*command[: command.index("--model-path")], "--replay-log", str(REAL_LOG)]
            click.echo(f"firstlight demo: replaying a real SGLang EAGLE start ({REAL_LOG.name}) on port {port}",
                       err=True)
        else:
            click.echo(f"firstlight demo: a simulated {dialect} start ({scenario}) on port {port}", err=True)
        profile = get_profile(dialect)
        kw = {"api": "completions", "prompt": None, "max_tokens": 8, "expect": None, "served_model": None,
              "api_key": None, "health_path": None, "connect_timeout": 1.0, "read_timeout": 5.0,
              "generation_timeout": 60.0, "as_json": as_json, "record": None}
        probe_cfg = _probe_config(f"http://127.0.0.1:{port}", profile, kw)
        cfg = Config(command=command, engine=dialect, probe=probe_cfg, after_ready="stop",
                     judge=JudgeConfig(timeout=180, stall_timeout=20, spin_timeout=60))
        outcome = _run(cfg, profile, kw, Redactor())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(outcome.exit_code)


@cli.command()
@click.argument("logfile", type=click.Path(path_type=Path), required=False)
@click.option("--engine", default=None, help="Engine profile (default: detect from the log).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--unit", default=None, help="Replay this systemd unit's lines from --journal-file.")
@click.option("--journal-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="A journal file (as journalctl --file reads it) or journalctl -o json output.")
@click.option("--invocation", default=None, help="Which start of the unit (default: the last one).")
def replay(logfile: Path | None, engine: str | None, as_json: bool, **kw: Any) -> None:
    """Post-mortem of a startup log: which phases it went through, where it stopped, and why.

    \b
    firstlight replay /var/log/sglang.log
    firstlight replay --unit sglang --journal-file sglang.journal [--invocation ID]

    Exit codes: 0 the log reached ready; 1 it failed; 3 incomplete; 64 usage error.
    """
    if kw["unit"]:
        if logfile is not None:
            raise _fail_usage("give --unit with --journal-file, or a log file, not both")
        replay_unit(kw, engine, as_json)
    if logfile is None:
        raise _fail_usage("missing the log file (or --unit UNIT --journal-file FILE)")
    from firstlight.logreplay import replay_lines, replay_log
    from firstlight.report.replay_text import format_replay_text
    if engine is not None:
        _profile(engine)
    stdin = str(logfile) == "-"
    if not stdin and (logfile.is_dir() or not os.access(logfile, os.R_OK)):  # a pipe (<(zcat log.gz)) is fine
        raise _fail_usage(f"not a readable log file: {logfile}")
    try:
        if stdin:  # binary lines, so that a \r redraw stays inside its line and bad UTF-8 is replaced
            report = replay_lines((b.decode("utf-8", "replace") for b in sys.stdin.buffer), engine)
        else:
            report = replay_log(logfile, engine)
    except OSError as e:
        raise click.ClickException(f"cannot read {logfile}: {e.strerror}") from None
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        click.echo(format_replay_text(report))
    sys.exit({"ready": 0, "failed": 1}.get(report.outcome, 3))


cli.add_command(bench_command)
cli.add_command(history_command)
cli.add_command(preflight_command)
cli.add_command(report_command)
cli.add_command(explain_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: click's own usage errors exit 64 (EX_USAGE), not 2, which means 'hung' here. stderr never
    blocks a command (a paused pager, a stalled pipe): it is written through a bounded buffer."""
    with nonblocking_stderr():
        _main(argv)


def _main(argv: Sequence[str] | None) -> None:
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="firstlight", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(EXIT_CODES["interrupted"])
    except click.UsageError as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except click.ClickException as e:
        e.show()
        sys.exit(1)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        sys.exit(1)
    except Exception as e:  # a bug of ours: one line, and the traceback on request
        if os.environ.get("FIRSTLIGHT_DEBUG"):
            raise
        click.echo(f"firstlight: internal error: {type(e).__name__}: {e} (FIRSTLIGHT_DEBUG=1 shows where)", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
