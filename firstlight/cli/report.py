"""``firstlight report``: draw a start: a self-contained HTML page and/or a Chrome trace-event file.

The run comes from a ``--record`` file of ``up``/``watch`` (optionally with its ``--json`` summary), or from
the history (``--run ID``, ``--last``). It is replayed through the judge, so the page says what the live run
said; the deployment's baseline start from the history is drawn beside it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from firstlight import settings
from firstlight.cli.options import (
    EXIT_FAILED,
    EXIT_OK,
    Command,
    UsageFailure,
    history_option,
    judge_options,
    options,
    usage,
)
from firstlight.config import JudgeConfig
from firstlight.history import STARTS, History, HistoryError, default_path
from firstlight.history.location import exists, mask
from firstlight.report.record import RecordError, read_record, read_summary
from firstlight.report.series import RunView
from firstlight.report.views import view_from_history, view_from_record, write_outputs

EXIT_HELP = """\b
Exit codes:
  0    the report was written
  1    the run cannot be read (no observations, a damaged history) or the output cannot be written
  64   usage error (bad option, unknown run id)"""

# What a summary with fields of the wrong type (numbers as strings, NaN, 1e308, lists for objects) raises when
# drawn: the summary is then left out, never the report.
BAD_FIELDS = (TypeError, ValueError, KeyError, AttributeError, OverflowError, IndexError)


@click.command("report", cls=Command, epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("record", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("-o", "--output", "html_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the HTML report here (self-contained: open it anywhere, no network).")
@click.option("--trace", "trace_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write Chrome trace-event JSON here (open in ui.perfetto.dev or chrome://tracing).")
@click.option("--summary", "summary_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The run's summary: its --json output (or the summary object), for what came after the "
                   "verdict (benchmark, regression) and the history's baseline.")
@click.option("--run", "run_id", type=int, default=None, help="A run from the history (see firstlight history).")
@click.option("--last", is_flag=True, help="The latest start in the history (of --deployment, if given).")
@click.option("--deployment", default=None, metavar="HASH", help="With --last: that deployment's latest start.")
@history_option()
@click.option("--no-baseline", is_flag=True, help="Do not draw the deployment's baseline start.")
@options(*judge_options)  # the rules the run was watched with (a record does not carry them), as for up/watch
def report_command(record: Path | None, html_path: Path | None, trace_path: Path | None, summary_path: Path | None,
                   run_id: int | None, last: bool, deployment: str | None, history_path: Path | None,
                   no_baseline: bool, timeout: float, stall_timeout: float, spin_timeout: float) -> None:
    """Draw a start: phases on a seconds axis, readiness levels, the verdict with its evidence, resource
    charts, the baseline start, and the last log lines.

    \b
    firstlight up --record run.jsonl --json -- llama-server -m model.gguf > run.json
    firstlight report run.jsonl --summary run.json -o start.html --trace start.json
    firstlight report --last -o start.html
    firstlight report --run 12 -o start.html
    """
    sources = sum(x for x in (record is not None, run_id is not None, last))
    if sources != 1:
        raise UsageFailure("give one run: a --record FILE, --run ID or --last")
    if html_path is None and trace_path is None:
        raise UsageFailure("nothing to write: give -o FILE.html and/or --trace FILE.json")
    if deployment and not last:
        raise UsageFailure("--deployment goes with --last")
    if summary_path is not None and record is None:
        raise UsageFailure("--summary goes with a record file")
    if record is not None and not record.is_file():
        raise UsageFailure(f"not a readable record file: {record}")
    for option, path in (("-o", html_path), ("--trace", trace_path)):
        if path is not None and not os.access(path.parent.resolve(), os.W_OK):
            raise UsageFailure(f"{option} {mask(path)}: cannot write in {path.parent}")
    rules = usage(settings.judge, timeout, stall_timeout, spin_timeout)
    try:
        if record is not None:
            rec = read_record(record)
            summary = read_summary(summary_path) if summary_path else None
            try:
                view, _ = view_from_record(rec.observations, summary, rules, history_path, not no_baseline,
                                           source=f"record {record}")
                if rec.skipped:
                    view.notes.append(f"{rec.skipped} line(s) of {record} were not observations and were skipped")
                written = write_outputs(view, html_path, trace_path)
            except BAD_FIELDS as e:  # nothing written yet: both outputs are rendered before either is written
                if summary is None:
                    raise
                view, _ = view_from_record(rec.observations, None, rules, history_path, False,
                                           source=f"record {record}")
                view.notes.append(f"the summary {summary_path} has fields of the wrong type ({type(e).__name__}): "
                                  "drawn from the record alone")
                click.echo(f"firstlight report: note: {view.notes[-1]}", err=True)
                written = write_outputs(view, html_path, trace_path)
        else:
            view = _view_from_history(history_path, run_id, deployment, rules, not no_baseline)
            written = write_outputs(view, html_path, trace_path)
    except RecordError as e:
        click.echo(f"firstlight report: {e}", err=True)
        sys.exit(EXIT_FAILED)
    except OSError as e:
        click.echo(f"firstlight report: cannot write {e.filename}: {e.strerror}", err=True)
        sys.exit(EXIT_FAILED)
    for p in written:
        click.echo(f"firstlight report: {view.verdict} run drawn to {p}", err=True)
    for note in view.notes:
        if note.startswith("the record ends"):
            click.echo(f"firstlight report: note: {note}", err=True)
    sys.exit(EXIT_OK)


def _view_from_history(history_path: Path | None, run_id: int | None, deployment: str | None, rules: JudgeConfig,
                       with_baseline: bool) -> RunView:
    path = history_path or default_path()
    if not exists(path):
        raise RecordError(f"no history at {mask(path)}")
    try:
        with History(path, warn=lambda m: click.echo(f"firstlight: warning: {m}", err=True)) as h:
            if run_id is not None:
                run = h.get(run_id)
                if run is None:
                    raise UsageFailure(f"no run {run_id} in {mask(path)}")
            else:
                starts = [r for r in h.runs(deployment, limit=50) if r.kind in STARTS]
                if not starts:
                    raise RecordError(f"no start in {mask(path)}"
                                      + (f" for deployment {deployment}" if deployment else ""))
                run = starts[0]
            return view_from_history(h, run, rules, with_baseline)
    except HistoryError as e:
        raise RecordError(str(e)) from None
