"""A run's view, ready to draw (``report/series.py``), from a ``--record`` stream or the history, with the
deployment's baseline start beside it; and the HTML page and trace written from it atomically. Used by
``firstlight report`` and by ``up``/``watch`` at the end of a run (``report/artifacts.py``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from firstlight.config import JudgeConfig
from firstlight.history import History, HistoryError, Run, default_path
from firstlight.history.location import exists
from firstlight.report.html import render_html
from firstlight.report.record import RecordError, unpack_timeline
from firstlight.report.series import RunView, build_view
from firstlight.report.trace import render_trace
from firstlight.timeline import Observation


def view_from_history(history: History, run: Run, rules: JudgeConfig, with_baseline: bool) -> RunView:
    data = history.timeline(run.id)
    if data is None:
        raise RecordError(f"run {run.id} has no stored timeline (runs recorded before firstlight kept them, and "
                          f"bench runs, have none)")
    observations = unpack_timeline(data)
    if not observations:
        raise RecordError(f"run {run.id}: its stored timeline is empty")
    base = history.baseline_run(run.deployment, run.id) if with_baseline else None
    return build_view(observations, run.summary, rules, base.summary if base else None,
                      base.id if base else None, source=f"history run {run.id} ({history.path})")


def view_from_record(observations: Sequence[Observation], summary: dict[str, Any] | None, rules: JudgeConfig,
                     history_path: Path | str | None, with_baseline: bool, source: str) -> tuple[RunView, list[str]]:
    """The view of a recorded run, with its baseline when the history knows its deployment."""
    notes: list[str] = []
    base: Run | None = None
    deployment = ((summary or {}).get("baseline") or {}).get("deployment")
    if with_baseline and deployment:
        path = history_path or default_path()
        if exists(path):
            try:
                with History(path, warn=notes.append) as h:
                    base = h.baseline_run(deployment, (summary or {}).get("history_run"))
            except HistoryError as e:
                notes.append(f"history: {e}")
    view = build_view(list(observations), summary, rules, base.summary if base else None,
                      base.id if base else None, source=source)
    view.notes += notes
    return view, notes


def write_outputs(view: RunView, html_path: Path | None, trace_path: Path | None) -> list[Path]:
    """Write atomically (a temporary file beside the target, then a rename): a reader never sees half a page."""
    written = []
    for path, text in ((html_path, render_html(view) if html_path else ""),
                       (trace_path, render_trace(view) if trace_path else "")):
        if path is None:
            continue
        path = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(path)
    return written
