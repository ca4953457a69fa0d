"""The group and the start commands (up, watch, probe, replay, demo). They parse options into a Config, pick the
engine profile and reporters, run a Session, and map the verdict to an exit code. Nothing here judges or
samples.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import psutil

from firstlight import engines, settings
from firstlight._version import __version__
from firstlight.cli.bench import bench_command
from firstlight.cli.container import container_options, up_container, watch_container
from firstlight.cli.explain import explain_command
from firstlight.cli.history import history_command
from firstlight.cli.options import (
    TIMEOUT,
    UsageFailure,
    after_ready_config,
    after_ready_options,
    check_expect,
    engine_option,
    judge_config,
    number_option,
    probe_config,
    probe_options,
    profile_for,
    redactor_for,
    url_from_command,
    usage,
    watch_options,
)
from firstlight.cli.preflight import preflight_before_launch, preflight_command
from firstlight.cli.report import report_command
from firstlight.cli.run import outputs_from, run_watch
from firstlight.cli.sidecar import process_matcher, run_sidecar, url_port, watch_plan
from firstlight.cli.unit import replay_unit, unit_options, watch_unit
from firstlight.config import Outputs
from firstlight.containers.command import parse_run
from firstlight.engines import get_profile
from firstlight.probes.ladder import Ladder
from firstlight.redact import Redactor
from firstlight.runner.output import nonblocking_stderr
from firstlight.sim.scenarios import SCENARIOS
from firstlight.timeline import Level
from firstlight.vocab import ALL_FAILURES, EXIT_CODES, EXIT_INTERNAL, EXIT_USAGE

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


def version_text() -> str:
    """firstlight's version, then each engine profile's ``checked_versions``: the releases a user can trust it with
    most (the tests start and watch their real servers); the other profiles were checked against recorded logs."""
    profiles = list(engines.PROFILES.values())
    checked = [p for p in profiles if p.checked_versions]
    width = max((len(p.display_name) for p in checked), default=0)
    lines = [f"firstlight, version {__version__}",
             "engine releases its profiles were checked against (real servers started and watched by its tests):"]
    lines += [f"  {p.display_name:{width}}  {', '.join(p.checked_versions)}" for p in checked]
    others = [p.name for p in profiles if not p.checked_versions]
    if others:
        lines += textwrap.wrap("the other profiles, checked against recorded logs of real starts: "
                               + ", ".join(others), 110, subsequent_indent="  ")
    return "\n".join(lines)


def _version(ctx: click.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog=EXIT_HELP)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, _param, value: _version(ctx, value),
              help="Show the version and the engine releases its profiles were checked against, and exit.")
def cli() -> None:
    """firstlight: know when your LLM server really serves, and what it is doing until then.

    READY means a real generation returned and checked out: never an open port, /health or /v1/models alone.
    """


@cli.command(epilog=EXIT_HELP)
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
@click.option("--url", default=None, help="Server URL (default: from the command's --host/--port, else the "
              "engine's default port).")
@probe_options
@watch_options
@after_ready_options
@click.option("--detach", is_flag=True, help="Exit 0 at READY and leave the server running "
              "(its output goes to a log file).")
@click.option("--stop-when-ready", is_flag=True, help="Stop the server at READY and exit 0 (a start check for CI).")
@click.option("--keep-on-failure", is_flag=True, help="Leave a failed or hung server running for inspection.")
@number_option("grace", "Seconds between SIGTERM and SIGKILL when stopping the server.")
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
    firstlight up -- podman run --rm -p 8080:8080 IMAGE llama-server -m /m/model.gguf --host 0.0.0.0

    CMD runs in its own process group; its output is echoed and read as a signal. After READY firstlight
    stays in the foreground supervising it (Ctrl-C stops it) unless --detach. A server that fails or hangs
    is stopped (SIGTERM, a second one at half --grace, SIGKILL after --grace) unless --keep-on-failure.
    A `docker run` / `podman run` CMD: the container is watched (its init process's tree, its log) and
    stopped with `RUNTIME stop -t GRACE`.
    """
    if kw["unit"]:  # restart the unit, watch its new invocation; Ctrl-C stops the watch, not the unit
        if command:
            raise UsageFailure("give --unit UNIT or a command, not both")
        watch_unit(url, kw, restart_first=True, echo=not quiet_server)
    if not command:
        raise UsageFailure("missing the server command (firstlight up -- CMD ...), or --unit UNIT")
    check_expect(kw["expect"])
    if detach and stop_when_ready:
        raise UsageFailure("--detach and --stop-when-ready exclude each other")
    if detach and kw.get("serve_readiness") is not None:  # the endpoints would die at the exit, at READY
        raise UsageFailure("--detach exits at READY, and the readiness endpoints with it: run a sidecar "
                          "(firstlight watch --serve-readiness) instead")
    run = parse_run(command)
    if run is not None:  # docker run / podman run: the container is the server (firstlight.containers)
        up_container(run, url, kw, {"grace": grace, "keep_on_failure": keep_on_failure,
                                    "echo_server_output": not quiet_server,
                                    "after_ready": "detach" if detach else "stop" if stop_when_ready else "supervise"})
    server = settings.read_server(command, kw["engine"], launched=True)  # the run's one reading of its command
    profile = profile_for(kw["engine"], command, server)
    probe = probe_config(url or url_from_command(command, profile, server), profile, kw)
    after, history = after_ready_config(kw)
    cfg = usage(settings.config, probe=probe, judge=judge_config(kw), command=command, engine=kw["engine"],
                server=server, after=after, history=history, model_path=kw["model_path"],
                sample_interval=kw["sample_interval"], grace=grace, keep_on_failure=keep_on_failure,
                echo_server_output=not quiet_server,
                after_ready="detach" if detach else "stop" if stop_when_ready else "supervise",
                serving_interval=kw["serving_interval"])
    plan = settings.plan(cfg, profile, server, api_key=kw["api_key"], outputs=outputs_from(kw))
    # A failed check ends the run before launch (verdict failed, the check's category, no server process).
    report = None if no_preflight else preflight_before_launch(cfg, kw["as_json"], not no_disk_sample,
                                                               plan.redactor, plan.server)
    outcome = run_watch(plan, preflight=report)
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
@probe_options
@watch_options
@after_ready_options
@unit_options()
@container_options()
def watch(url: str | None, url_option: str | None, pid: int | None, pid_from: str | None, log_file: Path | None,
          log_from_start: bool, **kw: Any) -> None:
    """Attach to a server that is already starting and exit with the verdict.

    With --serve-readiness it does not exit: it serves the last verdict and watches the next start (a new
    process matching the same command line, or the port closing and opening again) until SIGTERM/SIGINT.

    \b
    systemctl restart sglang && firstlight watch http://127.0.0.1:30000 --pid $(pgrep -f launch_server)
    systemctl restart sglang && firstlight watch --unit sglang --max-attempts 3
    firstlight watch --container vllm-qwen
    firstlight watch http://127.0.0.1:8000 --pid-from 'vllm serve' --serve-readiness 127.0.0.1:8081
    """
    url = url or url_option
    kw["log_from_start"] = log_from_start
    if kw["container"] is not None:
        watch_container(url, {**kw, "pid": pid, "pid_from": pid_from, "log_file": log_file})
    if kw["unit"]:
        watch_unit(url, {**kw, "pid": pid, "log_file": log_file})
    if kw["journal_file"] is not None:
        raise UsageFailure("--journal-file needs --unit UNIT")
    if url is None:
        raise UsageFailure("missing the server URL (argument or --url), or --unit UNIT")
    check_expect(kw["expect"])
    matcher = process_matcher(pid, pid_from)
    if pid is not None and not psutil.pid_exists(pid):
        raise UsageFailure(f"no process with pid {pid}")
    if kw["serve_readiness"] is not None:
        sys.exit(run_sidecar(url, pid, matcher, log_file, kw).exit_code)
    if matcher is not None:
        found = matcher.find(url_port(url))
        if found is None:
            raise UsageFailure(f"--pid-from {pid_from!r}: no process matches")
        pid = found.pid
    outcome = run_watch(watch_plan(url, pid, log_file, kw))
    sys.exit(outcome.exit_code)


