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

from firstlight import settings
from firstlight.cli.options import UsageFailure, usage
from firstlight.config import Outputs
from firstlight.preflight import PreflightReport
from firstlight.report.artifacts import RunArtifacts
from firstlight.report.base import Reporter, Reporters
from firstlight.report.console import ConsoleReporter
from firstlight.report.dashboard import DashboardReporter
from firstlight.report.jsonl import JsonLinesReporter
from firstlight.report.prometheus import PrometheusExporter
from firstlight.report.readiness import ReadinessServer, parse_bind
from firstlight.report.systemd import SystemdNotifier
from firstlight.runner.members import MemberWatch, members_from_lws
from firstlight.runner.outcome import Outcome
from firstlight.runner.session import Session
from firstlight.settings import Plan


def outputs_from(kw: dict[str, Any]) -> Outputs:
    """The outputs the start commands' options ask for, typed once (``--record`` ... ``--member-port``)."""
    return Outputs(record=kw.get("record"), report=kw.get("report_path"), trace=kw.get("trace_path"),
                   json=bool(kw.get("as_json")), plain=bool(kw.get("plain")), metrics=kw.get("metrics_port"),
                   readiness=kw.get("serve_readiness"), deployment=kw.get("deployment"),
                   members=tuple(kw.get("members") or ()), member_port=int(kw.get("member_port") or 8081))


def make_reporters(outputs: Outputs, echo: bool, stall_timeout: float = 120.0) -> Reporter:
    """The reporters the options ask for; a listener that cannot listen is a usage error, the others closed.
    ``stall_timeout``: how long a member may say nothing new before the group counts it as stalled."""
    as_json, plain, readiness, metrics_port = outputs.json, outputs.plain, outputs.readiness, outputs.metrics
    live = sys.stderr.isatty() and not (plain or as_json)  # the dashboard; plain lines otherwise
    chosen: list[Reporter] = [DashboardReporter(echo_server=echo) if live else
                              ConsoleReporter(echo_server=echo, live=False if plain or as_json else None)]
    if as_json:
        chosen.append(JsonLinesReporter())
    members = group_members(outputs)
    if readiness is not None or members:
        # without --serve-readiness, a leader still keeps its state for the group (its members read, the group
        # decided and told on the console, in --json and the scrape), served nowhere
        server = _readiness_server(readiness, chosen[0]) if readiness is not None else ReadinessServer(serve=False)
        chosen.append(server)
        if members:
            assert isinstance(server, ReadinessServer)
            chosen[0].message(f"group: {len(members)} member(s): {', '.join(members)}"
                              + ("" if readiness is not None else " (the group's state is not served: no "
                                                                  "--serve-readiness)"))
            watch = MemberWatch(members, server, stall_timeout, chosen[0].message)
            watch.sinks += [r for r in chosen if isinstance(r, JsonLinesReporter)]  # the group in --json too
            chosen.append(watch)
    if metrics_port is not None:
        try:
            host, port = parse_bind(metrics_port, "--metrics-port")
            if port == 0:
                raise ValueError(f"--metrics-port {metrics_port!r}: a scrape needs a fixed port (1..65535)")
            exporter = PrometheusExporter(port, host, deployment=outputs.deployment)
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


def group_members(outputs: Outputs) -> list[str]:
    """--member URLs, else the LeaderWorkerSet env's (docs/multinode.md)."""
    members = list(outputs.members) or members_from_lws(os.environ, outputs.member_port)
    for url in members:
        if not url.startswith(("http://", "https://")):
            raise UsageFailure(f"--member {url!r}: expected a URL (http://HOST:PORT of that node's firstlight)")
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


def run_watch(plan: Plan, runner: Callable[[Reporter, IO[str] | None], Outcome] | None = None,
              preflight: PreflightReport | None = None) -> Outcome:
    """One watch (a Session on ``plan``, or ``runner``: a unit's or a container's attempts) with the reporters and
    artifacts its outputs ask for; both are closed whatever happens."""
    cfg, out = plan.config, plan.outputs
    usage(settings.check_outputs, out)  # found out now, not after a ten-minute start
    try:
        artifacts = RunArtifacts(cfg, out.record, out.report, out.trace)
    except OSError as e:
        raise UsageFailure(f"--record {out.record}: cannot write ({e.strerror})") from None
    reporter = make_reporters(out, cfg.echo_server_output, cfg.judge.stall_timeout)
    rpc = plan.server.rpc if plan.server is not None else ()
    if rpc and len(rpc) != len(out.members):  # each rpc worker is a member with its own firstlight
        reporter.message(f"warning: the command names {len(rpc)} --rpc worker(s) ({', '.join(rpc)}) but "
                         f"{len(out.members)} --member URL(s) were given: the group verdict "
                         "covers only the members given")
    # After the summary, which stays the last JSON line: what was written goes to stderr only.
    artifacts.warn = lambda m: click.echo(f"firstlight: {m}", err=True)
    outcome: Outcome | None = None
    try:
        record = artifacts.stream(reporter.message)  # a --record that fails is one warning among the run's lines
        if runner is not None:  # a unit's attempts (firstlight.units), a container's (firstlight.containers)
            outcome = runner(reporter, record)
        else:
            outcome = Session(cfg, plan.profile, reporter, plan.redactor, record, preflight=preflight,
                              plan=plan).run()
        return outcome
    finally:
        reporter.close()
        for path in artifacts.finish(outcome.summary if outcome else None):
            click.echo(f"firstlight: wrote {path}", err=True)
        artifacts.close()
