"""--metrics-port: a Prometheus scrape of a cold start, during loading and while serving.

The process-starting tests of this subject; the others: ``tests/unit/report/test_prometheus.py``.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from firstlight.sim.fixtures import free_port
from tests.support.common import Output, firstlight_cmd, require, run_firstlight, sim_cmd, wait_for
from tests.support.prometheus import (
    _one_start,
    _result,
    exporter,  # noqa: F401 (a fixture)
)


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
        output = Output(fl)
        output.wait_event("summary", 60, "READY", verdict="ready")
        serving = wait_for(lambda: (m := scrape(mport)).get("firstlight_ready") == 1 and m, 10, "ready in the scrape")
        assert serving["firstlight_verdict{ready}"] == 1 and serving["firstlight_phase{serving}"] == 1
        assert serving["firstlight_readiness_level"] == 6
        assert 2.5 < serving["firstlight_cold_start_seconds"] < 30
        # every collector of the live watch, as node_exporter reports its own: the process sampler worked, each
        # rung was checked and the generation held, none failed inside firstlight
        assert serving["firstlight_collectors_read_success"] == 1
        assert serving["firstlight_sampler_success{process}"] == 1
        assert serving["firstlight_sampler_samples_total{process}"] > 1
        assert serving["firstlight_sampler_failures_total{process}"] == 0
        rungs = ("port", "health", "models", "generation")
        assert serving["firstlight_probe_success{generation}"] == 1
        assert all(serving[f"firstlight_probe_checks_total{{{rung}}}"] >= 1 for rung in rungs)
        # 3 s of loading: some rung did not hold before READY, and none failed inside firstlight
        assert sum(serving[f"firstlight_probe_failures_total{{{rung}}}"] for rung in rungs) >= 1
        assert all(serving[f"firstlight_probe_errors_total{{{rung}}}"] == 0 for rung in rungs)
        own = [k for k in serving if k.startswith(("firstlight_sampler", "firstlight_probe", "firstlight_collectors"))]
        assert len(own) == 29, own  # docs/prometheus.md: 2 samplers x 4, 4 rungs x 5, and the read's success
        fl.send_signal(signal.SIGINT)
        out, _ = output.rest(timeout=30)
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


def test_promtool_finds_nothing_to_lint_in_the_exposition(exporter):  # noqa: F811
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