@cli.command(epilog="""\b
Exit codes: 0 the level holds; 1 it does not; 64 usage error.""")
@click.argument("url")
@click.option("--level", default="generation", show_default=True,
              type=click.Choice([lv.label for lv in Level if lv > Level.PROCESS]),
              help="The rung that must hold.")
@click.option("--timeout", type=TIMEOUT, default=10.0, show_default=True,
              help="Give up after this many seconds, whatever happens: it bounds the whole check.")
@probe_options
def probe(url: str, level: str, timeout: float, **kw: Any) -> None:
    """One-shot check for scripts and Kubernetes exec probes: does LEVEL hold right now?

    \b
    firstlight probe http://127.0.0.1:8080 --level generation --timeout 30
    """
    check_expect(kw["expect"])
    deadline_at = time.monotonic() + timeout  # the whole call, however many requests it takes
    profile = profile_for(kw["engine"])
    kw["read_timeout"] = min(kw["read_timeout"], timeout)
    kw["generation_timeout"] = min(kw["generation_timeout"], timeout)
    kw["connect_timeout"] = min(kw["connect_timeout"], timeout)
    cfg = probe_config(url, profile, kw, resolve_within=min(10.0, timeout))
    redactor = redactor_for((), kw["api_key"])
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
    """Watch a simulated large-model cold start (about 25 s) end to end: no GPU, no model needed."""
    from firstlight.sim.fixtures import free_port, make_weights
    from firstlight.sim.server import REAL_LOG
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
        probe_cfg = settings.probe(f"http://127.0.0.1:{port}", profile, read_timeout=5.0, generation_timeout=60.0)
        cfg = settings.config(probe=probe_cfg, judge=settings.judge(timeout=180, stall_timeout=20, spin_timeout=60),
                              command=command, engine=dialect, after_ready="stop")
        outcome = run_watch(settings.plan(cfg, profile, redactor=Redactor(), outputs=Outputs(json=as_json)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(outcome.exit_code)


@cli.command()
@click.argument("logfile", type=click.Path(path_type=Path), required=False)
@engine_option("detect from the log")
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
            raise UsageFailure("give --unit with --journal-file, or a log file, not both")
        replay_unit(kw, engine, as_json)
    if logfile is None:
        raise UsageFailure("missing the log file (or --unit UNIT --journal-file FILE)")
    from firstlight.logreplay import replay_log, replay_stream
    from firstlight.report.replay_text import format_replay_text
    if engine is not None:
        profile_for(engine)
    stdin = str(logfile) == "-"
    if not stdin and (logfile.is_dir() or not os.access(logfile, os.R_OK)):  # a pipe (<(zcat log.gz)) is fine
        raise UsageFailure(f"not a readable log file: {logfile}")
    try:
        # stdin as bytes, read as a file is: a \r redraw stays inside its line, bad UTF-8 is replaced
        report = replay_stream(sys.stdin.buffer, engine) if stdin else replay_log(logfile, engine)
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
