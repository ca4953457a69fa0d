"""The start report: simulated failures recorded through the live path (``firstlight up --record``), drawn by
``firstlight report`` and opened in headless Chromium; and the report's pieces from hand-made timelines."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from firstlight.config import JudgeConfig
from firstlight.report.html import esc, render_html
from firstlight.report.record import downsample, pack_timeline, parse_lines, read_record, unpack_timeline
from firstlight.report.series import build_view
from firstlight.sim.server import free_port
from firstlight.timeline import Level, LogLine, Probe, ProcessSample, ProcInfo, Started
from tests.support.chromium import dump_dom, parse_dom, png_colours, screenshot
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import run_firstlight, sim_cmd

HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(2)> &amp; </pre><b>bold</b>"
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


# -- pieces, from hand-made timelines -----------------------------------------------------------------------

T0 = 1_800_000_000.0


def proc(t: float, read: int, cpu: float, n: int = 1) -> ProcessSample:
    procs = tuple(ProcInfo(100 + i, "srv", "running", cpu, 1 << 30, T0) for i in range(n))
    return ProcessSample(T0 + t, True, None, cpu, 1 << 30, read, 4, procs, "running")


def test_a_record_is_replayed_in_the_order_it_was_fed_not_by_timestamp():
    """A sample is stamped when it began: the session read the fatal lines, then the sample that found the process
    gone, stamped 30 ms before them. Replayed in that order the record says what the run said (oom); sorted by time
    it said 'exited without a recognised error' (other): CI saw it once in five runs."""
    started = Started(T0, 100, "http://x", "sglang", True)
    lines = [LogLine(T0 + 1.02, "Scheduler hit an exception: Traceback (most recent call last):", "stderr", 9),
             LogLine(T0 + 1.03, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB.",
                     "stderr", 10)]
    gone = ProcessSample(T0 + 1.0, False, 1)
    text = [json.dumps(o.to_dict()) for o in (started, proc(0.5, 0, 0.1), *lines, gone)]
    observations = parse_lines(text).observations
    assert observations[-1] == gone  # the fed order, kept
    view = build_view(observations)
    assert (view.verdict, view.failure) == ("failed", "oom")


def ready_timeline() -> list:
    return [Started(T0, 100, "http://x", "sglang", True), proc(0.5, 0, 0.1),
            LogLine(T0 + 1, "Load weight begin. avail mem=78.50 GB", "stdout", 1), proc(1.5, 50 << 20, 1.0, 3),
            LogLine(T0 + 2, "Load weight end. type=X", "stdout", 2), proc(2.5, 100 << 20, 2.0, 3),
            LogLine(T0 + 3, HOSTILE, "stdout", 3),
            Probe(T0 + 3.5, Level.HEALTH, True, "GET /health -> 200"),
            Probe(T0 + 4, Level.GENERATION, True, "ok", 200, 0.05, " Paris")]


def test_phase_bars_markers_and_escaping_from_a_timeline():
    view = build_view(ready_timeline(), source="test")
    assert view.verdict == "ready"
    names = [p.name for p in view.phases]
    assert names[0] == "process_start" and names[-1] == "ready" and "weights_loading" in names
    page = render_html(view)
    assert page.count('class="phase-bar"') == len(names)
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert esc(HOSTILE) in page
    assert "first generation" in page and "health" in page
    # Self-contained: nothing to fetch (the SVG namespace is a name, not a request).
    markup = page.replace(esc(HOSTILE), "").lower()  # the log line's text says "src=", as text
    for needle in (" src=", " href=", "@import", "<link", "<script"):
        assert needle not in markup
    assert set(re.findall(r"url\(([^)]*)\)", page)) == {"#hatch"}
    assert "http" not in [m.label for m in view.markers if m.kind == "warning"]


def test_baseline_ghost_bars_carry_the_difference_per_phase():
    obs = ready_timeline()
    base = {"started_at": 0.0, "ready_at": 2.0, "cold_start_s": 2.0,
            "phases": [{"name": "process_start", "start": 0.0, "end": 0.5},
                       {"name": "weights_loading", "start": 0.5, "end": 1.0},
                       {"name": "cuda_graph", "start": 1.0, "end": 2.0}]}
    view = build_view(obs, baseline=base, baseline_run=7)
    diffs = view.phase_diffs()
    assert diffs["weights_loading"] == pytest.approx(0.5)  # 1.0 s here, 0.5 s in the baseline
    page = render_html(view)
    assert page.count('class="ghost-bar"') == 3
    assert "cuda_graph (baseline only)" in page and "run 7" in page
    assert "+500 ms" in page


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


def test_truncated_last_line_is_skipped_and_said(tmp_path: Path):
    lines = [json.dumps(o.to_dict()) for o in ready_timeline()]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines) + "\n" + lines[-1][:20])
    rec = read_record(path)
    assert len(rec.observations) == len(lines) and rec.skipped == 1


def test_history_timeline_is_capped_and_keeps_what_the_judge_needs():
    obs = [Started(T0, 100, "http://x", "sglang", True)]
    obs += [proc(i * 0.1, i << 20, i * 0.01, 2) for i in range(1, 5000)]
    obs += [LogLine(T0 + i * 0.1 + 0.01, f"line {i} " + "x" * 150, "stdout", i) for i in range(1, 3000)]
    obs += [Probe(T0 + i * 0.1 + 0.02, Level.HEALTH, False, "503") for i in range(1, 2000)]
    obs.append(Probe(T0 + 600, Level.GENERATION, True, "ok", 200, 0.1, " Paris"))
    obs.sort(key=lambda o: o.t)
    small = downsample(obs, 200_000)
    assert sum(len(json.dumps(o.to_dict())) + 1 for o in small) <= 220_000
    assert isinstance(small[0], Started) and small[-1] == obs[-1]
    assert sum(isinstance(o, Probe) for o in small) == 2  # the first "not yet" and the generation
    back = unpack_timeline(pack_timeline(obs, 200_000))
    assert back == small
    assert build_view(back).verdict == "ready"


def test_parse_lines_keeps_observation_order():
    obs = ready_timeline()
    rec = parse_lines(json.dumps(o.to_dict()) for o in obs)
    assert rec.observations == obs and rec.skipped == 0
    assert build_view(rec.observations, rules=JudgeConfig()).phases[-1].name == "ready"


def test_report_cli_needs_one_source(tmp_path: Path):
    r = run_firstlight("report", "--run", "1", "--last", "-o", str(tmp_path / "x.html"))
    assert r.rc == 64 and "one run" in r.stderr
    assert sys.executable  # the CLI ran under this interpreter


def test_bench_warmup_and_speculative_decoding_results_are_shown_when_the_run_has_them():
    obs = ready_timeline()
    stats = {"n": 16, "mean": 325.0, "median": 282.8, "p90": 526.8, "p99": 532.1}
    summary = {"verdict": "ready", "phase": "ready", "started_at": obs[0].t, "ready_at": obs[-1].t,
               "warmup": {"n": 5, "errors": 0, "first_s": 0.1, "steady_s": 0.08, "steady_index": 1},
               "bench": {"concurrency": 2, "completed": 16, "errors": 0, "timeouts": 0, "sent": 16,
                         "duration_s": 10.87, "output_throughput": 94.2, "request_throughput": 1.47,
                         "ttft_ms": stats, "tpot_ms": stats, "itl_ms": stats, "e2el_ms": stats},
               "spec_decoding": {"status": "zero_acceptance", "mean_acceptance_length": 1.0,
                                 "message": "configured but accepted NO draft token"}}
    page = render_html(build_view(obs, summary))
    assert 'id="bench"' in page and "94.2 output tok/s" in page and "282.8" in page
    assert 'id="warmup"' in page and "steady from request 2" in page
    assert 'id="spec-decoding"' in page and "zero_acceptance" in page and "accepted NO draft token" in page
    assert 'id="bench"' not in render_html(build_view(obs))


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
