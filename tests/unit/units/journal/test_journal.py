"""The journal source against real journal files (built by systemd-journal-remote, read by journalctl):
each JSON quirk journalctl has, invocations, systemd's own messages, and following a file that grows.

The in-process tests of this subject; the others: ``tests/e2e/units/test_journal.py``.
"""

from __future__ import annotations

import queue
from pathlib import Path

from firstlight.timeline import Observation, SourceNote
from firstlight.units import unit_name
from firstlight.units.journal.entries import parse_line
from firstlight.units.journal.follow import JournalFollower, JournalSource
from tests.support.common import wait_for
from tests.support.units_journal import _collect

UNIT = "llm.service"


def test_garbage_is_not_an_entry():
    assert parse_line("not json") is None
    assert parse_line('{"MESSAGE": "no time"}') is None
    assert parse_line("[1, 2]") is None
    assert unit_name("sglang") == "sglang.service" and unit_name("a@b.service") == "a@b.service"


def test_a_missing_journal_file_is_reported_not_waited_on(tmp_path: Path):
    follower = JournalFollower(UNIT, tmp_path / "missing.journal")
    follower.start()
    wait_for(lambda: not follower.running, 30, "the follower to give up")
    follower.stop()
    assert follower.error and "missing.journal" in follower.error


def test_a_journal_that_cannot_be_read_is_said_once_to_the_watch(tmp_path: Path):
    follower = JournalFollower(UNIT, tmp_path / "missing.journal")
    follower.start()
    q: queue.Queue[Observation] = queue.Queue()
    src = JournalSource(follower, "0" * 32)
    src.start(q.put)
    seen: list[Observation] = []
    try:
        wait_for(lambda: seen.extend(_collect(q)) or any(isinstance(o, SourceNote) for o in seen), 30,
                 "a note about the journal")
    finally:
        src.stop()
        follower.stop()
    notes = [o for o in seen if isinstance(o, SourceNote)]
    assert len(notes) == 1 and notes[0].source == "journal" and "missing.journal" in notes[0].message
