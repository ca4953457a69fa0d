"""firstlight/forecast.py: a start's forecast from the first source that has one (its history, else the weights'
bytes over the measured read rate), its line, and its grade against what the start took."""

from __future__ import annotations

from typing import Any

import pytest

from firstlight.budgets import learn
from firstlight.forecast import BYTES, HISTORY, Forecast, actual_phases, from_bytes, grade, graded_line, make
from firstlight.history.policy import estimate


def anatomy(**phases: float) -> dict[str, Any]:
    return {"phases": [{"name": n, "seconds": s} for n, s in phases.items()]}


STARTS = [("cold", anatomy(weights_loading=60.0, compile=30.0, cuda_graph=10.0)),
          ("cold", anatomy(weights_loading=80.0, compile=30.0, cuda_graph=12.0)),
          ("cold", anatomy(weights_loading=70.0, compile=40.0, cuda_graph=11.0))]


def test_a_start_with_a_history_is_forecast_by_each_phases_median_and_the_whole_starts_eta():
    f = make(learn(STARTS, "cold"), estimate([("cold", 100.0), ("cold", 130.0), ("cold", 110.0)], "cold"), {})
    assert f.source == HISTORY and f.total_s == 110.0
    assert f.phases == {"weights_loading": 70.0, "compile": 30.0, "cuda_graph": 11.0}
    assert list(f.phases) == ["weights_loading", "compile", "cuda_graph"]  # in the phases' order
    assert f.line() == ("about 1m50s (weights_loading 1m10s, compile 30s, cuda_graph 11s) from history: ETA from 3 "
                        "cold starts")


def test_with_no_history_the_weights_phase_is_their_uncached_bytes_over_the_measured_rate():
    facts = {"weights": {"weights_bytes": 10_000_000_000, "uncached_bytes": 8_000_000_000, "read_rate": 1e9,
                         "resident": 0.2}}
    f = make(None, None, facts)
    assert f.source == BYTES and f.total_s is None and f.phases == {"weights_loading": 8.0}
    assert "8.0 GB not in the page cache at 1000 MB/s measured" in f.note
    # the preflight's sample found nothing uncached to read: the filesystem's rate the history keeps
    unmeasured = {"weights": {**facts["weights"], "read_rate": None}}
    assert make(None, None, unmeasured, disk_rate=2e9).phases == {"weights_loading": 4.0}
    assert make(None, None, unmeasured).source is None


@pytest.mark.parametrize("weights, said", [
    (None, "nothing to forecast from yet"),
    ({"weights_bytes": 10, "uncached_bytes": 0}, "are in the page cache"),
    ({"weights_bytes": 10, "uncached_bytes": 10}, "the read rate not measured"),
])
def test_nothing_to_forecast_from_says_why(weights: dict[str, Any] | None, said: str):
    f = make(None, None, {"weights": weights} if weights else {})
    assert f.source is None and f.phases == {} and f.total_s is None and said in f.line()


def test_the_fit_is_said_beside_the_durations():
    devices = [{"device": "GPU 0", "spare_bytes": 6_000_000_000}, {"device": "GPU 1", "spare_bytes": 7_000_000_000}]
    f = Forecast(None, "n", fit={"devices": devices})
    assert f.fit_line() == "fits with 6.0 GB to spare on each of 2 devices"
    short = Forecast(None, "n", fit={"devices": [{"device": "KV space", "spare_bytes": -436_000_000}]})
    assert short.fit_line() == "does not fit: KV space 436.0 MB short" and short.line().endswith(short.fit_line())
    assert Forecast(None, "n").fit_line() is None


def test_the_grade_is_each_phase_and_the_whole_start_against_what_they_took():
    said = make(learn(STARTS, "cold"), estimate([("cold", 100.0)], "cold"), {}).to_dict()
    took = anatomy(weights_loading=84.0, compile=30.0, cuda_graph=5.5, warmup=3.0)
    g = grade(said, took, 125.0)["graded"]
    assert g["total"] == {"forecast_s": 100.0, "actual_s": 125.0, "error_s": 25.0, "error": 0.25}
    assert g["phases"]["weights_loading"] == {"forecast_s": 70.0, "actual_s": 84.0, "error_s": 14.0, "error": 0.2}
    assert g["phases"]["cuda_graph"]["error"] == -0.5
    assert "warmup" not in g["phases"]  # not forecast: nothing to grade
    assert graded_line(grade(said, took, 125.0)).startswith("expected 1m40s, took 2m05s (+25%); weights_loading")
    assert grade(said, None, None)["graded"] == {"total": None, "phases": {}}  # a start that never got there
    assert graded_line(None) is None


def test_a_phase_seen_twice_counts_both_stretches():
    assert actual_phases({"phases": [{"name": "compile", "seconds": 2.0}, {"name": "compile", "seconds": 3.0},
                                     {"name": "x"}, "damaged"]}) == {"compile": 5.0}


def test_from_bytes_needs_the_weights_size():
    assert from_bytes({"uncached_bytes": 10, "read_rate": 1.0}) == ({}, "")


@pytest.mark.parametrize("damaged", [
    {"graded": "x"}, {"graded": {"total": {"forecast_s": "1"}, "phases": []}}, "x", {"graded": {"total": None,
     "phases": {"weights_loading": {"forecast_s": True, "actual_s": 1}, "{x}": {"forecast_s": 1, "actual_s": 2,
                                                                                 "error": float("nan")}}}},
])
def test_a_damaged_graded_forecast_says_what_it_can_and_never_raises(damaged: Any):
    said = graded_line(damaged)
    assert said is None or said == "{x} 1.0s vs 2.0s"


def test_a_start_whose_weights_do_not_come_from_storage_is_not_forecast_from_their_bytes():
    facts = {"weights": {"weights_bytes": 10_000_000_000, "uncached_bytes": 8_000_000_000, "read_rate": 1e9}}
    f = make(None, None, facts, kind="attached")
    assert f.source is None and f.phases == {} and "no earlier attached start" in f.note
    assert make(None, None, facts, kind="cold").source == BYTES
