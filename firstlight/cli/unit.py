"""``--unit`` for ``watch``, ``up`` and ``replay``: options and the glue from the command line to a UnitWatch
or a journal replay. ``app`` adds the options and hands over when ``--unit`` is given; what both need is in
``options`` (option types, the Config parts, the usage error) and ``run`` (reporters, artifacts).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

import click

from firstlight import settings
from firstlight.cli.options import (
    Decorator,
    UsageFailure,
    after_ready_config,
    check_expect,
    judge_config,
    number_option,
    options,
    probe_config,
    profile_for,
    url_from_command,
    usage,
)
from firstlight.cli.run import outputs_from, run_watch
from firstlight.units import unit_name
from firstlight.units.journal.entries import JournalError
from firstlight.units.journal.invocations import journal_lines
from firstlight.units.journal.journalctl import is_journal_file
from firstlight.units.systemctl import Systemctl, SystemctlError, UnitState
from firstlight.units.watch import UnitOptions, UnitWatch, engine_command


def unit_options(up: bool = False) -> Decorator:
    """``--unit`` and its companions (watch: ``--journal-file``; up: ``--stop-on-interrupt``)."""
    opts: list[Decorator] = [
        click.option("--unit", default=None, metavar="UNIT",
                     help="A systemd unit: its processes (cgroup), its journal and its restarts"
                          + (" (restarted, or started, then watched)." if up else ".")),
        number_option("max_attempts", "With --unit or --container: a restart (the unit's Restart=on-failure, the "
                                      "container's restart policy) is a new attempt; report each failed one and "
                                      "keep watching, up to N attempts."),
        number_option("restart_wait", "With --unit or --container: seconds to wait for the next attempt after a "
                                      "failed one."),
        click.option("--cgroup", "cgroup_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
                     help="With --unit: the unit's cgroup directory (default: /sys/fs/cgroup + its ControlGroup)."),
    ]
    if up:
        opts.append(click.option("--stop-on-interrupt", is_flag=True,
                                 help="With --unit: Ctrl-C stops the unit too (default: only the watch)."))
    else:
        opts.append(click.option("--journal-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
                                 help="With --unit: read this journal file (journalctl --file) instead of the "
                                      "live journal; it may be growing."))
    return options(*opts)


def _unit(kw: dict[str, Any]) -> str:
    try:
        return unit_name(kw["unit"])
    except ValueError as e:
        raise UsageFailure(f"--unit: {e}") from None


def _unit_state(systemctl: Systemctl, unit: str) -> UnitState:
    try:
        state = systemctl.show(unit)
    except SystemctlError as e:
        raise UsageFailure(f"--unit {unit}: {e} (without systemd, --journal-file FILE reads a journal file)") from None
    if not state.exists:
        raise UsageFailure(f"--unit {unit}: no such unit (LoadState={state.load_state or 'unknown'})")
    return state


def watch_unit(url: str | None, kw: dict[str, Any], restart_first: bool = False, echo: bool = False) -> None:
    """``watch --unit`` and ``up --unit``: exits with the verdict's code."""
    check_expect(kw["expect"])
    unit = _unit(kw)
    journal_file: Path | None = kw.get("journal_file")
    if kw.get("pid") is not None or kw.get("log_file") is not None:
        raise UsageFailure("--unit finds the processes and the log itself: drop --pid and --log")
    if journal_file is not None:
        if restart_first:
            raise UsageFailure("up --unit restarts a live unit; --journal-file is for watch and replay")
        try:
            if not is_journal_file(journal_file):
                raise UsageFailure(f"--journal-file {journal_file}: not a journal file (replay also reads journalctl "
                             "-o json output; watch follows journal files)")
        except OSError as e:
            raise UsageFailure(f"--journal-file {journal_file}: {e.strerror or e}") from None
    systemctl = Systemctl() if journal_file is None else None
    state = _unit_state(systemctl, unit) if systemctl is not None else None
    command, wrapper_url = engine_command(state.exec_start) if state is not None else ([], None)
    profile = profile_for(kw["engine"], command)
    url = url or wrapper_url or (url_from_command(command, profile) if command else None)
    if url is None:
        raise UsageFailure("--unit with --journal-file needs the server's URL (--url or the URL argument)")
    after, history = after_ready_config(kw)
    cfg = usage(settings.config, probe=probe_config(url, profile, kw), judge=judge_config(kw),
                watched_command=command, engine=kw["engine"], after=after, history=history,
                model_path=settings.watch_model(kw["model_path"], command, kw["engine"]),
                sample_interval=kw["sample_interval"], echo_server_output=echo)
    opts = UnitOptions(unit, journal_file, kw.get("cgroup_dir"), kw["max_attempts"], kw["restart_wait"],
                       restart_first, kw.get("stop_on_interrupt", False))
    if restart_first:
        assert systemctl is not None
        try:
            state = systemctl.restart_or_start(unit)
        except SystemctlError as e:
            raise click.ClickException(str(e)) from None
    plan = settings.plan(cfg, profile, api_key=kw["api_key"], outputs=outputs_from(kw))

    def run(reporter: Any, record: IO[str] | None) -> Any:
        return UnitWatch(opts, cfg, profile, reporter, plan.redactor, record, systemctl).run(state)

    outcome = run_watch(plan, runner=run)
    sys.exit(outcome.exit_code)


def replay_unit(kw: dict[str, Any], engine: str | None, as_json: bool) -> None:
    """``replay --unit UNIT --journal-file FILE [--invocation ID]``: the same report as a log replay, of one
    invocation's lines (the last one by default)."""
    from firstlight.logreplay import replay_timed
    from firstlight.report.replay_text import format_replay_text

    unit = _unit(kw)
    journal_file: Path | None = kw.get("journal_file")
    if journal_file is None:
        raise UsageFailure("replay --unit needs --journal-file FILE (a journal file, or journalctl -o json output)")
    if not journal_file.is_file():
        raise UsageFailure(f"--journal-file {journal_file}: not a readable file")
    if engine is not None:
        profile_for(engine)
    try:
        chosen, invocations, pairs = journal_lines(journal_file, unit, kw.get("invocation"))
        n = invocations.index(chosen) + 1
        click.echo(f"firstlight replay: {unit} {chosen.describe()} ({n} of {len(invocations)}"
                   + ("; --invocation ID for another)" if len(invocations) > 1 else ")"), err=True)
        # the lines with their journal times; the text is what a log replay reads
        report = replay_timed(pairs, engine, chosen.ending)
    except JournalError as e:  # no such unit or invocation in it, or not a journal: the input is wrong
        raise UsageFailure(str(e)) from None
    except OSError as e:
        raise UsageFailure(f"cannot read {journal_file}: {e.strerror}") from None
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        click.echo(format_replay_text(report))
    sys.exit({"ready": 0, "failed": 1}.get(report.outcome, 3))
