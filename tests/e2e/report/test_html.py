"""The start report: simulated failures recorded through the live path (``firstlight up --record``), drawn by
``firstlight report`` and opened in headless Chromium; and the report's pieces from hand-made timelines.

The process-starting tests of this subject; the others: ``tests/unit/report/test_html.py``.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.chromium import dump_dom, parse_dom, png_colours, screenshot
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import run_firstlight, sim_cmd
from tests.support.report import HOSTILE

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2", "--quiet-server", "--no-history"]


def record_sim(tmp_path: Path, scenario: str, weights: Path, *opts: str) -> tuple[Path, dict]:
    """A simulated start through ``firstlight up --record --json``; the server first prints a hostile line."""
    port = free_port()
    server = [*sim_cmd(scenario, port), "--model-path", str(weights), "--load-seconds", "1"]
    shell = f"printf '%s\\n' {shlex.quote(HOSTILE)}; exec {shlex.join(server)}"
    record = tmp_path / f"{scenario}.jsonl"
    r = run_firstlight("up", "--json", "--record", str(record), "--engine", "sglang", *FAST, *opts,
                       "--", "sh", "-c", shell)
    (tmp_path / f"{scenario}.json").write_text(r.stdout)
    return record, r.summary


def draw(tmp_path: Path, record: Path, *opts: str) -> tuple[Path, Path]:
    html, trace = tmp_path / "start.html", tmp_path / "start.trace.json"
    r = run_firstlight("report", str(record), "-o", str(html), "--trace", str(trace), *opts)
    assert r.rc == 0, r.stderr
    return html, trace


def check_in_browser(tmp_path: Path, html: Path, phases: list[str], verdict: str) -> None:
    dom = parse_dom(dump_dom(html))
    bars = [e.attrs["data-phase"] for e in dom.elements if "phase-bar" in e.classes]
    assert bars == phases
    title = next(e for e in dom.elements if e.attrs.get("id") == "verdict")
    assert title.text.strip() == verdict.upper()
    # The log line is text: no element came from it, and its characters are on the page as written.
    assert not [e for e in dom.elements if e.tag in ("script", "img", "b")]
    tail = next(e for e in dom.elements if e.attrs.get("id") == "log-tail")
    assert HOSTILE in tail.text
    png = screenshot(html, tmp_path / "start.png", 900, 1000)
    assert png_colours(png) > 20, "the screenshot is blank"


def test_hang_after_load_report_in_chromium_shows_phases_verdict_window_and_escaped_log(tmp_path: Path,
                                                                                        weights: Path):
    record, summary = record_sim(tmp_path, "hang_after_load", weights, "--stall-timeout", "2")
    assert summary["verdict"] == "hung"
    html, trace = draw(tmp_path, record, "--stall-timeout", "2", "--summary", str(tmp_path / "hang_after_load.json"))
    names = [p["name"] for p in summary["phases"]]
    check_in_browser(tmp_path, html, names, "hung")
    text = html.read_text()
    assert 'class="window-group"' in text and 'data-chart="rss"' in text
    events = json.loads(trace.read_text())["traceEvents"]
    assert [e["name"] for e in events if e["ph"] == "X" and e["cat"] == "phase"] == names


def test_crash_oom_report_replayed_without_summary_says_failed_oom(tmp_path: Path, weights: Path):
    record, summary = record_sim(tmp_path, "crash_oom", weights)
    assert summary["verdict"] == "failed" and summary["failure"] == "oom"
    html, _ = draw(tmp_path, record)  # the record alone: the judge's replay gives the verdict
    check_in_browser(tmp_path, html, [p["name"] for p in summary["phases"]], "failed")
    dom = parse_dom(html.read_text())
    failure = next(e for e in dom.elements if e.attrs.get("data-failure"))
    assert failure.attrs["data-failure"] == "oom"
    assert any(e.attrs.get("id") == "hint" for e in dom.elements)


def test_report_of_a_bad_record_is_one_line_and_exit_1(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{\"kind\": \"nope\"}\n")
    r = run_firstlight("report", str(bad), "-o", str(tmp_path / "x.html"))
    assert r.rc == 1 and r.stderr.count("\n") == 1 and "no recorded observations" in r.stderr
    assert not (tmp_path / "x.html").exists()
    r = run_firstlight("report", str(bad))
    assert r.rc == 64 and "nothing to write" in r.stderr
    r = run_firstlight("report", "-o", str(tmp_path / "x.html"))
    assert r.rc == 64
    r = run_firstlight("report", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x.html"))
    assert r.rc == 64 and "not a readable record file" in r.stderr
    r = run_firstlight("report", str(bad), "-o", str(tmp_path / "no" / "dir" / "x.html"))
    assert r.rc == 64 and "cannot write" in r.stderr


def test_report_cli_needs_one_source(tmp_path: Path):
    r = run_firstlight("report", "--run", "1", "--last", "-o", str(tmp_path / "x.html"))
    assert r.rc == 64 and "one run" in r.stderr
    assert sys.executable  # the CLI ran under this interpreter


def test_gpu_memory_and_utilisation_per_device_from_the_live_gpu_sampler(tmp_path: Path, weights: Path):
    """The GPU sampler reads NVML; this machine has none, so it reads the recorded snapshot of an 8-GPU node
    (tests/fixtures) through FIRSTLIGHT_NVML_SNAPSHOT, on the live path."""
    data = json.loads((_FIXTURES / "nvml_8gpu_stale_process.json").read_text())
    for d in data["devices"]:
        d["processes"] = []
    snap = tmp_path / "nvml.json"
    snap.write_text(json.dumps(data))
    html, trace = tmp_path / "gpu.html", tmp_path / "gpu.json"
    r = run_firstlight("up", "--json", "--stop-when-ready", "--engine", "sglang", *FAST, "--report", str(html),
                       "--trace", str(trace), "--", *sim_cmd("normal", free_port()), "--model-path", str(weights),
                       "--load-seconds", "1", env={"FIRSTLIGHT_NVML_SNAPSHOT": str(snap)})
    assert r.rc == 0, r.stderr[-2000:]
    page = html.read_text()
    gpu = page[page.index('data-chart="gpu_mem"'):]
    gpu = gpu[: gpu.index("</div>")]
    assert [f"GPU {i}" for i in range(8)] == re.findall(r'data-series="(GPU \d)"', gpu)
    assert 'data-chart="gpu_util"' in page
    counters = {e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "C"}
    assert "GPU memory (GB)" in counters and "GPU utilisation (%)" in counters
