"""The report of a real start: llama.cpp's llama-server with a real model, watched by ``firstlight up`` (the
live path, with --record, --report and --trace), then drawn again from the record by ``firstlight report``
and opened in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.report.record import read_record
from firstlight.report.series import build_view
from firstlight.sim.fixtures import free_port
from tests.support.chromium import dump_dom, parse_dom, png_colours, screenshot
from tests.support.common import run_firstlight
from tests.support.llama_server import FAST, SLOW_LOAD, llama, server_cmd  # noqa: F401 (llama is a fixture)

pytestmark = pytest.mark.llama


def test_report_of_a_real_llama_server_start_says_what_the_live_run_said(llama: dict[str, str], tmp_path: Path):  # noqa: F811
    record, live_html, trace = tmp_path / "run.jsonl", tmp_path / "live.html", tmp_path / "live.trace.json"
    r = run_firstlight("up", "--json", "--stop-when-ready", "--quiet-server", "--record", str(record), "--report",
                       str(live_html), "--trace", str(trace), *FAST, "--",
                       *server_cmd(llama, free_port(), *SLOW_LOAD))
    assert r.rc == 0, r.stderr[-3000:]
    summary = r.summary
    names = [p["name"] for p in summary["phases"]]
    assert summary["verdict"] == "ready" and "weights_loading" in names

    # The record replayed through the judge, without the summary, gives the live run's phases and verdict.
    view = build_view(read_record(record).observations)
    assert view.verdict == "ready" and [p.name for p in view.phases] == names

    (tmp_path / "run.json").write_text(r.stdout)
    again = tmp_path / "again.html"
    d = run_firstlight("report", str(record), "--summary", str(tmp_path / "run.json"), "-o", str(again))
    assert d.rc == 0, d.stderr
    for page in (live_html, again):
        dom = parse_dom(dump_dom(page))
        assert [e.attrs["data-phase"] for e in dom.elements if "phase-bar" in e.classes] == names
        assert next(e for e in dom.elements if e.attrs.get("id") == "verdict").text.strip() == "READY"
        levels = [e.attrs["data-label"] for e in dom.elements if e.attrs.get("data-kind") == "level"]
        assert levels == [lv for lv in summary["levels"]]
        assert not [e for e in dom.elements if e.tag in ("script", "img")]
    assert png_colours(screenshot(live_html, tmp_path / "live.png", 900, 1000)) > 20

    events = json.loads(trace.read_text())["traceEvents"]
    assert [e["name"] for e in events if e["ph"] == "X" and e["cat"] == "phase"] == names
