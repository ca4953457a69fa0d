"""What watching costs: firstlight's own CPU and peak RSS while it watches a 9-process tree. Run by hand:

    .venv/bin/python bench/bench_cost.py [--runs 3] [--seconds 60] [--repo PATH]

Three cases, each --runs times (medians quoted):
- ``watch_busy``: ``firstlight watch --pid`` of a root and 8 children, each with 4 threads, one of them spinning a
  quarter of the time (bench_anatomy's busy tree: the per-thread reads run every tick);
- ``watch_idle``: the same tree asleep (nothing moves: the idle back-off applies);
- ``up_busy``: ``firstlight up`` launching the busy tree (the launcher's tree, the adopted processes and the
  process-group check each tick);
- ``vllm`` (only when named in --cases): a real vLLM start (scripts/setup_vllm.py) to READY, ``-O0``.
The server's URL never answers (port 9), so the probes climb no higher than the port, as while an engine loads.

firstlight's CPU is the utime+stime of the firstlight process and its own children (the backstop watchdog; not
the server's tree) over --seconds, after 5 s of start-up, in % of one core: CPU time, not wall time, so a loaded
machine changes it little. Peak RSS is firstlight's own, sampled every 0.5 s. ``--repo`` runs another checkout's
firstlight (before/after comparisons).
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
sys.path.insert(0, str(REPO / "bench"))

from bench_anatomy import BUSY_TREE, _stop, _tree  # noqa: E402

WARM_S = 5.0


def _firstlight_cpu(fl: psutil.Process, server_pid: int | None, reaped: bool = True) -> float:
    """CPU seconds of firstlight and its own live children (not the server's tree); ``reaped``: with the children
    it reaped (not once it reaped the server)."""
    t = fl.cpu_times()
    total = t.user + t.system + ((t.children_user + t.children_system) if reaped else 0.0)
    for c in fl.children():
        if c.pid == server_pid:
            continue
        try:
            if c.ppid() == fl.pid and "firstlight" in " ".join(c.cmdline()):
                ct = c.cpu_times()
                total += ct.user + ct.system
        except psutil.Error:
            pass
    return total


def _measure(argv: list[str], repo: Path, seconds: float, server: int | None) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(repo))
    fl = subprocess.Popen(argv, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc = psutil.Process(fl.pid)
        time.sleep(WARM_S)  # past interpreter start-up and imports: the steady state
        server_pid = server
        if server_pid is None:  # `up`: the server is firstlight's child running the tree
            kids = [c for c in proc.children() if "firstlight" not in " ".join(c.cmdline())]
            server_pid = kids[0].pid if kids else None
        c0, t0, peak = _firstlight_cpu(proc, server_pid), time.monotonic(), 0
        while time.monotonic() - t0 < seconds:
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.5)
        c1, t1 = _firstlight_cpu(proc, server_pid), time.monotonic()
        return {"cpu_pct": 100 * (c1 - c0) / (t1 - t0), "peak_rss_mb": peak / 1e6}
    finally:
        if fl.poll() is None:
            fl.terminate()  # `up` stops the tree it launched
            try:
                fl.wait(30)
            except subprocess.TimeoutExpired:
                fl.kill()
                fl.wait()


def watch_case(repo: Path, seconds: float, busy: bool) -> dict[str, float]:
    root = _tree(busy)
    try:
        return _measure([sys.executable, "-m", "firstlight", "watch", "http://127.0.0.1:9", "--pid", str(root.pid),
                         "--sample-interval", "1", "--timeout", str(seconds + 60), "--stall-timeout", "3600",
                         "--no-history", "--json"], repo, seconds, root.pid)
    finally:
        _stop(root)


def up_case(repo: Path, seconds: float) -> dict[str, float]:
    return _measure([sys.executable, "-m", "firstlight", "up", "--url", "http://127.0.0.1:9", "--sample-interval",
                     "1", "--timeout", str(seconds + 60), "--stall-timeout", "3600", "--no-history", "--json", "--",
                     sys.executable, "-c", BUSY_TREE, BUSY_TREE.replace("if len(sys.argv) > 1:", "if False:")],
                    repo, seconds, None)


def vllm_case(repo: Path) -> dict[str, float]:
    """One real vLLM start (CPU build, SmolLM2-135M, ``-O0``: no compile) under ``firstlight up --stop-when-ready``:
    firstlight's CPU from 5 s after the launch to its last look before it exits (the server it reaps is not
    counted), over that window."""
    setup = json.loads(subprocess.run([sys.executable, str(REPO / "scripts" / "setup_vllm.py"), "--print-paths"],
                                      capture_output=True, text=True, timeout=300, check=True).stdout)
    from firstlight.sim.fixtures import free_port
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryFile("w+") as stdout:
        env = dict(os.environ, PYTHONPATH=str(repo), VLLM_CPU_KVCACHE_SPACE="1", VLLM_CACHE_ROOT=cache,
                   VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        fl = subprocess.Popen([sys.executable, "-m", "firstlight", "up", "--json", "--stop-when-ready", "--no-history",
                               "--sample-interval", "1", "--timeout", "900", "--", setup["python"], "-m",
                               "vllm.entrypoints.openai.api_server", "--model", setup["model"], "--host", "127.0.0.1",
                               "--port", str(free_port()), "--max-model-len", "2048", "-O0"],
                              cwd=repo, env=env, stdout=stdout, stderr=subprocess.DEVNULL)  # a file: never full
        proc = psutil.Process(fl.pid)
        time.sleep(WARM_S)
        server = [c.pid for c in proc.children() if "vllm" in " ".join(c.cmdline())]
        c0, t0 = _firstlight_cpu(proc, server[0] if server else None, reaped=False), time.monotonic()
        c1, t1, peak = c0, t0, 0
        while fl.poll() is None:
            try:
                c1, t1 = _firstlight_cpu(proc, server[0] if server else None, reaped=False), time.monotonic()
                peak = max(peak, proc.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(0.5)
        fl.wait()
        stdout.seek(0)
        summary = json.loads(stdout.read().strip().splitlines()[-1])
    return {"cpu_pct": 100 * (c1 - c0) / (t1 - t0), "peak_rss_mb": peak / 1e6,
            "ready_s": summary.get("cold_start_s") or -1.0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose firstlight is measured")
    ap.add_argument("--cases", default="watch_busy,watch_idle,up_busy", help="also: vllm (a real vLLM -O0 start)")
    args = ap.parse_args()
    cases = {"watch_busy": lambda: watch_case(args.repo, args.seconds, True),
             "watch_idle": lambda: watch_case(args.repo, args.seconds, False),
             "up_busy": lambda: up_case(args.repo, args.seconds),
             "vllm": lambda: vllm_case(args.repo)}
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in args.cases.split(",")}
    for _ in range(args.runs):
        for name in runs:
            runs[name].append(cases[name]())
            print(json.dumps({name: {k: round(v, 2) for k, v in runs[name][-1].items()}}), flush=True)
    out: dict[str, Any] = {"repo": str(args.repo), "seconds": args.seconds, "runs": args.runs}
    for name, rs in runs.items():
        out[name] = {"cpu_pct_median": round(statistics.median(r["cpu_pct"] for r in rs), 2),
                     "cpu_pct_runs": [round(r["cpu_pct"], 2) for r in rs],
                     "peak_rss_mb_median": round(statistics.median(r["peak_rss_mb"] for r in rs), 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
