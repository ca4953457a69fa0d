"""The start report: simulated failures recorded through the live path (``firstlight up --record``), drawn by
``firstlight report`` and opened in headless Chromium; and the report's pieces from hand-made timelines.

The in-process tests of this subject; the others: ``tests/e2e/report/test_html.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from firstlight.config import JudgeConfig
from firstlight.report.html import esc, render_html
from firstlight.report.record import downsample, pack_timeline, parse_lines, read_record, unpack_timeline
from firstlight.report.series import build_view
from firstlight.timeline import Level, LogLine, Probe, ProcessSample, Started
from tests.support.report import HOSTILE, T0, proc, ready_timeline


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


def test_the_engines_own_clock_is_a_table_beside_the_anatomy():
    """A record's engine figures (a stream's marks, as the live source fed them) drawn as rows, a disagreement marked
    and its note (escaped) shown."""
    from firstlight.timeline import EngineClock

    obs = [*ready_timeline(),
           EngineClock(T0 + 0.5, "models_sse", "load", ("*",), mark="begin"),
           EngineClock(T0 + 0.6, "models_sse", "never_phase", ("weights_loading",), mark="begin"),
           EngineClock(T0 + 0.9, "models_sse", "never_phase", ("weights_loading",), mark="end", text="<b>x</b>"),
           EngineClock(T0 + 1.0, "models_sse", "load", ("*",), mark="end")]
    view = build_view(obs, source="test")
    assert view.engine_clock is not None and [r["stage"] for r in view.engine_clock["phases"]] == [
        "never_phase", "load"]
    page = render_html(view)
    assert '<table id="engine-clock">' in page and "The engine's own clock (models_sse)" in page
    assert page.count("<tr", page.index('id="engine-clock"')) >= 3 and "<b>x</b>" not in page
    assert render_html(build_view(ready_timeline(), source="test")).count('id="engine-clock"') == 0
