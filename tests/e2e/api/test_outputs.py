"""What the Python API writes besides its verdict, as ``firstlight up --record --report --trace`` does: the run's
record while it goes, its HTML report and Chrome trace when it ends (after the block's exit, or at a NotReady),
whatever the verdict. The simulator is the server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import firstlight
from firstlight.sim.fixtures import free_port
from tests.support.common import sim_cmd


def test_up_writes_the_record_while_it_runs_and_the_report_and_trace_at_the_end(tmp_path: Path, weights: Path):
    record, report, trace = tmp_path / "run.jsonl", tmp_path / "run.html", tmp_path / "run.json"
    cmd = sim_cmd("normal", free_port(), "--model-path", str(weights), "--load-seconds", "1")
    with firstlight.up(cmd, timeout=120, history=False, no_preflight=True, record=record, report=report,
                       trace=trace) as server:
        assert server.result.verdict == firstlight.READY
        assert record.stat().st_size > 0  # written as the run goes
        assert not report.exists() and not trace.exists() and server.written == []  # drawn when the run ends
    assert server.written == [report, trace]
    page = report.read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "ready" in page
    events = json.loads(trace.read_text())["traceEvents"]
    assert events and any(e.get("ph") == "X" for e in events)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert any(line.get("kind") == "probe" for line in lines), lines[:3]


def test_a_start_that_fails_is_reported_too(tmp_path: Path):
    report = tmp_path / "failed.html"
    cmd = [sys.executable, "-c", "import sys; print('CUDA out of memory', flush=True); sys.exit(1)"]
    with pytest.raises(firstlight.NotReady) as caught, firstlight.up(cmd, port=free_port(), timeout=60,
                                                                     history=False, no_preflight=True, report=report):
        pytest.fail("entered the block of a server that failed")
    assert caught.value.result.verdict == firstlight.FAILED
    assert "failed" in report.read_text()


def test_an_output_that_cannot_be_written_is_a_value_error_before_anything_starts(tmp_path: Path):
    missing = tmp_path / "no-such-dir" / "r.html"
    with pytest.raises(ValueError, match=r"^report .*: cannot write in"):
        firstlight.up([sys.executable, "-c", "pass"], port=free_port(), report=missing)
    with pytest.raises(ValueError, match=r"^trace .*: cannot write in"):
        firstlight.watch(f"http://127.0.0.1:{free_port()}", trace=missing)


def test_watch_writes_the_report_and_trace_when_the_watch_ends(tmp_path: Path, weights: Path, reap: list[int]):
    port = free_port()
    sim = subprocess.Popen(sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "1"),
                           start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reap.append(sim.pid)
    report, trace = tmp_path / "w.html", tmp_path / "w.json"
    with firstlight.watch(f"http://127.0.0.1:{port}", pid=sim.pid, timeout=60, history=False, report=report,
                          trace=trace) as server:
        assert server.result.verdict == firstlight.READY
    assert server.written == [report, trace] and sim.poll() is None  # drawn; the watched server left running
    assert "ready" in report.read_text() and json.loads(trace.read_text())["traceEvents"]
