"""The engine's own clock beside firstlight's (firstlight.anatomy.compare_clocks): the 10 % / 2 s rule, the rows,
the notes with both numbers, a stream's marks paired into figures."""

from __future__ import annotations

import pytest

from firstlight.anatomy import CLOCK_DIFF_S, CLOCK_DIFF_SHARE, clock_differs, compare_clocks
from firstlight.report.anatomy_text import clock_lines
from firstlight.timeline import EngineClock, from_dict

T0 = 1_800_000_000.0


def _anat(*phases: tuple[str, float, float]) -> dict:
    """(name, start offset, seconds) -> an anatomy's phases."""
    return {"phases": [{"name": n, "start": T0 + s, "seconds": d} for n, s, d in phases]}


def test_the_thresholds_are_two_seconds_and_ten_percent():
    assert (CLOCK_DIFF_S, CLOCK_DIFF_SHARE) == (2.0, 0.10)


@pytest.mark.parametrize(("engine", "firstlight", "expected"), [
    (1.0, 2.9, False),  # 1.9 s apart: under 2 s
    (1.0, 3.1, True),  # 2.1 s apart: over 2 s and over 10 % of 3.1
    (41.2, 45.0, False),  # 3.8 s apart: over 2 s but under 10 % of 45 (4.5)
    (41.2, 46.0, True),  # 4.8 s: over 4.6
    (41.2, 58.0, True),
    (54.9, 50.0, False),  # 4.9 s over: under 10 % of firstlight's 50 s
    (55.1, 50.0, True),  # the engine counting more: the same bound, 10 % of firstlight's
])
def test_differs_by_more_than_two_seconds_and_ten_percent(engine: float, firstlight: float, expected: bool):
    assert clock_differs(engine, firstlight) is expected


def test_the_engine_counts_less_because_its_clock_starts_late():
    # weights: firstlight's phase ran 58.0 s from T0+10; the engine's figure ends at the phase's end, 41.2 s
    anat = _anat(("process_start", 0, 10.0), ("weights_loading", 10, 58.0), ("kv_cache", 68, 4.0))
    c = EngineClock(T0 + 68, "log", "model_loading", ("weights_loading",), 41.2, text="Model loading took ...")
    sec = compare_clocks(anat, [c])
    assert sec is not None and sec["source"] == "log"
    row = sec["phases"][0]
    assert (row["engine_s"], row["firstlight_s"], row["differs"]) == (41.2, 58.0, True)
    assert row["note"] == ("the engine counts 41.2s, firstlight saw 58.0s of weights_loading: the engine's clock "
                           "starts 16.8s after firstlight's weights_loading began")
    assert sec["findings"] == [f"model_loading: {row['note']}"]


def test_the_engine_counts_more_because_its_clock_starts_before_the_phase():
    anat = _anat(("process_start", 0, 5.0), ("compile", 5, 7.0))
    c = EngineClock(T0 + 12, "log", "torch_compile", ("compile",), 10.2)
    row = compare_clocks(anat, [c])["phases"][0]  # type: ignore[index]
    assert row["differs"] and "starts 3.2s before firstlight's compile began" in row["note"]


def test_agreeing_figures_carry_no_note():
    anat = _anat(("weights_loading", 0, 4.0))
    row = compare_clocks(anat, [EngineClock(T0 + 4, "log", "loading_weights", ("weights_loading",), 3.6)]
                         )["phases"][0]  # type: ignore[index]
    assert (row["differs"], row["note"], row["firstlight_s"]) == (False, None, 4.0)


def test_a_figure_over_several_phases_is_compared_with_their_sum():
    anat = _anat(("weights_loaded", 0, 3.0), ("compile", 3, 372.0), ("kv_cache", 375, 5.0))
    c = EngineClock(T0 + 380, "log", "init_engine", ("weights_loaded", "compile", "kv_cache", "cuda_graph"), 373.15)
    row = compare_clocks(anat, [c])["phases"][0]  # type: ignore[index]
    assert row["phase"] == "weights_loaded+compile+kv_cache+cuda_graph"
    assert (row["firstlight_s"], row["differs"]) == (380.0, False)


def test_the_whole_start_is_counted_from_firstlights_first_phase():
    anat = _anat(("process_start", 0, 20.0), ("http_listening", 20, 1.0))
    c = EngineClock(T0 + 21, "log", "startup", ("*",), 215.84)
    row = compare_clocks(anat, [c])["phases"][0]  # type: ignore[index]
    assert (row["phase"], row["firstlight_s"], row["differs"]) == ("start", 21.0, True)


def test_a_phase_firstlight_did_not_see_is_named_with_the_phase_it_was_in():
    anat = _anat(("process_start", 0, 0.3), ("warmup", 0.3, 2.5))
    c = EngineClock(T0 + 1.2, "models_sse", "text_model", ("weights_loading",), 0.4)
    row = compare_clocks(anat, [c])["phases"][0]  # type: ignore[index]
    assert row["firstlight_s"] is None and not row["differs"]
    assert row["note"] == "firstlight saw no weights_loading phase: it was in warmup then"


def test_a_streams_marks_are_paired_into_one_figure_per_stage():
    anat = _anat(("process_start", 0, 0.5), ("weights_loading", 0.5, 10.0))
    marks = [EngineClock(T0 + 0.4, "models_sse", "load", ("*",), mark="begin"),
             EngineClock(T0 + 1.0, "models_sse", "text_model", ("weights_loading",), mark="begin"),
             EngineClock(T0 + 9.0, "models_sse", "text_model", ("weights_loading",), mark="end"),
             EngineClock(T0 + 10.5, "models_sse", "load", ("*",), mark="end"),
             EngineClock(T0 + 11.0, "models_sse", "never_ended", (), mark="begin")]
    rows = compare_clocks(anat, marks)["phases"]  # type: ignore[index]
    assert [(r["stage"], r["engine_s"], r["firstlight_s"]) for r in rows] == [
        ("text_model", 8.0, 10.0), ("load", 10.1, 10.5)]
    assert not rows[0]["differs"]  # 2.0 s apart: not more than 2 s


def test_a_figure_without_phases_is_shown_not_compared():
    row = compare_clocks(_anat(("weights_loading", 0, 5.0)),
                         [EngineClock(T0 + 5, "startup_metrics", "weight_population", (), 3.0)])["phases"][0]  # type: ignore[index]
    assert (row["firstlight_s"], row["differs"], row["note"], row["phase"]) == (None, False, None, None)


def test_nothing_published_is_no_section():
    assert compare_clocks(_anat(("weights_loading", 0, 5.0)), []) is None
    assert compare_clocks(None, [EngineClock(T0, "models_sse", "load", ("*",), mark="begin")]) is None


def test_the_table_shows_both_numbers_and_the_note():
    anat = _anat(("weights_loading", 10, 58.0))
    sec = compare_clocks(anat, [EngineClock(T0 + 68, "log", "model_loading", ("weights_loading",), 41.2)])
    lines = clock_lines(sec)
    assert lines[0].startswith("engine clock (log)")
    assert "41.2s" in lines[1] and "58.0s" in lines[1] and "DIFFERS" in lines[1]
    assert lines[2].strip().startswith("the engine counts 41.2s, firstlight saw 58.0s")
    assert clock_lines(None) == []


def test_an_engine_clock_observation_round_trips_through_a_record():
    c = EngineClock(T0, "models_sse", "text_model", ("weights_loading",), None, mark="end", text="{}")
    assert from_dict(c.to_dict()) == c
