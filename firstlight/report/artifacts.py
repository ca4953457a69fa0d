"""What ``up``/``watch`` keep of a run once it ends: ``--record``, ``--report``, ``--trace`` and the timeline
stored with the run in the history.

The session writes each observation, as it feeds it to the judge, to one stream (its ``record``). Here that
stream is a tee: the user's ``--record`` file, and a private temporary file kept only for this run. When the
run ends, whatever the verdict (or an internal error), the report and trace are drawn from the temporary file
and the run's summary, and a downsampled copy goes into the history next to the run.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from firstlight.config import Config
from firstlight.history.store import History, HistoryError
from firstlight.report.record import RecordError, RecordTee, pack_timeline, parse_lines
from firstlight.report.views import view_from_record, write_outputs


class RunArtifacts:
    def __init__(self, cfg: Config, record: Path | None = None, report: Path | None = None,
                 trace: Path | None = None, warn: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg
        self.report, self.trace = report, trace
        self.warn = warn or (lambda m: None)
        self._user: IO[str] | None = None
        self._kept: IO[str] | None = None
        self._kept_path: Path | None = None
        self._tee: RecordTee | None = None
        if record is not None:
            self._user = open(record, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        if report is not None or trace is not None or cfg.history.enabled:
            fd, name = tempfile.mkstemp(prefix="firstlight-run-", suffix=".jsonl")
            os.unlink(name)  # a private copy with no name: a firstlight killed by SIGKILL leaves nothing in /tmp
            self._kept = os.fdopen(fd, "w+", encoding="utf-8")
            self._kept_path = Path(f"/proc/self/fd/{fd}")  # read back through a file of its own (Linux)

    def stream(self, warn: Callable[[str], None] | None = None) -> IO[str] | None:
        """The session's ``record``: None when nothing is kept. A tee reports a failing ``--record`` itself,
        through ``warn`` (the run's reporters), and keeps the private copy going."""
        if self._kept is not None:
            self._tee = RecordTee(self._user, self._kept, warn=warn or self.warn)
            return self._tee  # type: ignore[return-value]
        return self._user

    def finish(self, summary: dict[str, Any] | None) -> list[Path]:
        """Draw the report and trace, store the timeline in the history; never raises (one warning instead)."""
        if self._kept is None:
            return []
        if self._tee is not None:
            self._tee.finish()
        # What reached the disk is read back through a new open file: a flush that fails (a full disk, a file-size
        # limit) leaves the buffer unwritable, and a record cut mid-line is read up to its last whole line.
        with contextlib.suppress(OSError, ValueError):
            self._kept.flush()
        try:
            with open(self._kept_path or "", encoding="utf-8", errors="replace") as f:
                observations = parse_lines(f).observations
        except OSError as e:
            self.warn(f"report and history timeline not written: cannot read this run's copy ({e.strerror})")
            return []
        if not observations:
            return []
        written: list[Path] = []
        if self.report is not None or self.trace is not None:
            try:
                view, _ = view_from_record(observations, summary, self.cfg.judge, self.cfg.history.path,
                                           self.cfg.history.enabled, source="this run")
                written = write_outputs(view, self.report, self.trace)
            except (OSError, RecordError, ValueError) as e:
                self.warn(f"report not written: {e}")
        run_id, uid = (summary or {}).get("history_run"), (summary or {}).get("history_uid")
        run = run_id if isinstance(run_id, int) else uid if isinstance(uid, str) and uid else None
        if self.cfg.history.enabled and run is not None:  # a run that waits in the spool: added to its file
            try:
                with History(self.cfg.history.path, warn=self.warn) as h:
                    h.store_timeline(run, pack_timeline(observations))
            except HistoryError as e:
                self.warn(f"history: timeline not stored: {e}")
        return written

    def close(self) -> None:
        for f in (self._user, self._kept):
            if f is not None:
                with contextlib.suppress(OSError, ValueError):
                    f.close()
