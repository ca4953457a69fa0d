"""`firstlight up` end to end against real engine output: the simulator prints real startup logs from
shared/logs with their original timing (compressed), opening its port and flipping /health where that engine
does."""

from __future__ import annotations

import pytest

from firstlight.sim.fixtures import free_port
from firstlight.sim.server import REAL_LOG
from tests.support.common import SHARED, run_firstlight, sim_cmd

LOGS = SHARED / "logs"
FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]
needs_logs = pytest.mark.usefixtures("shared_logs")


def up_replay(log: str, *opts: str, speed: str = "20") -> object:
    port = free_port()
    return run_firstlight("up", "--json", "--stop-when-ready", *FAST, *opts, "--",
                          *sim_cmd("normal", port, "--replay-log", log, "--speed", speed))


def test_real_sglang_eagle_start_is_ready_with_its_phases():
    r = up_replay(str(REAL_LOG))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["engine"] == "sglang"
    names = [p["name"] for p in s["phases"]]
    for phase in ("weights_loading", "kv_cache", "cuda_graph", "http_listening", "ready"):
        assert phase in names, names
    # READY comes from our generation, after the engine's own ready line.
    assert s["engine_ready_at"] is not None and s["ready_at"] >= s["engine_ready_at"]


@needs_logs
def test_real_sglang_oom_during_weight_load_is_failed_oom():
    r = up_replay(str(LOGS / "sglang-rocm-qwen36-35b-oom-weightload.log"))
    assert r.rc == 1, r.stderr[-3000:]
    s = r.summary
    assert s["failure"] == "oom" and s["phase"] == "weights_loading"
    assert any("OutOfMemoryError" in e["value"] or "out of memory" in e["value"] for e in s["evidence"])


@needs_logs
def test_real_llamacpp_hang_with_health_503_is_hung_not_ready():
    r = up_replay(str(LOGS / "llamacpp-hang-loading-health-503.log"), "--stall-timeout", "3")
    assert r.rc == 2, r.stderr[-3000:]
    s = r.summary
    assert s["verdict"] == "hung"
    assert s["level"] in ("port", "http")  # the port answers, /health says 503 "Loading model" forever
