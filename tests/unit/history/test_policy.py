"""The ETA and regression policy by start type (``firstlight.history.policy``) and through ``History``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from firstlight.bench.metrics import RequestResult, summarize
from firstlight.engines.profile import COMPILE_FACTORS
from firstlight.history import DeploymentKey, History
from firstlight.history.policy import (
    DIRECTION,
    ETA_WINDOW,
    FORECAST_GOOD,
    SLOW_NODE_MARGIN,
    SLOW_NODE_STARTS,
    VERSION_MARGIN,
    Regression,
    StartEstimate,
    base_type,
    compile_key_change,
    estimate,
    extract_metrics,
    forecast_accuracy,
    is_good,
    slow_nodes,
    start_groups,
    start_type_of,
    version_of,
    version_regressions,
)
from firstlight.redact import Redactor
from firstlight.vocab import READY, VERDICTS


def test_the_numbers_are_pinned():
    assert (ETA_WINDOW, VERSION_MARGIN, SLOW_NODE_MARGIN, SLOW_NODE_STARTS) == (10, 0.2, 0.2, 3)


def test_the_eta_of_a_warm_start_comes_from_warm_starts_only():
    starts = [("cold", 60.0), ("warm_page_cache+compile_cache_hit", 10.0), ("cold", 62.0),
              ("warm_page_cache", 12.0)]
    e = estimate(starts, "warm_page_cache")
    assert e is not None and e.seconds == 11.0 and e.from_types == {"warm_page_cache": 2}
    assert e.note == "ETA from 2 warm_page_cache starts"


def test_without_starts_of_its_type_the_eta_falls_back_to_all_with_a_note():
    e = estimate([("cold", 60.0), ("cold", 64.0), ("cold", 62.0)], "warm_page_cache")
    assert e is not None and e.seconds == 62.0
    assert e.note == "no warm_page_cache starts yet: ETA from 3 cold starts"
    assert estimate([], "cold") is None
    untyped = estimate([(None, 5.0)], None)
    assert untyped is not None and untyped.note == "ETA from 1 untyped start"


def test_the_eta_window_is_the_last_10_starts_of_the_type():
    starts = [("cold", 10.0)] * 10 + [("cold", 1000.0)] * 5  # newest first: the old slow ones are out
    e = estimate(starts, "cold")
    assert e is not None and e.seconds == 10.0 and e.runs == 10


def _history(tmp_path: Path) -> tuple[History, DeploymentKey]:
    h = History(tmp_path / "h.db", redactor=Redactor())
    return h, DeploymentKey.create("vllm", "/m", ["vllm", "serve", "/m", "--port", "8000"], 1)


def _start(h: History, key: DeploymentKey, kind: str, seconds: float, version: str) -> int:
    return h.record_run("up", {"verdict": "ready", "cold_start_s": seconds, "engine_version": version,
                               "start_type": {"type": kind, "labels": [kind], "evidence": {}}}, key)


def test_a_cold_start_is_never_a_regression_against_warm_ones(tmp_path: Path):
    h, key = _history(tmp_path)
    for _ in range(3):
        _start(h, key, "warm_page_cache", 10.0, "0.10.1")
    _start(h, key, "cold", 60.0, "0.10.1")
    assert h.check_regression(key, cold_start_s=61.0, start_type="cold", version="0.10.1") == []
    # untyped (the old rule): the median of all good starts, and 61 s against 10 s is one
    assert h.check_regression(key, cold_start_s=61.0)


def test_a_slower_start_of_the_same_type_after_an_upgrade_names_both_versions(tmp_path: Path):
    h, key = _history(tmp_path)
    for s in (10.0, 11.0, 12.0):
        _start(h, key, "warm_page_cache", s, "0.10.1")
    regs = h.check_regression(key, cold_start_s=15.0, start_type="warm_page_cache+compile_cache_miss",
                              version="0.11.0")
    assert len(regs) == 1 and regs[0].baseline == 11.0 and regs[0].version_changed
    assert regs[0].message == ("cold_start_s 15 vs baseline 11 (median of 3 warm_page_cache runs): 1.36x, 36% slower "
                               "(margin 20%); after an engine upgrade: 0.10.1 -> 0.11.0")
    assert h.check_regression(key, cold_start_s=13.0, start_type="warm_page_cache", version="0.11.0") == []


def test_history_groups_starts_by_type_and_version_and_flags_a_slower_version(tmp_path: Path):
    starts = [("d", "cold", "0.10.1", 60.0), ("d", "warm_page_cache", "0.10.1", 10.0),
              ("d", "warm_page_cache", "0.10.1", 12.0), ("d", "cold", "0.11.0", 61.0),
              ("d", "warm_page_cache+compile_cache_miss", "0.11.0", 20.0)]
    groups = start_groups(starts)
    assert [(g["start_type"], g["version"], g["starts"], g["median_s"]) for g in groups] == [
        ("cold", "0.10.1", 1, 60.0), ("warm_page_cache", "0.10.1", 2, 11.0), ("cold", "0.11.0", 1, 61.0),
        ("warm_page_cache", "0.11.0", 1, 20.0)]
    regs = version_regressions(groups)
    assert [(r["start_type"], r["from_version"], r["to_version"]) for r in regs] == [
        ("warm_page_cache", "0.10.1", "0.11.0")]
    assert regs[0]["message"] == ("warm_page_cache starts 1.82x slower after 0.10.1 -> 0.11.0: median 20.0s (1) vs "
                                  "11.0s (2)")


# -- which runs may be a baseline (is_good) ------------------------------------------------------------------------
def _bench(*failures: RequestResult) -> dict[str, object]:
    """A benchmark's result as the bench records it: three completed requests and the failed ones given."""
    done = [RequestResult(i, ok=True, ttft_s=0.05, itl_s=[0.03] * 15, latency_s=0.5, output_tokens=16)
            for i in range(3)]
    return summarize([*done, *failures], 2.0, url="http://127.0.0.1:1", api="completions", model="m",
                     concurrency=1, prompt_tokens_estimate=8).to_dict()


