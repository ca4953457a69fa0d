"""Helpers shared by tests/e2e/units/test_journal.py, tests/unit/units/journal/test_journal.py."""

from __future__ import annotations

import queue

from firstlight.timeline import Observation


def _collect(q: queue.Queue[Observation]) -> list[Observation]:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out
