"""``firstlight explain [RECORD | LOG | SUMMARY | --run N | --last]``: where a start's minutes went, what bound each
phase, and what would cut it (the anatomy, ``firstlight.anatomy``), from whatever is at hand: a ``--record`` file (the
judge replays it), a server log (``replay``'s judge: log lines only, so no ``idle``), the ``--json`` output of a run,
or a run of the history.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import click

from firstlight.analysis import analyse
from firstlight.budgets import learn
from firstlight.cli.options import EXIT_FAILED, EXIT_OK, Command, UsageFailure, engine_option, history_option
from firstlight.config import JudgeConfig
from firstlight.files import kind
from firstlight.forecast import graded_line
from firstlight.history import History, HistoryError
from firstlight.logreplay import replay_log
from firstlight.logtext import one_line
from firstlight.report.anatomy_text import clock_lines, describe, human_lines, usual_lines
from firstlight.report.record import RecordError, read_record, read_summary
from firstlight.report.series import profile_for, replay

EXIT_HELP = """\b
Exit codes:
  0    the anatomy was shown
  1    the source holds none (a run recorded before anatomies, a file with no start in it), or a damaged one
  64   usage error (no source, or more than one; a file that is not a regular file, or over 1 GiB)"""
EXPLAIN_MAX_BYTES = 1 << 30  # a record, log or summary explain reads (a record of a long flood is ~100 MB)


def _check_file(path: Path) -> None:
    """A regular file of a bounded size: a FIFO would block in open(), /dev/zero never ends."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UsageFailure(f"no such file: {path}") from None
    except OSError as e:
        raise UsageFailure(f"cannot read {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageFailure(f"{path} is {kind(st.st_mode)}, not a regular file")
    size = st.st_size
    if size > EXPLAIN_MAX_BYTES:
        raise UsageFailure(f"{path} is {size / (1 << 30):.1f} GiB: explain reads at most "
                           f"{EXPLAIN_MAX_BYTES >> 30} GiB")


# the anatomy, the verdict, the engine's clock beside it, the graded forecast (a run's summary only: a log or a record
# has none), and what the deployment's earlier starts took in each phase (a run of the history only)
Found = tuple[dict[str, Any] | None, str, Any, Any, Any]


def _from_file(path: Path, engine: str | None) -> Found:
    try:
        summary = read_summary(path)
        return (summary.get("anatomy"), str(summary.get("verdict", "ready")), summary.get("engine_clock"),
                summary.get("forecast"), None)
    except RecordError:
        pass
    try:
        rec = read_record(path)
    except RecordError:
        rec = None
    if rec is not None:  # judged again as the session judged it (a generic start learns its engine from its lines)
        r = replay(rec.observations, JudgeConfig(), profile_for(rec.observations, engine))
        ready = r.assessment.ready_at
        found = analyse(r.judge, r.assessment, cold_start_s=None if ready is None else ready - r.judge.started_at)
        return found.summary_anatomy, r.assessment.verdict, found.engine_clock, None, None
    report = replay_log(path, engine)
    if not report.phases and report.outcome == "incomplete":
        return None, report.outcome, None, None, None  # no phase recognised: not a startup log (as replay says)
    return report.anatomy, report.outcome, report.engine_clock, None, None


def _from_history(path: Path | None, run_id: int | None) -> Found:
    try:
        with History(path, readonly=True) as h:
            run = h.get(run_id) if run_id is not None else next(iter(h.runs(limit=1)), None)
            # the phases' usual range: the deployment's good starts before this one, of its type
            usual = learn(h.start_anatomies(run.deployment, before=run.id), run.start_type).to_dict() if run else None
            if usual is not None and run is not None:  # whose starts those are: this node's, or the fleet's
                usual |= {"node": run.node, "nodes": h.start_nodes(run.deployment, run.start_type, before=run.id)}
    except HistoryError as e:
        raise UsageFailure(f"history: {e}") from None
    if run is None:
        raise UsageFailure(f"no run {run_id} in the history" if run_id is not None else "the history has no run")
    return (run.summary.get("anatomy"), str(run.summary.get("verdict", "ready")), run.summary.get("engine_clock"),
            run.summary.get("forecast"), usual)


@click.command("explain", cls=Command, epilog=EXIT_HELP)
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False), required=False)
@click.option("--run", "run_id", type=int, default=None, help="A run of the history (see `firstlight history`).")
@click.option("--last", is_flag=True, help="The newest run of the history.")
@engine_option("detect from the log or record")
@history_option()
@click.option("--json", "as_json", is_flag=True, help="Print the anatomy object on stdout.")
def explain_command(source: Path | None, run_id: int | None, last: bool, engine: str | None,
                    history_path: Path | None, as_json: bool) -> None:
    """Where a start's minutes went, what bound each phase, and what would cut it.

    \b
    firstlight explain --last
    firstlight explain start.jsonl          # a --record file, a --json output, or a server log
    """
    if sum((source is not None, run_id is not None, last)) != 1:
        raise UsageFailure("give exactly one of: a file, --run N, --last")
    if source is not None:
        _check_file(source)
        anat, verdict, clock, said, usual = _from_file(source, engine)
    else:
        anat, verdict, clock, said, usual = _from_history(history_path, run_id)
    kind = anat.get("start_type") if isinstance(anat, dict) else None
    typed = describe(kind) if isinstance(kind, dict) and isinstance(kind.get("evidence"), dict) else None
    if not isinstance(anat, dict) or not (anat.get("phases") or typed):
        print("firstlight: explain: no anatomy in it (no phase was seen, or a run recorded before anatomies)",
              file=sys.stderr)
        sys.exit(EXIT_FAILED)
    try:  # a hand-edited history row or --json file may hold anything in any field
        graded = graded_line(said) if isinstance(said, dict) else None
        lines = ([typed] if typed else []) + human_lines(anat, verdict) + clock_lines(
            clock if isinstance(clock, dict) else None) + usual_lines(anat, usual) + (
            [f"forecast: {graded}"] if graded else [])
        out = {**anat, "engine_clock": clock} if clock else dict(anat)
        if isinstance(said, dict):
            out["forecast"] = said
        if usual and usual.get("phases"):
            out["usual"] = usual
        shown = json.dumps(out, allow_nan=False) if as_json else None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as e:
        print(f"firstlight: explain: the anatomy in it is damaged ({type(e).__name__}); nothing shown",
              file=sys.stderr)
        sys.exit(EXIT_FAILED)
    for line in lines:
        print(one_line(line), file=sys.stderr)  # its text is stored text: no escape reaches the terminal
    if shown is not None:
        print(shown)
    sys.exit(EXIT_OK)
