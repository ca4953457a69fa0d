"""A sidecar's ``--timeout`` is no new start (issue 32): one 10 s start watched with ``--timeout 2`` counted
5 starts in ``firstlight_starts_total``, and the shipped restart-loop alert (3 in 15 min) fired. A real sidecar
(``watch --pid --serve-readiness --metrics-port``) and a real slow simulator."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, sim_cmd, wait_for


def _starts(port: int) -> dict[str, float] | None:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return None
    return {s.labels["verdict"]: s.value for f in text_string_to_metric_families(text) if f.name == "firstlight_starts"
            for s in f.samples if s.name == "firstlight_starts_total" and s.value}


def test_one_slow_start_through_several_timeouts_is_one_start(weights: Path):
    port, mport = free_port(), free_port()
    engine = subprocess.Popen([*sim_cmd("normal", port), "--model-path", str(weights), "--load-seconds", "10"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                              start_new_session=True)
    sidecar = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid", str(engine.pid),
                                              "--timeout", "2", "--no-history", "--poll-min", "0.05",
                                              "--serving-interval", "0", "--serve-readiness", "127.0.0.1:0",
                                              "--metrics-port", str(mport)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        starts = wait_for(lambda: (s := _starts(mport)) is not None and "ready" in s and s, 120,
                          "the slow start's READY on /metrics")
        assert starts == {"ready": 1.0}, starts  # not one timeout per --timeout before it
    finally:
        sidecar.terminate()
        sidecar.wait(30)
        engine.kill()
        engine.wait()
