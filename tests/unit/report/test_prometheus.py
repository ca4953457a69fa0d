"""--metrics-port: a Prometheus scrape of a cold start, during loading and while serving.

The in-process tests of this subject; the others: ``tests/e2e/report/test_prometheus.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from firstlight import __version__
from firstlight.assessment import Assessment, Event, Progress
from firstlight.report.prometheus import COLD_START_BUCKETS, PrometheusExporter
from firstlight.sim.fixtures import free_port
from firstlight.timeline import Level
from firstlight.vocab import ALL_FAILURES
from tests.support.prometheus import (
    _one_start,
    _result,
    exporter,  # noqa: F401 (a fixture)
)

GRADED = {"source": "history", "note": "from history", "total_s": 100.0, "phases": {"weights_loading": 60.0},
          "fit": None, "fit_status": None,
          "graded": {"total": {"forecast_s": 100.0, "actual_s": 125.0, "error_s": 25.0, "error": 0.25},
                     "phases": {"weights_loading": {"forecast_s": 60.0, "actual_s": 50.0, "error_s": -10.0,
                                                    "error": -0.1667}}}}


def test_the_forecast_its_error_and_each_phases_error_are_exported_and_cleared_by_the_next_start(
        exporter):  # noqa: F811
    ex, port = exporter
    assert math.isnan(_samples(port)["firstlight_forecast_seconds{}"])
    ex.summary(_result("ready", forecast=GRADED))
    got = _samples(port)
    assert got["firstlight_forecast_seconds{}"] == 100.0 and got["firstlight_forecast_error_ratio{}"] == 0.25
    assert got['firstlight_forecast_phase_error_seconds{"phase": "weights_loading"}'] == -10.0
    ex.started({"started_at": 2000.0, "engine": "vllm"})
    got = _samples(port)
    assert math.isnan(got["firstlight_forecast_seconds{}"]) and math.isnan(got["firstlight_forecast_error_ratio{}"])
    assert not any(k.startswith("firstlight_forecast_phase_error_seconds") for k in got)


def _samples(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name + json.dumps(s.labels, sort_keys=True)] = s.value
    return out


def test_each_start_is_counted_once_by_verdict_and_category_across_starts(exporter):  # noqa: F811
    ex, port = exporter
    before = _samples(port)
    for category in ALL_FAILURES:  # there before any failure: increase() sees the first one
        assert before[f'firstlight_starts_total{{"failure": "{category}", "verdict": "failed"}}'] == 0
    _one_start(ex, _result("failed", failure="oom"))
    _one_start(ex, _result("failed", failure="oom"))
    _one_start(ex, _result("hung"))
    _one_start(ex, _result("ready"))
    _one_start(ex, _result("regression", cold_start_s=95.0))
    ex.summary(dataclasses.replace(_result("ready"), verdict="failed", phase="serving", failure="other"))  # ended
    ex.summary(_result("interrupted"))  # the sidecar stopped: no start
    m = _samples(port)
    assert m['firstlight_starts_total{"failure": "oom", "verdict": "failed"}'] == 2
    assert m['firstlight_starts_total{"failure": "", "verdict": "hung"}'] == 1
    assert m['firstlight_starts_total{"failure": "", "verdict": "ready"}'] == 1
    assert m['firstlight_starts_total{"failure": "", "verdict": "regression"}'] == 1
    assert m['firstlight_starts_total{"failure": "other", "verdict": "failed"}'] == 0
    assert m['firstlight_starts_total{"failure": "", "verdict": "interrupted"}'] == 0
    assert m["firstlight_time_to_ready_seconds_count{}"] == 2  # the two starts that served
    assert m['firstlight_time_to_ready_seconds_bucket{"le": "30.0"}'] == 1
    assert m['firstlight_time_to_ready_seconds_bucket{"le": "120.0"}'] == 2


@pytest.mark.parametrize("category", [*ALL_FAILURES, "a_category_added_later"])
def test_the_failure_label_takes_every_category(exporter, category: str):  # noqa: F811
    ex, port = exporter
    _one_start(ex, _result("failed", failure=category))
    assert _samples(port)[f'firstlight_starts_total{{"failure": "{category}", "verdict": "failed"}}'] == 1


def test_info_names_engine_model_and_deployment_and_never_a_path(exporter):  # noqa: F811
    ex, port = exporter
    _one_start(ex, _result("ready"), model="/home/alice/secret-project/models/Qwen2-7B-Instruct/")
    info = [k for k in _samples(port) if k.startswith("firstlight_info")]
    assert info == ['firstlight_info{"deployment": "chat-prod", "engine": "vllm", "model": "Qwen2-7B-Instruct", '
                    f'"version": "{__version__}"}}']


def test_serving_state_and_the_after_ready_figures(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "vllm"})
    m = _samples(port)
    assert m["firstlight_serving{}"] == 0 and math.isnan(m["firstlight_ready_time_seconds{}"])
    assert math.isnan(m["firstlight_spec_decoding_acceptance_rate{}"])
    checks = [{"name": n, "status": s} for n, s in (("a", "ok"), ("b", "ok"), ("c", "warn"))]
    _one_start(ex, _result("ready", spec_decoding={"acceptance_rate": 0.62, "mean_acceptance_length": 2.4},
                           bench={"output_throughput": 123.5}, baseline={"cold_start_s": 28.0, "deployment": "x"},
                           preflight={"checks": checks}))
    m = _samples(port)
    assert m["firstlight_serving{}"] == 1 and m["firstlight_ready_time_seconds{}"] == 1030.0
    assert m["firstlight_spec_decoding_acceptance_rate{}"] == 0.62
    assert m["firstlight_spec_decoding_mean_acceptance_length{}"] == 2.4
    assert m["firstlight_bench_output_tokens_per_second{}"] == 123.5
    assert m["firstlight_cold_start_baseline_seconds{}"] == 28.0
    assert [m[f'firstlight_preflight_checks{{"status": "{s}"}}'] for s in ("ok", "warn", "fail")] == [2, 1, 0]
    ex.serving_state("degraded")
    assert _samples(port)["firstlight_serving{}"] == 0.5
    ex.summary(dataclasses.replace(_result("ready"), verdict="failed", phase="serving", failure="other"))
    m = _samples(port)
    assert m["firstlight_serving{}"] == 0 and m["firstlight_ready_time_seconds{}"] == 1030.0  # not serving after READY
    ex.started({"started_at": 2000.0, "engine": "vllm"})  # the next start: no READY yet
    assert math.isnan(_samples(port)["firstlight_ready_time_seconds{}"])


def test_phase_seconds_follow_the_start_then_its_result(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "sglang"})
    a = Assessment("starting", "weights_loading", Level.PORT, 12.0, [], Progress())
    ex.event(Event(1004.0, "phase", "weights_loading"), a)
    ex.status(a)
    m = _samples(port)
    assert m['firstlight_phase_seconds{"phase": "process_start"}'] == 4.0
    assert m['firstlight_phase_seconds{"phase": "weights_loading"}'] == 8.0  # so far
    phases = ({"name": "process_start", "start": 1000.0, "end": None}, {"name": "weights_loading", "start": 1004.0},
              {"name": "ready", "start": 1025.0, "end": 1025.0})
    _one_start(ex, _result("ready", phases=phases))
    m = _samples(port)
    assert m['firstlight_phase_seconds{"phase": "weights_loading"}'] == 21.0
    assert m['firstlight_phase_seconds{"phase": "ready"}'] == 0.0


def test_a_load_renamed_download_counts_as_the_download_from_where_it_began(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "vllm"})
    a = Assessment("starting", "download", Level.PROCESS, 12.0, [], Progress())
    ex.event(Event(1002.0, "phase", "weights_loading"), a)
    ex.event(Event(1005.0, "phase", "download", {"relabel": "weights_loading"}), a)
    ex.status(a)
    m = _samples(port)
    assert m['firstlight_phase_seconds{"phase": "download"}'] == 10.0  # from 1002, where the load line began it
    assert m.get('firstlight_phase_seconds{"phase": "weights_loading"}', 0.0) == 0.0
    assert m['firstlight_phase{"firstlight_phase": "download"}'] == 1.0


def test_without_deployment_the_info_takes_the_histories_deployment_hash():
    port = free_port()
    ex = PrometheusExporter(port)
    try:
        ex.started({"started_at": 1000.0, "engine": "vllm", "model": "org/Model-7B"})
        assert 'deployment=""' in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        ex.verdict(_result("ready"))
        ex.summary(_result("ready", baseline={"deployment": "0123456789abcdef0123", "cold_start_s": None}))
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        assert 'firstlight_info{deployment="0123456789ab",engine="vllm",model="Model-7B"' in text
    finally:
        ex.close()


def test_the_cold_start_buckets_span_seconds_to_an_hour_at_most_1_5x_apart_above_10_s():
    b = COLD_START_BUCKETS
    assert b[0] == 1 and b[-1] == 3600 and list(b) == sorted(set(b))
    assert all(hi / lo <= 1.5 for lo, hi in itertools.pairwise(b) if lo >= 10)


def test_a_leader_exports_the_group_verdict_and_each_members_state_by_member_and_node_rank():
    from prometheus_client import generate_latest

    from firstlight.report.prometheus import PrometheusExporter

    leader = PrometheusExporter(0)
    try:
        before = generate_latest(leader.registry).decode()
        assert "firstlight_group_" not in before  # a node without members has no group series
        members = [{"url": "http://user:s3cr3tpw@127.0.1.2:8081/x?token=t0k3nval", "node_rank": 1, "ok": True,
                    "last_progress_at": 1700000000.5, "error": None},
                   {"url": "http://127.0.1.3:8081", "node_rank": None, "ok": False, "last_progress_at": None,
                    "error": "ConnectError: refused"}]
        leader.group_update(members, {"verdict": "hung", "serving": False})
        text = generate_latest(leader.registry).decode()
        assert 'firstlight_group_verdict{firstlight_group_verdict="hung"} 1.0' in text
        assert "firstlight_group_serving 0.0" in text
        assert 'firstlight_group_member_ready{member="127.0.1.2:8081",node_rank="1"} 1.0' in text
        assert 'firstlight_group_member_ready{member="127.0.1.3:8081",node_rank=""} 0.0' in text
        assert 'firstlight_group_member_unreachable{member="127.0.1.3:8081",node_rank=""} 1.0' in text
        assert ('firstlight_group_member_last_progress_timestamp_seconds{member="127.0.1.2:8081",node_rank="1"} '
                "1.7000000005e+09") in text
        assert "s3cr3tpw" not in text and "t0k3nval" not in text  # a member's URL never brings its secrets into a label
        # each member's restarts as a counter: 0 from the first read, then as many as the leader counted
        assert 'firstlight_group_member_restarts_total{member="127.0.1.3:8081",node_rank=""} 0.0' in text
        for restarts in (2, 2, 3):  # the same count told again adds nothing
            leader.group_update([{**members[1], "restarts": restarts}], {"verdict": "starting", "serving": False})
        text = generate_latest(leader.registry).decode()
        assert 'firstlight_group_member_restarts_total{member="127.0.1.3:8081",node_rank=""} 3.0' in text
    finally:
        leader.close()


def test_every_sampler_and_rung_has_its_success_duration_and_counts_in_the_scrape(exporter):  # noqa: F811
    from firstlight.timeline import CollectorStat

    ex, port = exporter
    before = _samples(port)
    assert before["firstlight_collectors_read_success{}"] == 1.0
    assert not any(k.startswith(("firstlight_sampler_", "firstlight_probe_")) for k in before)  # no watch yet
    stats = [CollectorStat("sampler", "process", runs=7, failures=2, success=False, duration_s=0.004),
             CollectorStat("sampler", "gpu", runs=3, success=True, duration_s=0.25),
             CollectorStat("probe", "port", runs=5, failures=1, success=True, duration_s=0.001),
             CollectorStat("probe", "generation", runs=2, failures=2, errors=1, success=False, duration_s=1.5),
             CollectorStat("probe", "models")]
    ex.collectors(lambda: stats)
    m = _samples(port)
    assert m['firstlight_sampler_success{"sampler": "process"}'] == 0.0
    assert m['firstlight_sampler_success{"sampler": "gpu"}'] == 1.0
    assert m['firstlight_sampler_duration_seconds{"sampler": "gpu"}'] == 0.25
    assert m['firstlight_sampler_samples_total{"sampler": "process"}'] == 7.0
    assert m['firstlight_sampler_failures_total{"sampler": "process"}'] == 2.0
    assert m['firstlight_probe_success{"rung": "port"}'] == 1.0
    assert m['firstlight_probe_checks_total{"rung": "generation"}'] == 2.0
    assert m['firstlight_probe_failures_total{"rung": "generation"}'] == 2.0
    assert m['firstlight_probe_errors_total{"rung": "generation"}'] == 1.0
    assert m['firstlight_probe_duration_seconds{"rung": "generation"}'] == 1.5
    # a rung never checked yet: NaN, never a 0 that reads as "failed"
    assert math.isnan(m['firstlight_probe_success{"rung": "models"}'])
    assert math.isnan(m['firstlight_probe_duration_seconds{"rung": "models"}'])
    assert not any("sampler" in k and "port" in k for k in m)  # each kind under its own names

    def broken() -> list[CollectorStat]:
        raise RuntimeError("replaced under the scrape")

    ex.collectors(broken)
    after = _samples(port)
    assert after["firstlight_collectors_read_success{}"] == 0.0 and after["firstlight_ready{}"] == 0.0


def test_each_collector_series_says_what_it_means_in_its_help(exporter):  # noqa: F811
    from firstlight.timeline import CollectorStat

    ex, port = exporter
    ex.collectors(lambda: [CollectorStat("sampler", "process"), CollectorStat("probe", "port")])
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    helps = [line for line in text.splitlines() if line.startswith(("# HELP firstlight_sampler",
                                                                    "# HELP firstlight_probe",
                                                                    "# HELP firstlight_collectors"))]
    assert helps == [
        "# HELP firstlight_collectors_read_success 1 when this scrape could read the samplers' and rungs' state",
        "# HELP firstlight_sampler_success 1 when the sampler's last sample worked, 0 when not, NaN before the first",
        "# HELP firstlight_sampler_duration_seconds Wall time of the sampler's last sample",
        "# HELP firstlight_sampler_samples_total Samples the sampler took in this start",
        "# HELP firstlight_sampler_failures_total Samples of the sampler that raised in this start",
        "# HELP firstlight_probe_success 1 when the readiness rung's last check held, 0 when not, NaN before the "
        "first",
        "# HELP firstlight_probe_duration_seconds Wall time of the readiness rung's last check",
        "# HELP firstlight_probe_checks_total Checks of the readiness rung in this start",
        "# HELP firstlight_probe_failures_total Checks of the readiness rung that did not hold in this start",
        "# HELP firstlight_probe_errors_total Checks of the rung that failed inside firstlight (a bug, or an answer "
        "nobody foresaw), not because of the server, in this start",
    ]


@pytest.mark.parametrize(("url", "label"), [
    ("http://[::1]:8081/readyz", "[::1]:8081"), ("http://127.0.1.2:8081", "127.0.1.2:8081"),
    ("http://node-3.svc", "node-3.svc"), ("http://[::1]/", "::1"), ("", ""), ("http://[::1:8081", ""),
    ("http://u:pw@h:1/p?q=1", "h:1"),
])
def test_a_member_label_is_its_host_and_port_only(url: str, label: str):
    from firstlight.report.prometheus import member_label

    assert member_label(url) == label


@pytest.mark.parametrize(("model", "label"), [
    ("/models/llama-3/", "llama-3"), ("org/Model-7B", "Model-7B"), ("/", "/"), (None, ""), ("", ""),
])
def test_a_model_label_is_its_last_path_component(model: str | None, label: str):
    from firstlight.report.prometheus import model_label

    assert model_label(model) == label


def test_each_progress_figure_reaches_its_own_series(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "vllm"})
    p = Progress(weights_fraction=0.25, read_rate=2e8, eta_weights_s=31.0, eta_total_s=95.0, since_last_log_s=4.5,
                 cpu_cores=1.75, rss_bytes=3_000_000_000, gpu_memory_bytes=7e10)
    ex.status(Assessment("starting", "weights_loading", Level.PORT, 12.0, [], p))
    m = _samples(port)
    assert {k: m[k + "{}"] for k in ("firstlight_weights_fraction", "firstlight_read_bytes_per_second",
                                     "firstlight_weights_eta_seconds", "firstlight_ready_eta_seconds",
                                     "firstlight_seconds_since_last_log_line", "firstlight_server_cpu_cores",
                                     "firstlight_server_rss_bytes", "firstlight_gpu_memory_used_bytes")} == {
        "firstlight_weights_fraction": 0.25, "firstlight_read_bytes_per_second": 2e8,
        "firstlight_weights_eta_seconds": 31.0, "firstlight_ready_eta_seconds": 95.0,
        "firstlight_seconds_since_last_log_line": 4.5, "firstlight_server_cpu_cores": 1.75,
        "firstlight_server_rss_bytes": 3e9, "firstlight_gpu_memory_used_bytes": 7e10}


def test_the_current_phase_budget_and_its_use_reach_their_series(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "vllm"})
    p = Progress(phase_budget={"phase": "cuda_graph", "learned": True, "budget_s": 150.0, "used_s": 75.0,
                               "used": 0.5})
    ex.status(Assessment("starting", "cuda_graph", Level.PORT, 80.0, [], p))
    m = _samples(port)
    assert (m["firstlight_phase_budget_seconds{}"], m["firstlight_phase_budget_used_ratio{}"]) == (150.0, 0.5)
    ex.status(Assessment("starting", "compile", Level.PORT, 81.0, [], Progress(phase_budget={"learned": False})))
    m = _samples(port)
    assert math.isnan(m["firstlight_phase_budget_seconds{}"]) and math.isnan(m["firstlight_phase_budget_used_ratio{}"])


def test_a_phase_entered_twice_counts_both_stretches_to_the_millisecond(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "vllm"})
    a = Assessment("starting", "weights_loading", Level.PORT, 0.0, [], Progress())
    ex.event(Event(1000.0, "note", "weights_loading"), a)  # a note that names a phase moves nothing
    phases = ({"name": "weights_loading", "start": 1000.0, "end": 1001.23456},
              {"name": "kv_cache", "start": 1001.23456, "end": 1002.0},
              {"name": "weights_loading", "start": 1002.0, "end": 1003.5})
    _one_start(ex, _result("ready", phases=phases))
    m = _samples(port)
    assert m['firstlight_phase_seconds{"phase": "weights_loading"}'] == 2.735  # 1.23456 + 1.5, to 3 decimals
    assert m['firstlight_phase_seconds{"phase": "kv_cache"}'] == 0.765


def test_the_group_series_say_serving_and_unreachable_as_0_or_1_and_what_they_mean():
    from prometheus_client import generate_latest

    leader = PrometheusExporter(0)
    try:
        ok = {"url": "http://127.0.1.2:8081", "node_rank": 1, "ok": True, "last_progress_at": 1.0, "error": None}
        leader.group_update([ok], {"verdict": "ready", "serving": True})
        text = generate_latest(leader.registry).decode()
        assert "firstlight_group_serving 1.0" in text
        assert 'firstlight_group_member_unreachable{member="127.0.1.2:8081",node_rank="1"} 0.0' in text
        helps = [line for line in text.splitlines() if line.startswith("# HELP firstlight_group_")]
        assert helps == [
            "# HELP firstlight_group_verdict The verdict of the group this leader answers for (every member ready "
            "too)",
            "# HELP firstlight_group_serving 1 while the group serves: the leader and every member ready",
            "# HELP firstlight_group_member_ready 1 while a member's own /readyz answers 200",
            "# HELP firstlight_group_member_last_progress_timestamp_seconds When a member last progressed (Unix "
            "time); NaN when never read",
            "# HELP firstlight_group_member_unreachable 1 while a member's firstlight cannot be read",
            "# HELP firstlight_group_member_restarts_total Restarts of a member the leader saw (its engine's pid or "
            "its start changed)",
            "# HELP firstlight_group_member_restarts_created Restarts of a member the leader saw (its engine's pid or "
            "its start changed)",
        ]
        leader.group_update([{**ok, "url": None}], {"verdict": "ready", "serving": True})
        assert 'firstlight_group_member_ready{member="",node_rank="1"}' in generate_latest(leader.registry).decode()
    finally:
        leader.close()


# -- the verdict's own series and the start's counting, at their edges (the module's full mutation run) ------------
def test_a_results_verdict_ready_cold_start_and_first_generation(exporter):  # noqa: F811
    ex, port = exporter
    _one_start(ex, _result("ready", first_generation={"latency_s": 0.4}, engine="sglang"))
    m = _samples(port)
    assert m['firstlight_verdict{"firstlight_verdict": "ready"}'] == 1
    assert m['firstlight_verdict{"firstlight_verdict": "failed"}'] == 0
    assert m["firstlight_ready{}"] == 1 and m['firstlight_phase{"firstlight_phase": "serving"}'] == 1
    assert m["firstlight_cold_start_seconds{}"] == 30.0 and m["firstlight_first_generation_seconds{}"] == 0.4
    assert any(k.startswith("firstlight_info") and '"engine": "sglang"' in k for k in m)  # as the result names it
    ex.summary(dataclasses.replace(_result("ready"), phase="serving", verdict="failed", failure="other"))
    m = _samples(port)
    assert m["firstlight_ready{}"] == 0 and m['firstlight_verdict{"firstlight_verdict": "failed"}'] == 1
    ex.summary(_result("a-verdict-from-a-newer-firstlight"))
    assert _samples(port)['firstlight_verdict{"firstlight_verdict": "failed"}'] == 1  # a state the enum has


def test_a_regression_serves_and_a_start_that_served_no_more_does_not(exporter):  # noqa: F811
    ex, port = exporter
    _one_start(ex, _result("regression", cold_start_s=95.0))
    m = _samples(port)
    assert m["firstlight_ready{}"] == 1 and m["firstlight_serving{}"] == 1
    assert m["firstlight_time_to_ready_seconds_sum{}"] == 95.0
    _one_start(ex, _result("failed", failure="oom", cold_start_s=12.0))  # a cold start, but never served
    assert _samples(port)["firstlight_time_to_ready_seconds_count{}"] == 1


def test_a_sidecars_timeout_is_no_start_and_a_launchers_is_one(exporter):  # noqa: F811
    ex, port = exporter
    for timeout_is_verdict, counted in ((False, 0), (True, 1), (None, 2)):
        info = {"started_at": 1000.0, "engine": "vllm"}
        if timeout_is_verdict is not None:
            info["timeout_is_verdict"] = timeout_is_verdict
        ex.started(info)
        ex.verdict(_result("timeout"))
        ex.summary(_result("timeout"))
        assert _samples(port)['firstlight_starts_total{"failure": "", "verdict": "timeout"}'] == counted
    ex.started({"started_at": 1000.0, "engine": "vllm", "timeout_is_verdict": False})
    ex.verdict(_result("hung"))
    ex.summary(_result("hung"))  # only a timeout is the sidecar's to hold back
    assert _samples(port)['firstlight_starts_total{"failure": "", "verdict": "hung"}'] == 1


def test_a_start_without_a_start_time_has_no_phases_and_no_start_time(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"engine": "vllm"})
    a = Assessment("starting", "weights_loading", Level.PORT, 12.0, [], Progress())
    ex.status(a)
    m = _samples(port)
    assert math.isnan(m["firstlight_start_time_seconds{}"])
    assert not any(k.startswith("firstlight_phase_seconds") and v > 0 for k, v in m.items())
    ex.started({"started_at": 1000.0, "engine": "vllm"})
    assert _samples(port)["firstlight_start_time_seconds{}"] == 1000.0


def test_only_a_phase_event_moves_the_phase(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "vllm"})
    a = Assessment("starting", "weights_loading", Level.PORT, 12.0, [], Progress())
    ex.event(Event(1004.0, "note", "weights_loading"), a)  # a phase's name in another event's words
    assert _samples(port)['firstlight_phase{"firstlight_phase": "process_start"}'] == 1
    ex.event(Event(1005.0, "phase", "not_a_phase"), a)
    assert _samples(port)['firstlight_phase{"firstlight_phase": "process_start"}'] == 1
    ex.event(Event(1006.0, "phase", "weights_loading"), a)
    assert _samples(port)['firstlight_phase{"firstlight_phase": "weights_loading"}'] == 1


def test_the_result_phases_end_at_the_results_end(exporter):  # noqa: F811
    ex, port = exporter
    phases = ({"name": "process_start", "start": 1000.0, "end": 1004.0}, {"name": "weights_loading", "start": 1004.0})
    _one_start(ex, _result("failed", failure="oom", phases=phases, ended_at=1019.5))
    assert _samples(port)['firstlight_phase_seconds{"phase": "weights_loading"}'] == 15.5


def test_a_members_restarts_are_counted_once_each_and_a_member_without_url_is_blank():
    port = free_port()
    ex = PrometheusExporter(port)
    try:
        group = {"verdict": "starting", "serving": False}
        for restarts in (0, 2, 2, 3):
            ex.group_update([{"url": "http://10.0.0.2:8081", "node_rank": 1, "restarts": restarts, "state": "starting"},
                             {"node_rank": 2, "state": "unreachable"}], group)
        m = _samples(port)
        assert m['firstlight_group_member_restarts_total{"member": "10.0.0.2:8081", "node_rank": "1"}'] == 3
        assert any('"member": ""' in k and '"node_rank": "2"' in k for k in m)
    finally:
        ex.close()



def _scrape_of_every_series() -> str:
    """A scrape with every series present: a group, collectors, a start in progress."""
    from firstlight.timeline import CollectorStat

    port = free_port()
    ex = PrometheusExporter(port, deployment="d")
    try:
        ex.group_update([{"url": "http://10.0.0.2:8081", "node_rank": 1, "state": "ready", "restarts": 0}],
                        {"verdict": "ready", "serving": True})
        ex.collectors(lambda: [CollectorStat("sampler", "process", runs=1), CollectorStat("probe", "port", runs=1)])
        ex.summary(_result("ready", forecast=GRADED))  # the last start's graded forecast stays until the next start's
        ex.started({"started_at": 1000.0, "engine": "vllm"})
        ex.status(Assessment("starting", "weights_loading", Level.PORT, 12.0, [], Progress()))
        ex.summary(_result("ready", forecast=GRADED))
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    finally:
        ex.close()


def test_every_series_the_docs_name_is_exported_and_every_exported_one_is_named():
    import re

    from tests.support.common import REPO

    text = (REPO / "docs" / "prometheus.md").read_text().split("\n## ", 2)[1]  # the "Prometheus" section
    documented = set(re.findall(r"`(firstlight_[a-z_]+)", text))
    scrape = _scrape_of_every_series()
    exported = {s.name for f in text_string_to_metric_families(scrape) for s in f.samples
                if s.name.startswith("firstlight_") and not s.name.endswith("_created")}

    def named(sample: str) -> bool:  # a histogram's series are its name and _bucket, _count, _sum
        return any(sample == d or sample in (d + "_bucket", d + "_count", d + "_sum") for d in documented)

    assert {s for s in exported if not named(s)} == set()
    assert {d for d in documented if not any(s == d or s.startswith(d + "_") for s in exported)} == set()


def test_the_docs_table_gives_every_series_its_type_and_help_as_the_scrape_does():
    import re

    from tests.support.common import REPO

    rows = re.findall(r"^\| `(firstlight_[a-z_]+)` \| (\w+) \| (.+) \|$", (REPO / "docs" / "prometheus.md").read_text(),
                      re.M)
    documented = {name: (kind, text) for name, kind, text in rows}
    scrape = _scrape_of_every_series()
    served = {f.name + ("_total" if f.type == "counter" else ""): (f.type, f.documentation.replace("|", "/"))
              for f in text_string_to_metric_families(scrape)
              if f.name.startswith("firstlight_") and not f.name.endswith("_created")}
    assert served == documented


# -- a fresh exporter, before and between starts -------------------------------------------------------------------
def test_a_fresh_exporter_serves_blank_info_and_every_preflight_status_at_0(exporter):  # noqa: F811
    ex, port = exporter
    m = _samples(port)
    info = [k for k in m if k.startswith("firstlight_info")]
    assert info == ['firstlight_info{"deployment": "chat-prod", "engine": "", "model": "", '
                    f'"version": "{__version__}"}}']
    assert [m[f'firstlight_preflight_checks{{"status": "{s}"}}'] for s in ("ok", "warn", "fail")] == [0, 0, 0]
    a = Assessment("starting", "process_start", Level.NONE, 1.0, [], Progress())
    ex.status(a)  # before any start: nothing to time, no error
    ex.summary(_result("ready"))  # a summary without a verdict: no start to count
    assert _samples(port)['firstlight_starts_total{"failure": "", "verdict": "ready"}'] == 0
    ex.verdict(_result("timeout"))  # a launcher's timeout, never told otherwise: a start
    ex.summary(_result("timeout"))
    assert _samples(port)['firstlight_starts_total{"failure": "", "verdict": "timeout"}'] == 1


def test_the_deployment_given_is_kept_and_the_engine_the_result_names_is_taken(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "vllm"})
    ex.started({"started_at": 1001.0, "engine": None})  # a start that cannot tell keeps what was known
    ex.summary(dataclasses.replace(_result("ready"), engine="sglang", baseline={"deployment": "0123456789abcdef"}))
    info = [k for k in _samples(port) if k.startswith("firstlight_info")]
    assert info == ['firstlight_info{"deployment": "chat-prod", "engine": "sglang", "model": "", '
                    f'"version": "{__version__}"}}']


def test_a_stop_while_serving_is_no_longer_ready(exporter):  # noqa: F811
    ex, port = exporter
    _one_start(ex, _result("ready"))
    ex.summary(_result("interrupted", phase="ready"))  # the caller's stop, in the phase it had reached
    assert _samples(port)["firstlight_ready{}"] == 0


def test_the_exporter_listens_on_the_address_given_only():
    port = free_port()
    ex = PrometheusExporter(port, addr="127.0.0.1")
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.2:{port}/metrics", timeout=5)  # another loopback address: not bound
    finally:
        ex.close()


def test_the_engine_a_start_names_is_the_info_label_at_once(exporter):  # noqa: F811
    ex, port = exporter
    ex.started({"started_at": 1000.0, "engine": "vllm", "model": "/m/Qwen2-7B"})
    info = [k for k in _samples(port) if k.startswith("firstlight_info")]
    assert info == ['firstlight_info{"deployment": "chat-prod", "engine": "vllm", "model": "Qwen2-7B", '
                    f'"version": "{__version__}"}}']


def test_a_serving_state_firstlight_does_not_know_reads_as_not_serving(exporter):  # noqa: F811
    ex, port = exporter
    ex.serving_state("serving")
    ex.serving_state("a-state-from-a-newer-firstlight")
    assert _samples(port)["firstlight_serving{}"] == 0