# every way a request fails, as the bench counts it: an error, a timeout (counted apart from the errors)
FAILURES = {"errors": RequestResult(3, error="HTTP 500: boom"),
            "timeouts": RequestResult(3, error="timed out after 30 s", timed_out=True)}


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_a_benchmark_with_a_failed_request_of_any_kind_is_never_a_baseline(tmp_path: Path, kind: str):
    bench = _bench(FAILURES[kind])
    assert bench[kind] == 1 and bench["completed"] == 3  # that kind alone: timeouts are not errors
    assert {k: bench[k] for k in FAILURES if k != kind} == {k: 0 for k in FAILURES if k != kind}
    assert is_good("bench", {}, bench) is False and is_good("up", {"verdict": "ready"}, bench) is False
    h, key = _history(tmp_path)
    run = h.get(h.record_run("bench", {}, key, bench))
    assert run is not None and run.ok is False
    assert h.baseline(key, "output_throughput") is None  # the only run is not good: no baseline


def test_every_failure_kind_the_bench_counts_is_a_case():
    # what a request sent can end as, beside completed: a failure kind added to the bench's count gets a case above
    bench = _bench(*FAILURES.values())
    assert bench["sent"] == bench["completed"] + sum(bench[k] for k in FAILURES) == 3 + len(FAILURES)


def test_a_benchmark_whose_every_request_completed_is_a_baseline(tmp_path: Path):
    bench = _bench()
    assert is_good("bench", {}, bench) is True
    h, key = _history(tmp_path)
    h.record_run("bench", {}, key, bench)
    assert h.baseline(key, "output_throughput") == bench["output_throughput"]
    assert is_good("bench", {}, {**bench, "completed": 0}) is False  # nothing completed: nothing measured


@pytest.mark.parametrize("verdict", VERDICTS)
@pytest.mark.parametrize("kind", ["up", "watch"])
def test_only_a_start_judged_ready_is_a_baseline(kind: str, verdict: str):
    # a regression serves, but a baseline made of slower runs would hide the next one
    assert is_good(kind, {"verdict": verdict}, None) is (verdict == READY)


