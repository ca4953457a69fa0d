"""A reporter whose reader went away and a record file on a full disk do not end the run (issue 15, item 1)."""

from __future__ import annotations

import os

from firstlight.report.console import ConsoleReporter
from firstlight.report.jsonl import JsonLinesReporter
from firstlight.runner.guard import RecordFile, guard_reporter


def test_a_closed_pipe_silences_only_its_reporter():
    r, w = os.pipe()
    os.close(r)  # the reader (`head -n 3`) is gone
    broken = os.fdopen(w, "w")
    out_r, out_w = os.pipe()
    good = os.fdopen(out_w, "w")
    reporters = guard_reporter(ConsoleReporter(stream=broken, live=False))
    reporters = guard_reporter(type(reporters)(*reporters.reporters, JsonLinesReporter(stream=good)))
    for i in range(50):  # enough to overflow any buffer
        reporters.message(f"line {i} " + "x" * 200)
    reporters.message("the verdict still gets out")
    reporters.close()
    console, jsonl = reporters.reporters
    assert console.lost is not None and "BrokenPipe" in console.lost  # type: ignore[attr-defined]
    assert jsonl.lost is None  # type: ignore[attr-defined]
    good.close()
    with os.fdopen(out_r) as f:
        assert "the verdict still gets out" in f.read()


def test_a_record_on_a_full_disk_is_one_warning():
    warnings: list[str] = []
    rec = RecordFile(open("/dev/full", "w"), warnings.append)  # noqa: SIM115 - RecordFile closes it
    for _ in range(1000):
        rec.write('{"kind": "log", "text": "' + "x" * 100 + '"}\n')
    rec.flush()
    rec.close()
    assert len(warnings) == 1 and "--record" in warnings[0] and "No space" in warnings[0]
