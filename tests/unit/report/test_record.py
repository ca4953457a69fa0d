"""``report`` never exits 70 on a hostile record or summary (issue 20): fields of the wrong type are counted and
skipped (a record line) or left out (the summary), as the record's docstring promises; a log tail of huge lines
is clipped on the page. The record and summary come from a real ``up`` of the simulator.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_report.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from firstlight.report.record import LINE_CAP_BYTES, RecordError, read_summary
from tests.support.docs import PAGES


def test_the_private_copy_of_a_flooded_run_is_bounded_and_keeps_the_last_lines(tmp_path: Path):
    """A real temporary file, as ``up`` keeps it: log lines nearly 3 x the cap (the product's 8 MiB and 2,000
    lines, asserted; the rule timed here on a tenth of both), then the verdict's probe."""
    from firstlight.report.record import KEPT_CAP_BYTES, KEPT_TAIL_LINES, RecordTee, parse_lines
    from firstlight.timeline import Level, LogLine, Probe

    assert (KEPT_CAP_BYTES, KEPT_TAIL_LINES) == (8 << 20, 2000)  # the values a run keeps
    cap, tail, flood = KEPT_CAP_BYTES // 10, KEPT_TAIL_LINES // 10, 10_000
    user, kept = tmp_path / "user.jsonl", tmp_path / "kept.jsonl"
    with open(user, "w") as u, open(kept, "w+") as k:
        tee = RecordTee(u, k, cap=cap, tail=tail)
        for i in range(flood):
            tee.write(json.dumps(LogLine(1000.0 + i / 1e4, f"{i} " + "f" * 190, lineno=i).to_dict()) + "\n")
        tee.write(json.dumps(Probe(2000.0, Level.GENERATION, True, "ready").to_dict()) + "\n")
        tee.finish()
    assert user.stat().st_size > 2 * cap  # the user's --record has everything
    assert kept.stat().st_size < cap + (tail + 10) * 300
    obs = parse_lines(kept.read_text().splitlines()).observations
    lines = [o for o in obs if isinstance(o, LogLine)]
    assert lines[-1].lineno == flood - 1 and any(isinstance(o, Probe) for o in obs)  # the end and the verdict
    assert any("left out of this run's report" in getattr(o, "message", "") for o in obs)
    assert isinstance(obs[-1], Probe)  # in the order fed: the flood's last lines, then the verdict's probe


def _summary_line(size: int) -> bytes:
    """A ``--json`` summary event of exactly ``size`` bytes before its newline (padded inside a string)."""
    head = b'{"event": "summary", "verdict": "ready", "pad": "'
    return head + b"x" * (size - len(head) - 2) + b'"}'


def test_the_record_readers_line_cap_is_the_16_mib_the_docs_state(tmp_path: Path):
    stated = re.search(r"each line at most (\d+) MiB", " ".join(PAGES["docs/reliability.md"].split()))
    assert stated and int(stated[1]) << 20 == LINE_CAP_BYTES == 16 * 1024 * 1024
    at_cap, over = tmp_path / "at-cap.jsonl", tmp_path / "over.jsonl"
    at_cap.write_bytes(_summary_line(16 * 1024 * 1024) + b"\n")
    over.write_bytes(_summary_line(16 * 1024 * 1024 + 1) + b"\n")
    assert read_summary(at_cap)["verdict"] == "ready"  # a line of 16 MiB is read
    with pytest.raises(RecordError, match="holds no run summary"):  # one byte more: skipped whole, none left
        read_summary(over)
