"""firstlight/forecast.py: a start's forecast from the first source that has one (its history, else the weights'
bytes over the measured read rate), its line, and its grade against what the start took."""

from __future__ import annotations

from typing import Any

import pytest

from firstlight.budgets import learn
from firstlight.forecast import (
    BYTES,
    HISTORY,
    Forecast,
    actual_phases,
    from_bytes,
    from_store,
    grade,
    graded_line,
    make,
)
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


def test_the_grade_rounds_each_figure_to_the_millisecond_and_the_error_to_a_hundredth_of_a_percent():
    said = {"total_s": 1.23456, "phases": {"compile": 2.0004}}
    g = grade(said, anatomy(compile=3.00049, weights_loading=1.0), 2.345678)["graded"]
    assert g["total"] == {"forecast_s": 1.235, "actual_s": 2.346, "error_s": 1.111, "error": 0.9}
    assert g["phases"] == {"compile": {"forecast_s": 2.0, "actual_s": 3.0, "error_s": 1.0, "error": 0.4999}}
    assert grade({"total_s": 0.0, "phases": {}}, None, 1.0)["graded"]["total"]["error"] is None  # no share of 0


def test_the_forecast_as_the_summary_keeps_it():
    f = Forecast(BYTES, "n", 12.34567, {"weights_loading": 1.23456}, {"devices": []}, "ok")
    assert f.to_dict() == {"source": "bytes", "note": "n", "total_s": 12.346, "phases": {"weights_loading": 1.235},
                           "fit": {"devices": []}, "fit_status": "ok"}
    assert Forecast(None, "n").to_dict()["total_s"] is None


@pytest.mark.parametrize(("f", "line"), [
    (Forecast(HISTORY, "from h", 95.0, {"process_start": 1.0, "weights_loading": 60.0, "compile": 20.0,
                                         "cuda_graph": 10.0}),
     "about 1m35s (weights_loading 1m00s, compile 20s, cuda_graph 10s) from h"),  # the three longest, in order
    (Forecast(HISTORY, "from h", 5.0), "about 5.0s from h"),
    (Forecast(BYTES, "from b", None, {"weights_loading": 4.0}), "weights_loading 4.0s from b"),
    (Forecast(None, "nothing"), "nothing"),
    (Forecast(None, "nothing", fit={"devices": [{"device": "RAM", "spare_bytes": 0}]}),
     "nothing; fits with 0 B to spare on RAM"),
])
def test_the_forecast_line(f: Forecast, line: str):
    assert f.line() == line


def test_the_notes_say_where_each_figure_comes_from():
    _, note = from_bytes({"weights_bytes": 10_000_000, "uncached_bytes": 2_500_000, "read_rate": 5e6})
    assert note == ("from bytes: 2.5 MB not in the page cache at 5 MB/s measured; no history yet for the other "
                    "phases")
    assert from_bytes({"weights_bytes": 10_000_000, "uncached_bytes": 0}) == (
        {}, "from bytes: the weights' 10.0 MB are in the page cache; no history yet for the other phases")
    assert from_bytes({"weights_bytes": 10, "uncached_bytes": 10, "read_rate": 0}) == (
        {}, "from bytes: 10 B to read, the read rate not measured; no history yet")
    assert from_bytes({"weights_bytes": 0, "uncached_bytes": 10, "read_rate": 1.0}) == ({}, "")
    assert make(None, None, {}).note == "nothing to forecast from yet: no earlier start and no measured weights"
    assert make(None, None, {}, kind="woken").note == ("nothing to forecast from yet: no earlier woken start, and an "
                                                       "woken start reads no weights")


def test_a_history_with_phases_but_no_eta_still_forecasts_them():
    f = make(learn(STARTS, "cold"), None, {})
    assert f.source == HISTORY and f.total_s is None and f.note == "from history: 3 earlier starts' phases"
    assert make(learn([], "cold"), None, {}).source is None


def test_the_fit_line_names_the_least_spare_device_and_every_short_one():
    devices = [{"device": "GPU 0", "spare_bytes": -1_000_000}, {"device": "GPU 1", "spare_bytes": 5},
               {"device": "GPU 2", "spare_bytes": -2_000_000}]
    said = Forecast(None, "n", fit={"devices": devices}).fit_line()
    assert said == "does not fit: GPU 0 1.0 MB short, GPU 2 2.0 MB short"
    one = [{"device": "GPU 3", "spare_bytes": 7_000_000}]
    assert Forecast(None, "n", fit={"devices": one}).fit_line() == "fits with 7.0 MB to spare on GPU 3"


def test_from_store_reads_the_deployments_history_of_the_predicted_type_and_survives_an_unreadable_one(tmp_path):
    from firstlight.history import DeploymentKey, History

    key = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m"], 1)
    with History(tmp_path / "h.sqlite3") as h:
        for seconds in (100.0, 120.0, 110.0):
            h.record_run("up", {"verdict": "ready", "started_at": 1000.0, "ready_at": 1000.0 + seconds,
                                "cold_start_s": seconds,
                                "start_type": {"type": "cold", "labels": ["cold"], "evidence": {}},
                                "anatomy": anatomy(weights_loading=seconds / 2)}, key)
        cold = {"weights": {"weights_bytes": 10, "uncached_bytes": 10, "read_rate": 1.0, "resident": 0.0}}
        f = from_store(h, key, cold, "ok", None)
        assert f.source == HISTORY and f.total_s == 110.0 and f.phases == {"weights_loading": 55.0}, f
        assert f.note == "from history: ETA from 3 cold starts" and f.fit_status == "ok"
        warm = {"weights": {**cold["weights"], "resident": 1.0}}
        assert "no warm_page_cache starts yet" in from_store(h, key, warm, None, None).note
        assert from_store(h, key, cold, None, None, kind="attached").note.endswith("ETA from 3 cold starts")
        assert from_store(h, key, cold, None, str(tmp_path / "gone")).source == HISTORY  # no filesystem: no rate
    assert from_store(None, key, cold, None, None).source == BYTES  # no history: the bytes