# -- the numbers a run is compared on (extract_metrics), every metric of DIRECTION -------------------------------------
def _figure(bench: dict[str, object], metric: str) -> object:
    """Where the bench's own result holds ``metric``: top level, or the median of its ``<name>_ms`` stats."""
    if metric.endswith("_median_ms"):
        stats = bench[metric.removesuffix("_median_ms") + "_ms"]
        assert isinstance(stats, dict)
        return stats["median"]
    return bench[metric]


@pytest.mark.parametrize("metric", sorted(DIRECTION))
def test_every_metric_a_baseline_compares_is_taken_from_a_real_benchmark_and_summary(metric: str):
    bench = _bench()
    got = extract_metrics({"verdict": "ready", "cold_start_s": 42.5}, bench)
    assert set(got) == set(DIRECTION)  # each metric the regression rule compares, none else
    assert got[metric] == (42.5 if metric == "cold_start_s" else _figure(bench, metric))
    assert isinstance(got[metric], float | int) and got[metric] > 0


@pytest.mark.parametrize("metric", sorted(m for m in DIRECTION if m != "cold_start_s"))
def test_a_benchmark_figure_that_is_not_a_number_is_no_metric(metric: str):
    bench = _bench()
    if metric.endswith("_median_ms"):
        bench[metric.removesuffix("_median_ms") + "_ms"] = {"median": "12.5"}
    else:
        bench[metric] = "12.5"
    got = extract_metrics({"verdict": "ready"}, bench)
    assert metric not in got and set(got) == set(DIRECTION) - {metric, "cold_start_s"}


@pytest.mark.parametrize(("summary", "cold"), [
    ({"verdict": "ready", "started_at": 100.0, "ready_at": 130.5}, 30.5),  # an older summary: from READY
    ({"verdict": "failed", "started_at": 100.0, "ready_at": 130.5}, None),  # not ready: no start time
    ({"verdict": "ready", "cold_start_s": None, "started_at": 100.0, "ready_at": 130.5}, None),  # saw no start
    ({"verdict": "ready", "started_at": "100", "ready_at": 130.5}, None),  # a damaged row: text is no time
    ({"verdict": "ready", "cold_start_s": 12.0, "started_at": 100.0, "ready_at": 130.5}, 12.0),  # its own figure
])
def test_the_start_time_is_the_summarys_own_else_from_ready_for_an_older_ready_one(summary: dict[str, object],
                                                                                   cold: float | None):
    assert extract_metrics(summary, None).get("cold_start_s") == cold
    assert set(extract_metrics(summary, None)) <= {"cold_start_s"}


# -- start types and versions as a summary carries them, and the groups `history` compares -------------------------
@pytest.mark.parametrize(("start_type", "base"), [
    ("warm_page_cache+compile_cache_hit", "warm_page_cache"), ("cold+compile_cache_miss+x", "cold"),
    ("restored", "restored"), ("", None), (None, None)])
def test_a_start_is_compared_by_its_first_label(start_type: str | None, base: str | None):
    assert base_type(start_type) == base


@pytest.mark.parametrize(("summary", "start_type", "version"), [
    ({"start_type": {"type": "cold"}, "engine_version": "0.11.0"}, "cold", "0.11.0"),
    ({"start_type": {"type": ""}, "engine_version": ""}, None, None),  # said empty: none
    ({"start_type": {"type": 3}, "engine_version": 3}, None, None),  # a damaged row: not text
    ({"start_type": "cold"}, None, None),  # not the object a summary carries
    ({}, None, None),  # an older run, a bench run
])
def test_the_start_type_and_engine_version_a_summary_carries(summary: dict[str, object], start_type: str | None,
                                                             version: str | None):
    assert (start_type_of(summary), version_of(summary)) == (start_type, version)


