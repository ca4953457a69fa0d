"""Slow or hung, with evidence: the simulated server reading a real file, on real processes (time-compressed).

The process-starting tests of this subject; the others: ``tests/unit/sim/test_progress.py``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from firstlight.sim.fixtures import free_port, make_weights
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import run_firstlight, sim_cmd

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]


FIXTURES = _FIXTURES


def test_long_log_silence_with_steady_disk_reads_is_never_hung(weights: Path):
    # 8 s without a single log line (the field notes' 8 quiet minutes, compressed) against a 2 s stall timeout.
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--stall-timeout", "2", *FAST, "--",
                       *sim_cmd("slow_disk_silent", port, "--model-path", str(weights), "--load-seconds", "8"))
    assert r.rc == 0, r.stderr[-3000:]
    statuses = [e for e in r.events if e["event"] == "status"]
    assert max(e["since_last_log_s"] or 0 for e in statuses) > 4  # really silent, yet progressing
    # never hung or stalled: starting all along, and the status a tick may print once it is ready (under load, a
    # tick can fall between the verdict and the summary: one CI-like run saw it)
    assert {e["verdict"] for e in statuses} <= {"starting", "ready"}, statuses
    assert statuses[0]["verdict"] == "starting" and r.summary["verdict"] == "ready"
    assert max(e["weights_fraction"] or 0 for e in statuses) > 0.5


def test_a_real_stall_is_hung_after_the_stall_timeout_never_before(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stall-timeout", "3", *FAST, "--",
                       *sim_cmd("hang_after_load", port, "--model-path", str(weights), "--load-seconds", "1"))
    assert r.rc == 2, r.stderr[-3000:]
    s = r.summary
    assert s["verdict"] == "hung" and s["detail"] == "no progress"
    last_progress = s["evidence"][0]  # names the last progress seen (the last weights read), and when
    assert "last progress" in last_progress["value"] and last_progress["signal"] in ("disk", "log", "memory")
    # never before the stall timeout; how long after it depends on the machine's load (bench/ measures it)
    assert 3 <= s["ended_at"] - last_progress["since"] < 60
    assert any("Load weight end" in e["value"] for e in s["evidence"])  # and the last thing the server said


def test_a_busy_wait_is_hung_busy_wait_after_spin_timeout(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stall-timeout", "2", "--spin-timeout", "5", *FAST, "--",
                       *sim_cmd("busy_wait", port, "--model-path", str(weights)))
    assert r.rc == 2, r.stderr[-3000:]
    s = r.summary
    assert s["detail"] == "busy-wait suspected"
    assert s["evidence"][0]["signal"] == "cpu" and "CPU busy" in s["evidence"][0]["value"]
    assert s["elapsed_s"] >= 5  # not before the spin timeout: CPU alone is weak progress


def test_a_worker_that_dies_while_the_parent_lives_is_reported(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stall-timeout", "3", *FAST, "--",
                       *sim_cmd("worker_dies", port, "--model-path", str(weights), "--workers", "2",
                                "--load-seconds", "8"))
    assert r.rc == 2, r.stderr[-3000:]
    warnings = [e for e in r.events if e["event"] == "warning"]
    assert any("died while the server process lives" in w["message"] for w in warnings)
    assert any("died while the server process lives" in e["value"] for e in r.summary["evidence"])


def test_a_gpu_held_by_a_foreign_process_names_it_in_the_failure(tmp_path: Path, weights: Path):
    foreign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        data = json.loads((FIXTURES / "nvml_8gpu_stale_process.json").read_text())
        for d in data["devices"]:
            d["processes"] = [p for p in d["processes"] if p["pid"] == "FOREIGN"]
            for p in d["processes"]:
                p["pid"] = foreign.pid
        snap = tmp_path / "nvml.json"
        snap.write_text(json.dumps(data))
        port = free_port()
        r = run_firstlight("up", "--json", *FAST, "--", *sim_cmd("gpu_occupied", port),
                           env={"FIRSTLIGHT_NVML_SNAPSHOT": str(snap)})
    finally:
        foreign.kill()
        foreign.wait()
    assert r.rc == 1, r.stderr[-3000:]
    s = r.summary
    assert s["failure"] == "gpu_occupied"
    assert f"PID {foreign.pid}" in s["hint"] and "GPU 0" in s["hint"]


def test_eta_is_reported_live_and_counts_down(tmp_path: Path):
    """Live, the weights ETA is there and falls as the load goes on (its accuracy on a constant-rate load is the
    pure test below: the simulator's rate bends when the machine is busy)."""
    model = tmp_path / "model"
    make_weights(model, 128 << 20, shards=8)
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--sample-interval", "0.25", "--", *sim_cmd(
        "slow_disk_silent", port, "--model-path", str(model), "--load-seconds", "10"))
    assert r.rc == 0, r.stderr[-3000:]
    etas = [e["eta_weights_s"] for e in r.events
            if e["event"] == "status" and e.get("eta_weights_s") and 0.25 <= (e["weights_fraction"] or 0) < 0.9]
    assert len(etas) >= 3 and etas[-1] < etas[0], etas


# -- tests' free ports cannot race ----------------------------------------------------------------------------
def test_free_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice():
    import random

    from firstlight.sim.fixtures import _ephemeral_low, free_port

    random.seed(25)  # both processes draw the same candidates: only the reservation keeps them apart
    mine = [free_port() for _ in range(20)]
    code = ("import random; random.seed(25); from firstlight.sim.fixtures import free_port; "
            "print(*(free_port() for _ in range(20)))")
    theirs = [int(p) for p in subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                             timeout=60, check=True).stdout.split()]
    assert len(set(mine)) == 20 and not set(mine) & set(theirs)  # the other process held none of ours
    assert all(p < _ephemeral_low() for p in mine + theirs)
    for p in mine:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # free: nobody listens on it
