"""The anatomy's attribution error and what its sampling costs. Run by hand:

    .venv/bin/python bench/bench_anatomy.py [--runs 3] [--seconds 30]

1. Attribution error: `firstlight up` on the simulated server's `anatomy_disk` and `anatomy_cpu` scenarios (3 s with
   nothing moving, the weights read at a known rate for 4 s, 2 s of CPU): each phase's attributed seconds against
   the injected ones (|error| / injected), and whether the bound was named right, over --runs runs each.
2. Per-thread sampling cost on a 9-process tree (a root and 8 children, each with 4 threads, one busy a quarter of
   the time): one process-tree sample with the per-thread read against without it (median of 50 in-process samples).
3. firstlight's own CPU (% of one core, from its CPU times) and peak RSS while `watch`ing that busy 9-process tree at
   1 Hz for --seconds, and an idle one (8 sleeping workers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.samplers.process import ProcessTreeSampler  # noqa: E402
from firstlight.sim.fixtures import free_port, make_weights  # noqa: E402

INJECTED = {"distributed_init": (3.0, "idle"), "weights_loading": (4.0, None), "kv_cache": (2.0, "cpu")}
BUSY_TREE = """
import os, subprocess, sys, threading, time
def spin():  # a quarter of a core each: 9 of them load the machine without starving it
    while True:
        t = time.monotonic()
        while time.monotonic() - t < 0.05:
            pass
        time.sleep(0.15)
for _ in range(3):
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
threading.Thread(target=spin, daemon=True).start()
if len(sys.argv) > 1:
    kids = [subprocess.Popen([sys.executable, "-c", sys.argv[1]]) for _ in range(8)]
time.sleep(3600)
"""


def attribution(model: Path, runs: int) -> dict[str, Any]:
    errors: dict[str, list[float]] = {k: [] for k in INJECTED}
    right = total = 0
    wrong: list[str] = []
    for _ in range(runs):
        for scenario, weights_bound in (("anatomy_disk", "disk"), ("anatomy_cpu", "loader_cpu")):
            for f in model.iterdir():  # cold: the throttled reader sets the pace, not the page cache
                with open(f, "rb") as fh:
                    os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            p = subprocess.run([sys.executable, "-m", "firstlight", "up", "--json", "--stop-when-ready",
                                "--no-history", "--poll-min", "0.05", "--sample-interval", "0.2", "--",
                                sys.executable, "-m", "firstlight.sim", "--scenario", scenario, "--dialect", "vllm",
                                "--port", str(free_port()), "--model-path", str(model), "--load-seconds", "4"],
                               capture_output=True, text=True, timeout=300)
            summary = json.loads(p.stdout.strip().splitlines()[-1])
            phases = {x["name"]: x for x in summary["anatomy"]["phases"]}
            for name, (seconds, bound) in INJECTED.items():
                got = phases[name]
                errors[name].append(abs(got["seconds"] - seconds) / seconds)
                total += 1
                ok = got["bound"] == (bound or weights_bound)
                right += ok
                if not ok:
                    wrong.append(f"{scenario} {name}: {got['bound']} ({got['evidence'][0]['value']})")
    return {"median_error": {k: round(statistics.median(v), 4) for k, v in errors.items()},
            "max_error": {k: round(max(v), 4) for k, v in errors.items()}, "bounds_right": f"{right}/{total}",
            "wrong": wrong}


IDLE_TREE = """
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]) for _ in range(8)]
time.sleep(3600)
"""


def _tree(busy: bool) -> subprocess.Popen[bytes]:
    """A root and 8 children: each with 4 threads, one spinning (busy), or all asleep."""
    argv = [sys.executable, "-c", BUSY_TREE, BUSY_TREE.replace("if len(sys.argv) > 1:", "if False:")] if busy \
        else [sys.executable, "-c", IDLE_TREE]
    root = subprocess.Popen(argv, start_new_session=True)
    deadline = time.monotonic() + 30
    while len(psutil.Process(root.pid).children()) < 8 and time.monotonic() < deadline:
        time.sleep(0.1)
    return root


def _stop(root: subprocess.Popen[bytes]) -> None:
    procs = [psutil.Process(root.pid), *psutil.Process(root.pid).children(recursive=True)]
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)


def sample_cost() -> dict[str, float]:
    root = _tree(busy=True)
    try:
        out = {}
        for label, per_thread in (("with_threads_ms", True), ("without_threads_ms", False)):
            s = ProcessTreeSampler(root.pid)
            if not per_thread:
                s._threads.busiest = lambda now, infos: (0.0, "", "")  # type: ignore[method-assign]
            costs = []
            for _ in range(50):
                t0 = time.perf_counter()
                s.sample()
                costs.append(time.perf_counter() - t0)
                time.sleep(0.2)  # CPU accrues between samples, as at 1 Hz: the busy processes pass the filter
            out[label] = round(statistics.median(costs) * 1e3, 2)
        return out
    finally:
        _stop(root)


def watch_cost(seconds: float, busy: bool) -> dict[str, float]:
    root = _tree(busy)
    try:
        fl = subprocess.Popen([sys.executable, "-m", "firstlight", "watch", "http://127.0.0.1:9", "--pid",
                               str(root.pid), "--sample-interval", "1", "--timeout", str(seconds + 30),
                               "--stall-timeout", "3600", "--no-history", "--json"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        proc = psutil.Process(fl.pid)
        time.sleep(5)  # past interpreter start-up: the steady state
        c0, t0, peak = proc.cpu_times(), time.monotonic(), 0
        while time.monotonic() - t0 < seconds:
            peak = max(peak, proc.memory_info().rss)
            time.sleep(1)
        c1, t1 = proc.cpu_times(), time.monotonic()
        fl.kill()
        fl.wait()
        cpu = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0)
        return {"cpu_pct_of_a_core": round(cpu * 100, 2), "peak_rss_mb": round(peak / 1e6, 1)}
    finally:
        _stop(root)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--skip-attribution", action="store_true")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "w"
        make_weights(model, 200_000_000)
        if not args.skip_attribution:
            out["attribution"] = attribution(model, args.runs)
            print(json.dumps(out["attribution"]), flush=True)
    out["sample_cost"] = sample_cost()
    print(json.dumps(out["sample_cost"]), flush=True)
    out["watch_busy_tree"] = watch_cost(args.seconds, busy=True)
    print(json.dumps(out["watch_busy_tree"]), flush=True)
    out["watch_idle_tree"] = watch_cost(args.seconds, busy=False)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