def test_a_start_group_has_its_count_median_minimum_and_maximum_untyped_and_unknown_named():
    groups = start_groups([("d", None, None, 30.0), ("d", None, None, 10.0), ("d", None, None, 20.0),
                           ("e", "cold", "1", 5.0)])
    assert groups == [
        {"deployment": "d", "start_type": "untyped", "version": "unknown", "starts": 3, "median_s": 20.0,
         "min_s": 10.0, "max_s": 30.0},
        {"deployment": "e", "start_type": "cold", "version": "1", "starts": 1, "median_s": 5.0, "min_s": 5.0,
         "max_s": 5.0}]


def _group(version: str, median_s: float, start_type: str = "cold", deployment: str = "d") -> dict[str, object]:
    return {"deployment": deployment, "start_type": start_type, "version": version, "starts": 2,
            "median_s": median_s}


def test_a_version_is_a_regression_only_beyond_the_margin_against_the_version_just_before():
    at_margin = version_regressions([_group("1", 10.0), _group("2", 12.0)])
    assert at_margin == []  # 1.2x: the margin itself is not beyond it
    (reg,) = version_regressions([_group("1", 10.0), _group("2", 12.5)])
    assert reg == {"deployment": "d", "start_type": "cold", "from_version": "1", "to_version": "2", "ratio": 1.25,
                   "message": "cold starts 1.25x slower after 1 -> 2: median 12.5s (2) vs 10.0s (2)"}
    assert version_regressions([_group("1", 10.0), _group("2", 11.0)], margin=0.05)  # the margin given is used
    # against the version just before (3 is compared with 2, not with 1)
    assert [r["to_version"] for r in version_regressions([_group("1", 10.0), _group("2", 20.0),
                                                          _group("3", 21.0)])] == ["2"]


@pytest.mark.parametrize("groups", [
    [_group("1", 10.0), _group("1", 30.0)],  # the same version: no upgrade to blame
    [_group("1", 0.0), _group("2", 30.0)],  # a 0 s median before: no ratio
    [_group("1", 10.0), _group("2", 30.0, start_type="warm_page_cache")],  # another type: never compared
    [_group("1", 10.0), _group("2", 30.0, deployment="e")],  # another deployment: never compared
])
def test_no_version_regression_without_an_upgrade_of_the_same_deployment_and_type(groups: list[dict[str, object]]):
    assert version_regressions(groups) == []


def test_an_eta_says_what_it_is_from_in_its_fields_and_its_note():
    one = estimate([("cold", 60.0), ("warm_page_cache", 10.0)], "cold+compile_cache_hit")
    assert one == StartEstimate(60.0, 1, "cold", {"cold": 1}, "ETA from 1 cold start")  # one start: singular
    mixed = estimate([("cold", 60.0), ("cold", 64.0), (None, 20.0)], "restored")
    assert mixed == StartEstimate(60.0, 3, "restored", {"cold": 2, "untyped": 1},
                                  "no restored starts yet: ETA from 2 cold starts, 1 untyped start")


def test_a_version_after_a_sub_second_median_is_still_compared():
    assert [r["ratio"] for r in version_regressions([_group("1", 0.5), _group("2", 1.0)])] == [2.0]


def _fleet(**nodes: list[float]) -> list[tuple[str, str | None, str | None, float]]:
    return [("d", "cold", node, t) for node, times in nodes.items() for t in times]


def test_a_node_slower_than_the_rest_of_the_fleet_beyond_the_margin_is_named():
    (slow,) = slow_nodes(_fleet(a=[100.0, 101.0, 99.0], b=[100.0, 100.0, 102.0], c=[130.0, 125.0, 126.0]))
    assert slow == {"deployment": "d", "start_type": "cold", "node": "c", "ratio": 1.26, "median_s": 126.0,
                    "starts": 3, "fleet_median_s": 100.0, "fleet_starts": 6,
                    "message": "node c: cold starts 1.26x slower than the rest of the fleet: median 126.0s (3) vs "
                               "100.0s (6)"}
    assert slow_nodes(_fleet(a=[100.0] * 3, b=[120.0] * 3)) == []  # 1.2x: the margin itself is not beyond it
    assert [s["node"] for s in slow_nodes(_fleet(a=[100.0] * 3, b=[111.0] * 3), margin=0.1)] == ["b"]


