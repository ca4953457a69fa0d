"""What ``firstlight watch`` runs besides the command itself: the settings of a server firstlight did not start
(its command line read from its process, when it has one), the ``--pid``/``--pid-from`` choice, and the sidecar's
loop (``--serve-readiness``): start after start, one set of reporters for all of them (runner/rewatch.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import psutil

from firstlight import settings
from firstlight.cli.options import (
    UsageFailure,
    after_ready_config,
    judge_config,
    probe_config,
    profile_for,
    usage,
)
from firstlight.cli.run import make_reporters, outputs_from
from firstlight.runner.outcome import Outcome
from firstlight.runner.rewatch import ProcessMatcher, Rewatch, Target
from firstlight.runner.serving import ServingWatch
from firstlight.runner.session import Session
from firstlight.settings import Plan
from firstlight.wire import split_url


def url_port(url: str) -> int | None:
    """The URL's port, to prefer the --pid-from match that listens on it (None: a URL that is no URL)."""
    try:
        return split_url(url)[1]
    except ValueError:
        return None


def process_matcher(pid: int | None, pid_from: str | None) -> ProcessMatcher | None:
    if pid is not None and pid_from is not None:
        raise UsageFailure("--pid and --pid-from exclude each other")
    try:
        return ProcessMatcher(pid_from) if pid_from is not None else None
    except re.error as e:
        raise UsageFailure(f"--pid-from is not a valid regular expression: {e}") from None


def watch_plan(url: str, pid: int | None, log_file: Path | None, kw: dict[str, Any],
               log_start_size: int | None = None) -> Plan:
    """The plan of one watched start: its process's command line read once (none without a process).
    ``log_start_size``: where the start's lines begin in the log (runner/rewatch.py's ``Target.log_size``)."""
    command = settings.watched_command(pid) if pid is not None else []  # none: gone, or another user's
    server = settings.read_server(command, kw["engine"], launched=False) if command else None
    profile = profile_for(kw["engine"], command, server)
    probe = probe_config(url, profile, kw)
    after, history = after_ready_config(kw)
    cfg = usage(settings.config, probe=probe, judge=judge_config(kw), watched_command=command, engine=kw["engine"],
                server=server, pid=pid, log_file=log_file, log_from_start=kw.get("log_from_start", False),
                log_start_size=log_start_size,
                after=after, history=history,
                model_path=settings.watch_model(kw["model_path"], command, kw["engine"], server),
                sample_interval=kw["sample_interval"], serving_interval=kw["serving_interval"])
    return settings.plan(cfg, profile, server, api_key=kw["api_key"], outputs=outputs_from(kw))


def run_sidecar(url: str, pid: int | None, matcher: ProcessMatcher | None, log_file: Path | None,
             kw: dict[str, Any]) -> Outcome:
    """watch --serve-readiness: start after start (runner/rewatch.py), one reporter set for all of them."""
    if kw.get("record"):
        raise UsageFailure("--record writes one start's observations: use it without --serve-readiness")
    probe = probe_config(url, profile_for(kw["engine"]), kw)  # a bad URL is a usage error now, not at each start
    first = Target.of(pid) if pid is not None else None
    if first is not None and first.command:
        matcher = ProcessMatcher.exact(list(first.command))
    reporter = make_reporters(outputs_from(kw), True, judge_config(kw).stall_timeout)
    born = psutil.Process().create_time()
    sessions: list[Session] = []  # the last start's session: its serving checks and history

    def run_start(target: Target) -> Outcome:
        plan = watch_plan(url, target.pid, log_file, kw, target.log_size)
        cfg = plan.config
        if first is None and target.create_time is not None and target.create_time < born and cfg.history.enabled:
            # --pid-from found an engine older than this sidecar: the sidecar restarted under a running engine,
            # which is no cold start; keep it out of the budget (--pid names a start on purpose: recorded)
            cfg = dataclasses.replace(cfg, history=dataclasses.replace(cfg.history, enabled=False))
            plan = dataclasses.replace(plan, config=cfg)
            reporter.message(f"pid {target.pid} started before this watch: not recorded in the history")
        session = Session(cfg, plan.profile, reporter, plan.redactor, record_timeout=False, plan=plan)
        sessions[:] = [session]
        return session.run()

    def serving(outcome: Outcome, target: Target) -> ServingWatch | None:
        return sessions[-1].serving_watch(outcome.result, target.pid) if sessions else None

    try:
        return Rewatch(run_start, reporter, probe.url, matcher=matcher, first=first, log_file=log_file,
                       engine=kw["engine"] or "generic", serving=serving).run()
    finally:
        reporter.close()
