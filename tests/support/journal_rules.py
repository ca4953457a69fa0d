"""Helpers shared by tests/e2e/units/test_journal_rules.py, tests/unit/units/journal/test_rules.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from firstlight.units.journal.entries import JournalEntry, parse_line
from firstlight.units.journal.follow import JournalFollower
from tests.support.common import wait_for

UNIT = "llm.service"


T0 = 1_790_000_000.0


def entry(**fields: Any) -> JournalEntry:
    """One entry as journalctl -o json writes it (as text, parsed back)."""
    obj = {"__REALTIME_TIMESTAMP": str(int(T0 * 1e6)), **fields}
    e = parse_line(json.dumps(obj))
    assert e is not None
    return e


# -- the follower's journalctl: what it is started with, and what it says when it goes wrong ---------------------
def _follow(exe: str, journal_file: Path | None = None) -> JournalFollower:
    follower = JournalFollower(UNIT, journal_file, journalctl=exe)
    assert follower._thread.name == "firstlight-journal" and follower._thread.daemon
    follower.start()
    wait_for(lambda: not follower.running, 60, "the follower to end with its journalctl")
    follower.stop()
    return follower
