"""``firstlight preflight [options] -- COMMAND...``: check a launch command's machine, environment and model
without starting it; ``firstlight up`` runs the same checks before launch (:func:`gate`).

Human lines go to stderr, then the start's forecast (``firstlight.forecast``: from the history, read only, else the
weights' bytes); with ``--json``, JSON Lines on stdout: the forecast event, then the preflight event, the last.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import IO
from urllib.parse import urlsplit

import click

from firstlight.cli.options import EXIT_FAILED, EXIT_OK, Command, UsageFailure, engine_option, history_option
from firstlight.config import Config
from firstlight.engines import ServerCommand, get_profile, read_command
from firstlight.forecast import Forecast, from_store
from firstlight.history import DeploymentKey, History, HistoryError
from firstlight.history.db import default_path
from firstlight.history.location import exists
from firstlight.logtext import one_line
from firstlight.preflight import DEADLINE_S, FAIL, OK, PreflightOptions, PreflightReport, read_target, run_preflight
from firstlight.preflight.disk import measure as measure_disk
from firstlight.redact import Redactor
from firstlight.runner.after_ready import visible_gpu_count
from firstlight.runner.guard import install_stop_handlers, silence
from firstlight.starts import predicted_type

EXIT_HELP = """\b
Exit codes:
  0    every check ok, or warnings only
  1    a check failed: the start would fail (the line says why and how to fix it)
  64   usage error (bad option, no command)
  70   internal error of firstlight itself"""

_MARK = {OK: "ok", "warn": "WARN", FAIL: "FAIL"}


def format_report(report: PreflightReport) -> list[str]:
    """The human lines: one per check, a fix line under each that is not ok, and the verdict."""
    lines = []
    for c in report.checks:
        # paths and names from the machine (a model directory may hold a newline): one line each
        lines.append(f"preflight {c.name:<13} {_MARK[c.status]:<4}  {one_line(c.evidence)}")
        if c.hint:
            lines.append(f"{'':<14}{'':<14}  fix: {one_line(c.hint)}")
    counts = {s: sum(c.status == s for c in report.checks) for s in ("warn", FAIL)}
    lines.append(f"preflight: {report.verdict} ({counts[FAIL]} failed, {counts['warn']} warnings, "
                 f"{len(report.checks)} checks) in {report.elapsed_s:.2f}s")
    return lines


def _redactor(command: Sequence[str]) -> Redactor:
    r = Redactor()
    r.add_from_argv(command)
    r.add_from_env()
    return r


def preflight(command: Sequence[str], engine: str | None = None, model: str | None = None,
              disk_sample: bool = True, redactor: Redactor | None = None,
              deadline_s: float = DEADLINE_S, url: str | None = None,
              server: ServerCommand | None = None) -> PreflightReport:
    """Run every check against ``command``; secrets masked in the evidence. ``url``: where the watch will reach
    the server (its port is the one checked). ``server``: ``command`` as the run already read it."""
    r = redactor or _redactor(command)
    reach = None
    if url:
        parts = urlsplit(url)
        with contextlib.suppress(ValueError):
            reach = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    report = run_preflight(read_target(command, engine=engine, model=model, reach=reach, server=server),
                           PreflightOptions(disk_sample, deadline_s=deadline_s), r)
    # Belt and braces: the evidence quotes command lines and paths.
    report.checks = [replace(c, evidence=r.text(c.evidence), hint=r.text(c.hint) if c.hint else None)
                     for c in report.checks]
    return report


def show(report: PreflightReport, as_json: bool, err: IO[str] | None = None, out: IO[str] | None = None) -> None:
    for line in format_report(report):
        print(line, file=err or sys.stderr, flush=True)
    if as_json:
        print(json.dumps(report.to_dict()), file=out or sys.stdout, flush=True)


def _measure_disk(command: tuple[str, ...], engine: str | None, model: str | None, as_json: bool,
                  history_path: Path | None) -> None:
    path = model or (read_target(list(command), engine=engine).model_path if command and command[0] else None)
    if not path or not Path(path).exists():
        raise UsageFailure("--disk needs the weights' local path (--model PATH or a launch command naming it)")
    try:
        got = measure_disk(path)
    except (ValueError, OSError) as e:
        print(f"firstlight: disk: {e}", file=sys.stderr)
        sys.exit(EXIT_FAILED)
    try:
        with History(history_path) as h:
            h.record_disk(got)
    except HistoryError as e:
        print(f"firstlight: warning: history: {e}", file=sys.stderr)
    cache = f", page cache {got['cache_rate'] / 1e6:.0f} MB/s" if got.get("cache_rate") else ""
    print(f"disk: {got['mount']} ({got['fstype']}, device {got['device']}): {got['rate'] / 1e6:.0f} MB/s sequential "
          f"({got['bytes'] / 1e6:.0f} MB in {got['seconds']:.2f}s, evicted){cache}", file=sys.stderr)
    if as_json:
        print(json.dumps({"event": "disk", **got}))


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM during the checks stops like Ctrl-C does (exit 130, "Aborted."), never half-way silently."""
    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    restore = install_stop_handlers(interrupt, (signal.SIGTERM,))
    try:
        yield
    finally:
        restore()