@pytest.mark.parametrize("starts", [
    _fleet(a=[100.0] * 3, b=[200.0] * 2),  # two starts of the node: not yet
    _fleet(a=[100.0] * 2, b=[200.0] * 3),  # two of the rest: not yet
    _fleet(b=[200.0] * 6),  # one node: no fleet to compare with
    [("d", "cold", None, 200.0)] * 3 + _fleet(a=[100.0] * 3),  # starts of no node are nobody's
    [("d", "cold", "a", 100.0)] * 3 + [("d", "warm_page_cache", "b", 200.0)] * 3,  # another type: never compared
    [("d", "cold", "a", 100.0)] * 3 + [("e", "cold", "b", 200.0)] * 3,  # another deployment: never compared
])
def test_a_node_is_named_only_against_enough_starts_of_the_same_deployment_and_type(starts):
    assert slow_nodes(starts) == []


def test_forecast_accuracy_is_each_deployments_typical_error_its_bias_and_its_share_within_25_percent():
    got = forecast_accuracy([("a", 0.1), ("a", -0.3), ("a", 0.25), ("b", None), ("a", float("nan")), ("b", 0.5)])
    by = {f["deployment"]: f for f in got}
    assert by["a"]["starts"] == 3 and by["a"]["median_abs_error"] == 0.25 and by["a"]["median_error"] == 0.1
    assert by["a"]["within"] == pytest.approx(2 / 3)  # 0.25 is within: the edge counts
    assert by["a"]["message"] == "forecasts of 3 starts: typically off by 25% (bias +10%), 67% within 25%"
    assert by["b"]["starts"] == 1 and by["b"]["within"] == 0.0
    assert FORECAST_GOOD == 0.25
    assert forecast_accuracy([("c", None)]) == []


def _cache(state: str | None, **key: str) -> dict[str, Any]:
    return {"cache": {"compile_cache": state, "compile_key": key or None}}


def test_a_compile_cache_miss_names_the_parts_of_its_key_that_changed_since_the_last_hit():
    earlier = [("cold", _cache("miss", key="0000")), ("cold", _cache("hit", key="8c9f", cfg="cd34", env="ab12")),
               ("cold", _cache("hit", key="1111"))]
    said = compile_key_change(_cache("miss", key="3069", cfg="9999", env="ab12")["cache"], earlier)
    assert said == ("compile cache miss: its key changed since the last start that hit it (key 8c9f -> 3069, "
                    "cfg cd34 -> 9999): a changed engine version, config, compiler or environment")


def test_a_compile_cache_miss_with_the_same_key_says_the_cache_is_gone():
    said = compile_key_change(_cache("miss", key="8c9f")["cache"], [("cold", _cache("hit", key="8c9f"))])
    assert said is not None and "with the key the last hit had (key 8c9f)" in said and "emptied" in said


@pytest.mark.parametrize(("mine", "earlier"), [
    (_cache("hit", key="8c9f"), [("cold", _cache("hit", key="0000"))]),  # not a miss
    (_cache("miss"), [("cold", _cache("hit", key="0000"))]),  # no key said
    (_cache("miss", key="8c9f"), [("cold", _cache("miss", key="0000")), ("cold", None)]),  # no earlier hit
    (_cache("miss", key="8c9f"), [("cold", _cache("hit", cfg="x"))]),  # nothing to compare
    (_cache("miss", key="8c9f"), [("cold", {"cache": "damaged"}), ("cold", {"cache": {"compile_cache": "hit",
                                                                                     "compile_key": "x"}})]),
])
def test_no_compile_key_note_without_a_miss_and_an_earlier_hit_to_compare(mine: dict[str, Any],
                                                                          earlier: list[Any]):
    assert compile_key_change(mine["cache"], earlier) is None


# -- each part of a compile key, each damaged record, each message as said -------------------------------------------
@pytest.mark.parametrize("part", ["key", *COMPILE_FACTORS])
def test_a_compile_cache_miss_names_each_part_of_its_key_that_changed(part: str):
    said = compile_key_change(_cache("miss", **{part: "new1"})["cache"], [("cold", _cache("hit", **{part: "old0"}))])
    assert said is not None and said.startswith(f"compile cache miss: its key changed since the last start that hit "
                                                f"it ({part} old0 -> new1)")


