"""The run history under hostile conditions (issue 15, low items): a damaged row, a file that is not a database,
a read-only history, a locked one. Real files, a real SQLite lock, the real CLI.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_history.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlight.history import History
from tests.support.hostile_history import KEY, _two_runs


def test_a_read_only_history_can_be_listed_when_opened_read_only(tmp_path: Path):
    """Root ignores permissions, so the read-only open itself is checked: it creates and writes nothing."""
    path = tmp_path / "h.sqlite3"
    _two_runs(path)
    before = path.read_bytes()
    with History(path, readonly=True) as h:
        assert len(h.runs()) == 2
        with pytest.raises(Exception, match=r"readonly|read-only"):
            h.record_run("up", {"verdict": "ready"}, KEY)
    assert path.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if "corrupt" in p.name]
