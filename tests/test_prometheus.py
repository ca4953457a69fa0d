"""--metrics-port: a Prometheus scrape of a cold start, during loading and while serving."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from firstlight.sim.server import free_port
from tests.conftest import firstlight_cmd, run_firstlight, sim_cmd, wait_for


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
