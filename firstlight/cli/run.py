"""Running a watch from the command line: the reporters the options ask for (the dashboard on a terminal, else
plain lines; JSON Lines, the readiness endpoints, Prometheus, systemd's notify socket), the run's artifacts
(``--record``, ``--report``, ``--trace``, the history's timeline), and the verdict's outcome. Shared by the start
commands (``app``) and ``--unit`` (``unit``).
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Callable
from typing import IO, Any

import click

from firstlight.cli.options import UsageFailure, redactor_for
from firstlight.config import Config
from firstlight.engines import read_command
from firstlight.engines.profile import EngineProfile
from firstlight.preflight import PreflightReport
from firstlight.redact import Redactor
from firstlight.report.artifacts import RunArtifacts
from firstlight.report.base import Reporter, Reporters
from firstlight.report.console import ConsoleReporter
from firstlight.report.dashboard import DashboardReporter
from firstlight.report.jsonl import JsonLinesReporter
from firstlight.report.prometheus import PrometheusExporter
from firstlight.report.readiness import ReadinessServer, parse_bind
from firstlight.report.systemd import SystemdNotifier
from firstlight.runner.members import MemberWatch, members_from_lws
from firstlight.runner.session import Outcome, Session


def make_reporters(as_json: bool, echo: bool, metrics_port: str | None = None, readiness: str | None = None,
                   plain: bool = False, deployment: str | None = None, kw: dict[str, Any] | None = None) -> Reporter:
    """The reporters the options ask for; a listener that cannot listen is a usage error, the others closed."""
    live = sys.stderr.isatty() and not (plain or as_json)  # the dashboard; plain lines otherwise
    chosen: list[Reporter] = [DashboardReporter(echo_server=echo) if live else
                              ConsoleReporter(echo_server=echo, live=False if plain or as_json else None)]
    if as_json:
        chosen.append(JsonLinesReporter())
    members = group_members(kw or {}, readiness)
    if readiness is not None:
        server = _readiness_server(readiness, chosen[0])
        chosen.append(server)
        if members:
            assert isinstance(server, ReadinessServer)
            chosen[0].message(f"group: {len(members)} member(s): {', '.join(members)}")
            watch = MemberWatch(members, server, float((kw or {}).get("stall_timeout") or 120.0), chosen[0].message)
            watch.sinks += [r for r in chosen if isinstance(r, JsonLinesReporter)]  # the group in --json too
            chosen.append(watch)
    if metrics_port is not None:
        try:
            host, port = parse_bind(metrics_port, "--metrics-port")
            if port == 0:
                raise ValueError(f"--metrics-port {metrics_port!r}: a scrape needs a fixed port (1..65535)")
            exporter = PrometheusExporter(port, host, deployment=deployment)
            chosen.append(exporter)
            for watch in (r for r in chosen if isinstance(r, MemberWatch)):
                watch.sinks.append(exporter)  # the group's state in the scrape too
        except (ValueError, OSError) as e:
            for r in chosen:  # the console, and a readiness server already listening
                r.close()
            why = str(e) if isinstance(e, ValueError) else f"--metrics-port {metrics_port}: cannot listen " \
                                                            f"({e.strerror})"
            raise UsageFailure(why) from None
    notifier = SystemdNotifier()
    if notifier.enabled:  # running as a Type=notify unit
        chosen.append(notifier)
    return chosen[0] if len(chosen) == 1 else Reporters(*chosen)


def group_members(kw: dict[str, Any], readiness: str | None) -> list[str]:
    """--member URLs, else the LeaderWorkerSet env's (docs/multinode.md); a usage error without --serve-readiness."""
    members = list(kw.get("members") or ()) or members_from_lws(os.environ, int(kw.get("member_port") or 8081))
    for url in members:
        if not url.startswith(("http://", "https://")):
            raise UsageFailure(f"--member {url!r}: expected a URL (http://HOST:PORT of that node's firstlight)")
    if members and readiness is None:
        raise UsageFailure("--member: the group's readiness is served on --serve-readiness HOST:PORT; give it")
    return members


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
        raise UsageFailure(why) from None
    console.message(f"readiness endpoints: {server.url}/readyz /livez /startupz /events")
    if not _is_loopback(server.host):
        console.message(f"warning: --serve-readiness {spec} answers on every address it binds (not only this "
                        "machine): the pid, phase and evidence are visible to anyone who can reach the port")
    return server


def run_watch(cfg: Config, profile: EngineProfile, kw: dict[str, Any], redactor: Redactor | None = None,
              runner: Callable[[Reporter, IO[str] | None], Outcome] | None = None,
              preflight: PreflightReport | None = None) -> Outcome:
    """One watch (a Session, or ``runner``: a unit's attempts) with the reporters and artifacts ``kw`` asks for;
    both are closed whatever happens."""
    redactor = redactor or redactor_for(cfg.watched_command, kw["api_key"])
    for opt in ("report_path", "trace_path"):  # found out now, not after a ten-minute start
        if kw.get(opt) is not None and not os.access(kw[opt].parent.resolve(), os.W_OK):
            raise UsageFailure(f"--{opt.split('_')[0]} {kw[opt]}: cannot write in {kw[opt].parent}")
    try:
        artifacts = RunArtifacts(cfg, kw.get("record"), kw.get("report_path"), kw.get("trace_path"))
    except OSError as e:
        raise UsageFailure(f"--record {kw['record']}: cannot write ({e.strerror})") from None
    reporter = make_reporters(kw["as_json"], cfg.echo_server_output, kw.get("metrics_port"),
                              kw.get("serve_readiness"), kw.get("plain", False), kw.get("deployment"), kw)
    argv = cfg.command or cfg.watched_command
    rpc = read_command(argv, engine=cfg.engine, env={}).rpc if argv else ()
    if rpc and len(rpc) != len(kw.get("members") or ()):  # each rpc worker is a member with its own firstlight
        reporter.message(f"warning: the command names {len(rpc)} --rpc worker(s) ({', '.join(rpc)}) but "
                         f"{len(kw.get('members') or ())} --member URL(s) were given: the group verdict "
                         "covers only the members given")
    # After the summary, which stays the last JSON line: what was written goes to stderr only.
    artifacts.warn = lambda m: click.echo(f"firstlight: {m}", err=True)
    outcome: Outcome | None = None
    try:
        record = artifacts.stream(reporter.message)  # a --record that fails is one warning among the run's lines
        if runner is not None:  # a unit's attempts (firstlight.units)
            outcome = runner(reporter, record)
        else:
            outcome = Session(cfg, profile, reporter, redactor, record, preflight=preflight).run()
        return outcome
    finally:
        reporter.close()
        for path in artifacts.finish(outcome.summary if outcome else None):
            click.echo(f"firstlight: wrote {path}", err=True)
        artifacts.close()
