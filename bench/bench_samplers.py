"""Sampler overhead and hang-detection delay. Run by hand:

    .venv/bin/python bench/bench_samplers.py [--seconds 30] [--runs 5]

1. Overhead: `firstlight watch` at 1 Hz on a simulated server with 8 worker processes (a tree of 9), for
   --seconds: CPU used by firstlight (% of one core, from its own CPU times) and its peak RSS; and the cost
   of one process-tree sample measured in-process (median of 100).
2. Hang detection delay: the `hang_after_load` scenario with --stall-timeout 5 at --sample-interval 1:
   (moment of the `hung` verdict - moment of the last progress) - stall timeout, over --runs runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.samplers.process import ProcessTreeSampler  # noqa: E402
from firstlight.sim.fixtures import free_port, make_weights  # noqa: E402


def sim(scenario: str, port: int, model: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "firstlight.sim", "--scenario", scenario, "--port", str(port),
                             "--model-path", str(model), *extra], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def overhead(model: Path, seconds: float) -> dict[str, float]:
    port = free_port()
    server = sim("hang", port, model, "--workers", "8", "--load-seconds", "2")
    try:
        deadline = time.monotonic() + 10
        while len(psutil.Process(server.pid).children()) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = ProcessTreeSampler(server.pid)
        costs = []
        for _ in range(100):
            t0 = time.perf_counter()
            tree.sample()
            costs.append(time.perf_counter() - t0)
        fl = subprocess.Popen([sys.executable, "-m", "firstlight", "watch", f"http://127.0.0.1:{port}", "--pid",
                               str(server.pid), "--sample-interval", "1", "--timeout", str(seconds),
                               "--stall-timeout", "3600", "--json"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        proc = psutil.Process(fl.pid)
        time.sleep(3)  # past interpreter start-up: measure the steady state
        c0, t0 = proc.cpu_times(), time.monotonic()
        peak = 0
        while fl.poll() is None:
            try:
                peak = max(peak, proc.memory_info().rss)
                c1, t1 = proc.cpu_times(), time.monotonic()
            except psutil.Error:
                break
            time.sleep(0.5)
        fl.wait()
        cpu = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0)
        return {"tree_processes": 1 + len(psutil.Process(server.pid).children(recursive=True)),
                "sample_cost_median_ms": statistics.median(costs) * 1000,
                "firstlight_cpu_percent_of_one_core": cpu * 100,
                "firstlight_peak_rss_mb": peak / 1e6}
    finally:
        os.killpg(server.pid, signal.SIGKILL)  # the simulator and its 8 workers
        server.wait()


def hang_delay(model: Path, runs: int) -> dict[str, float]:
    delays = []
    for _ in range(runs):
        port = free_port()
        p = subprocess.run([sys.executable, "-m", "firstlight", "up", "--json", "--stall-timeout", "5",
                            "--sample-interval", "1", "--quiet-server", "--",
                            sys.executable, "-m", "firstlight.sim", "--scenario", "hang_after_load", "--port",
                            str(port), "--model-path", str(model), "--load-seconds", "1"],
                           capture_output=True, text=True, timeout=120)
        s = json.loads(p.stdout.splitlines()[-1])
        assert s["verdict"] == "hung", s
        delays.append(s["ended_at"] - s["evidence"][0]["since"] - 5)
    return {"hang_detection_delay_median_s": statistics.median(delays), "hang_detection_delay_max_s": max(delays),
            "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "model"
        make_weights(model, 64 << 20)
        out = {**overhead(model, args.seconds), **hang_delay(model, args.runs)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