@pytest.mark.parametrize("part", ["key", *COMPILE_FACTORS])
def test_a_compile_cache_miss_with_each_part_of_the_key_unchanged_says_the_cache_is_gone(part: str):
    said = compile_key_change(_cache("miss", **{part: "ab12"})["cache"], [("cold", _cache("hit", **{part: "ab12"}))])
    assert said == (f"compile cache miss with the key the last hit had ({part} ab12): the cache was emptied, or is "
                    "not on this node's disk")


def test_a_compile_cache_miss_with_the_same_key_names_every_part_it_compared():
    key = {"key": "8c9f", "env": "ab12", "code": "77"}
    said = compile_key_change(_cache("miss", **key)["cache"], [("cold", _cache("hit", **key))])
    assert said == ("compile cache miss with the key the last hit had (key 8c9f, env ab12, code 77): the cache was "
                    "emptied, or is not on this node's disk")


@pytest.mark.parametrize("damaged", [["a list"], "a text", 3])
def test_an_earlier_start_whose_anatomy_is_not_a_record_is_passed_over(damaged: object):
    earlier = [("cold", damaged), ("cold", _cache("hit", key="8c9f"))]
    said = compile_key_change(_cache("miss", key="3069")["cache"], earlier)
    assert said is not None and "(key 8c9f -> 3069)" in said


@pytest.mark.parametrize("key", ["8c9f", ["8c9f"], 3])
def test_a_compile_key_that_is_not_a_record_of_its_parts_names_no_change(key: object):
    mine = {"compile_cache": "miss", "compile_key": key}
    assert compile_key_change(mine, [("cold", _cache("hit", key="0000"))]) is None


@pytest.mark.parametrize(("errors", "said"), [([0.1], "forecasts of 1 start: "),
                                              ([0.1, 0.2], "forecasts of 2 starts: "),
                                              ([0.1, 0.2, 0.3], "forecasts of 3 starts: ")])
def test_a_forecast_accuracy_counts_its_starts_in_words(errors: list[float], said: str):
    (acc,) = forecast_accuracy([("a", e) for e in errors])
    assert acc["message"].startswith(said)


def test_a_slow_node_among_untyped_starts_is_named_with_the_untyped_type():
    (slow,) = slow_nodes([("d", None, n, t) for n, ts in (("a", [100.0] * 3), ("b", [200.0] * 3)) for t in ts])
    assert (slow["node"], slow["start_type"]) == ("b", "untyped") and "node b: untyped starts" in slow["message"]


def test_a_node_with_too_few_starts_does_not_hide_the_nodes_after_it():
    got = slow_nodes(_fleet(a=[300.0], b=[100.0] * 3, c=[200.0] * 3, d=[100.0] * 3))
    assert [s["node"] for s in got] == ["c"]  # a: one start, not yet; b and d: the fleet


def test_a_node_is_compared_with_a_sub_second_fleet_but_never_with_one_of_no_time():
    assert [s["node"] for s in slow_nodes(_fleet(a=[0.5] * 3, b=[1.0] * 3))] == ["b"]
    assert slow_nodes(_fleet(a=[0.0] * 3, b=[1.0] * 3)) == []  # a fleet of 0 s: no ratio


def test_a_regression_and_an_estimate_as_records_carry_every_field_and_the_message():
    r = Regression("cold_start_s", 60.0, 40.0, 1.5, 0.1, 3, None, start_type="cold")
    assert r.to_dict() == {**dataclasses.asdict(r), "message": r.message}
    assert r.to_dict()["message"].startswith("cold_start_s 60 vs baseline 40 (median of 3 cold runs)")
    e = StartEstimate(30.0, 2, "cold", {"cold": 2}, "ETA from 2 cold starts")
    assert e.to_dict() == {"seconds": 30.0, "runs": 2, "start_type": "cold", "from_types": {"cold": 2},
                           "note": "ETA from 2 cold starts"}
