"""--metrics-port: a Prometheus scrape of a cold start, during loading and while serving."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from firstlight import __version__
from firstlight.judge import Assessment, Event, Progress
from firstlight.report.prometheus import COLD_START_BUCKETS, PrometheusExporter
from firstlight.result import RunResult
from firstlight.sim.server import free_port
from firstlight.timeline import Level
from firstlight.vocab import ALL_FAILURES
from tests.support.common import firstlight_cmd, require, run_firstlight, sim_cmd, wait_for


def scrape(port: int) -> dict[str, float]:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return {}
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = s.name + "".join(f"{{{v}}}" for k, v in sorted(s.labels.items()))
            out[key] = s.value
    return out


def test_metrics_follow_the_start_and_stay_up_while_serving(weights: Path):
    port, mport = free_port(), free_port()
    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--poll-min", "0.05", "--sample-interval", "0.2",
                                         "--metrics-port", str(mport), "--",
                                         *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "3")),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    try:
        loading = wait_for(lambda: (m := scrape(mport)).get("firstlight_phase{weights_loading}") == 1 and m, 30,
                           "the weights_loading phase in the scrape")
        assert loading["firstlight_verdict{starting}"] == 1 and loading["firstlight_ready"] == 0
        assert fl.stdout is not None
        wait_for(lambda: '"verdict": "ready"' in (fl.stdout.readline() or ""), 60, "READY")
        serving = wait_for(lambda: (m := scrape(mport)).get("firstlight_ready") == 1 and m, 10, "ready in the scrape")
        assert serving["firstlight_verdict{ready}"] == 1 and serving["firstlight_phase{serving}"] == 1
        assert serving["firstlight_readiness_level"] == 6
        assert 2.5 < serving["firstlight_cold_start_seconds"] < 30
        fl.send_signal(signal.SIGINT)
        out, _ = fl.communicate(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert json.loads(out.splitlines()[-1])["verdict"] == "interrupted"


def test_a_taken_metrics_port_is_a_usage_error():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        r = run_firstlight("watch", "http://127.0.0.1:1", "--metrics-port", str(s.getsockname()[1]), "--timeout", "1")
    assert r.rc == 64 and "cannot listen" in r.stderr and "Traceback" not in r.stderr


# -- the fleet's series, from the exporter on its own ----------------------------------------------------------
def _result(verdict: str = "ready", **kw: Any) -> RunResult:
    base: dict[str, Any] = {"phase": "ready" if verdict in ("ready", "regression") else "weights_loading",
                            "started_at": 1000.0, "ended_at": 1030.0, "engine": "vllm", "url": "http://127.0.0.1:1"}
    if verdict in ("ready", "regression"):
        base.update(ready_at=1030.0, cold_start_s=30.0)
    return RunResult(verdict=verdict, **{**base, **kw})


def _samples(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name + json.dumps(s.labels, sort_keys=True)] = s.value
    return out


def _one_start(ex: PrometheusExporter, result: RunResult, model: str | None = "/data/models/Qwen2-7B") -> None:
    """What a Session tells its reporters about one start, as often as it tells it."""
    ex.started({"started_at": result.started_at, "engine": result.engine, "model": model})
    ex.verdict(dataclasses.replace(result, regression=None, verdict="ready") if result.verdict == "regression"
               else result)
    ex.summary(result)  # the session's last line...
    ex.summary(result)  # ...and a supervising policy's own summary of the same start


@pytest.fixture
def exporter() -> Iterator[tuple[PrometheusExporter, int]]:
    port = free_port()
    ex = PrometheusExporter(port, deployment="chat-prod")
    yield ex, port
    ex.close()


def test_each_start_is_counted_once_by_verdict_and_category_across_starts(exporter):
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
def test_the_failure_label_takes_every_category(exporter, category: str):
    ex, port = exporter
    _one_start(ex, _result("failed", failure=category))
    assert _samples(port)[f'firstlight_starts_total{{"failure": "{category}", "verdict": "failed"}}'] == 1


def test_info_names_engine_model_and_deployment_and_never_a_path(exporter):
    ex, port = exporter
    _one_start(ex, _result("ready"), model="/home/alice/secret-project/models/Qwen2-7B-Instruct/")
    info = [k for k in _samples(port) if k.startswith("firstlight_info")]
    assert info == ['firstlight_info{"deployment": "chat-prod", "engine": "vllm", "model": "Qwen2-7B-Instruct", '
                    f'"version": "{__version__}"}}']


def test_serving_state_and_the_after_ready_figures(exporter):
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


def test_phase_seconds_follow_the_start_then_its_result(exporter):
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


def test_promtool_finds_nothing_to_lint_in_the_exposition(exporter):
    require(shutil.which("promtool") is not None, "promtool (Debian package prometheus)")
    ex, port = exporter
    _one_start(ex, _result("failed", failure="oom"))
    _one_start(ex, _result("ready", spec_decoding={"acceptance_rate": 0.5}, bench={"output_throughput": 10.0}))
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p.stdout + p.stderr


@pytest.mark.parametrize("spec", ["0", "127.0.0.1:0", "host:port", "70000"])
def test_a_bad_metrics_address_is_a_usage_error_of_one_line(spec: str):
    r = run_firstlight("watch", "http://127.0.0.1:1", "--metrics-port", spec, "--timeout", "1")
    assert r.rc == 64 and "--metrics-port" in r.stderr and "Traceback" not in r.stderr
    assert next(line for line in r.stderr.splitlines() if "--metrics-port" in line).startswith("Error: ")


def test_the_sidecar_keeps_its_counters_across_starts_and_shows_no_secret(weights: Path, reap: list[int],
                                                                         tmp_path: Path):
    port, mport, rport, token = free_port(), free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    secret, log = "sk-" + uuid.uuid4().hex, tmp_path / "engine.log"
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid-from", token, "--log", str(log),
                                         "--poll-min",
                                         "0.05", "--sample-interval", "0.2", "--no-history", "--api-key", secret,
                                         "--serve-readiness", f"127.0.0.1:{rport}", "--metrics-port", str(mport),
                                         "--deployment", "chat"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: scrape(mport), 60, "the sidecar's metrics")

        def sim(scenario: str) -> subprocess.Popen[bytes]:
            with log.open("wb") as out:  # each start truncates the engine's log, as `tee` would
                p = subprocess.Popen(sim_cmd(scenario, port, "--model-path", str(weights), "--served-model-name",
                                             token, "--api-key", secret),
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            reap.append(p.pid)
            return p

        sim("crash_oom").wait(timeout=60)
        wait_for(lambda: scrape(mport).get("firstlight_starts_total{oom}{failed}") == 1, 60, "the failed start counted")
        sim("normal")
        m = wait_for(lambda: (m := scrape(mport)).get("firstlight_starts_total{}{ready}") == 1 and m, 60,
                     "the ready start counted")
        assert m["firstlight_starts_total{oom}{failed}"] == 1 and m["firstlight_serving"] == 1
        assert m["firstlight_time_to_ready_seconds_count"] == 1
        text = httpx.get(f"http://127.0.0.1:{mport}/metrics", timeout=5).text
        info = [line for line in text.splitlines() if line.startswith("firstlight_info")]
        assert info[0].startswith(f'firstlight_info{{deployment="chat",engine="sglang",model="{weights.name}"'), info
        assert secret not in text and str(weights.parent) not in text
    finally:
        fl.send_signal(signal.SIGTERM)
        try:
            fl.wait(timeout=30)
        finally:
            if fl.poll() is None:
                fl.kill()


def test_metrics_and_readiness_are_two_listeners_and_one_port_for_both_is_a_usage_error():
    port = free_port()
    r = run_firstlight("watch", "http://127.0.0.1:1", "--serve-readiness", f"127.0.0.1:{port}", "--metrics-port",
                       str(port), "--timeout", "1")
    assert r.rc == 64 and f"--metrics-port {port}: cannot listen" in r.stderr and "Traceback" not in r.stderr


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


def test_the_after_ready_benchmark_and_spec_decoding_reach_the_scrape(weights: Path):
    port, mport = free_port(), free_port()
    fl = subprocess.Popen(firstlight_cmd("up", "--poll-min", "0.05", "--sample-interval", "0.2", "--no-history",
                                         "--bench", "--bench-requests", "4", "--bench-concurrency", "2",
                                         "--bench-output-len", "16", "--metrics-port", str(mport), "--",
                                         *sim_cmd("normal", port, "--model-path", str(weights), "--spec-accept", "2.5",
                                                  "--token-rate", "400")),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        m = wait_for(lambda: (m := scrape(mport)).get("firstlight_bench_output_tokens_per_second", math.nan) > 0
                     and m, 120, "the benchmark's tokens/s in the scrape")
        # the simulator speaks SGLang here, which reports the mean acceptance length only (the alert reads that)
        assert m["firstlight_spec_decoding_mean_acceptance_length"] == 2.5
        assert math.isnan(m["firstlight_spec_decoding_acceptance_rate"])
        assert m["firstlight_serving"] == 1 and m["firstlight_starts_total{}{ready}"] == 1
    finally:
        fl.send_signal(signal.SIGINT)
        try:
            fl.wait(timeout=30)
        finally:
            if fl.poll() is None:
                fl.kill()