def preflight_before_launch(cfg: Config, as_json: bool, disk_sample: bool, redactor: Redactor,
                            server: ServerCommand | None = None) -> PreflightReport:
    """``up``'s checks: shown (human lines, and the JSON event before any other), then handed to the session,
    which keeps them with the run and, when one failed, ends the run before launch."""
    with _sigterm_interrupts():
        report = preflight(cfg.command, cfg.engine, str(cfg.model_path) if cfg.model_path else None, disk_sample,
                           redactor, min(DEADLINE_S, cfg.judge.timeout),  # --timeout bounds them too
                           url=cfg.probe.url,  # the port the watch probes, named by --url or by the command
                           server=server)
    try:
        show(report, as_json)
    except (ValueError, OSError):  # a reader that went away: the run goes on, that stream silenced
        for stream in (sys.stderr, sys.stdout):
            try:
                stream.flush()
            except (ValueError, OSError):
                silence(stream)
    return report


@click.command("preflight", cls=Command, epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
@engine_option("detect from the command")
@click.option("--model", default=None, help="Model path or id (default: from the command line).")
@click.option("--no-disk-sample", is_flag=True, help="Skip the bounded read-rate sample of the weights.")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines on stdout; the last is the preflight event.")
@click.option("--disk", is_flag=True, help="Measure the sequential read rate of the filesystem holding the weights "
              "(at most 2 GiB and 5 s of uncached files, evicted afterwards) and keep it in the history for the "
              "anatomy.")
@history_option()
def preflight_command(command: tuple[str, ...], engine: str | None, model: str | None, no_disk_sample: bool,
                      as_json: bool, disk: bool = False, history_path: Path | None = None) -> None:
    """Check what a launch command will use, without starting it: the GPUs (foreign processes, SGLang's and
    vLLM's memory rules), the checkpoint's quantization against the server's own Python, its pip, the
    checkpoint's completeness (headers only), the port, a stale server, memory and disk.

    \b
    firstlight preflight -- python -m sglang.launch_server --model-path /models/K2 --tp 8 --port 30000
    firstlight preflight --json -- llama-server -m model.gguf --port 8080
    """
    if disk:
        _measure_disk(command, engine, model, as_json, history_path)
        return
    if not command or not command[0]:
        raise UsageFailure("no command to check (firstlight preflight -- COMMAND...)")
    with _sigterm_interrupts():
        report = preflight(command, engine, model, not no_disk_sample)
    said = _forecast(list(command), engine, model, report, history_path)
    for line in format_report(report):
        print(line, file=sys.stderr, flush=True)
    print(f"forecast: {one_line(said.line())}", file=sys.stderr, flush=True)
    if as_json:  # the preflight event stays the last line
        print(json.dumps({"event": "forecast", **said.to_dict()}), flush=True)
        print(json.dumps(report.to_dict()), flush=True)
    sys.exit(EXIT_FAILED if report.verdict == FAIL else EXIT_OK)


def _forecast(command: list[str], engine: str | None, model: str | None, report: PreflightReport,
              history_path: Path | None) -> Forecast:
    """The start's forecast as ``up`` would say it: from the history's starts of this deployment (read only; none
    when there is no history yet, or it cannot be read: a warning), else from the weights' bytes."""
    server = read_command(command, engine=engine)
    profile = get_profile(server.engine or "generic")
    key = DeploymentKey.create(profile.name, model or server.model, command, visible_gpu_count(), _redactor(command),
                               server=server)
    fit = next((c for c in report.checks if c.name == "fit"), None)
    said = (fit.status if fit else None, model or server.model_local,
            predicted_type(None, command, profile.flags.attach))
    where = history_path or default_path()
    try:
        with History(where, readonly=True) if exists(where) else contextlib.nullcontext() as h:
            return from_store(h, key, report.facts, *said)
    except HistoryError as e:  # a history that cannot be read is said, and the forecast made without it
        print(f"firstlight: warning: history: {e}; forecast without it", file=sys.stderr)
        return from_store(None, key, report.facts, *said)
