"""Readiness detection latency: READY reported by firstlight minus the moment the server could first serve.

Run by hand (not in the test suite):

    .venv/bin/python bench/bench_readiness.py --runs 20                 # the simulated server
    .venv/bin/python bench/bench_readiness.py --runs 10 --engine llama  # the real llama-server (setup first)
    .venv/bin/python bench/bench_readiness.py --runs 3 --engine vllm    # real vLLM on the CPU (setup_vllm.py)
    .venv/bin/python bench/bench_readiness.py --runs 3 --engine vllm --warm  # the same, on one compile cache

For vLLM each run gets an empty VLLM_CACHE_ROOT (a compile-cache-cold start) unless --warm, where the runs
share one (the first run fills it); the output adds the cold-start time (launch to READY) and firstlight's
own CPU (% of one core over the watch) and peak RSS while it watched the vLLM tree.

The reference moment:
- simulator: the server itself records when it flips to serving (``--ready-file``);
- llama-server: the first generation that succeeds when probed by a tight independent loop (every 20 ms),
  in this process, at the same time as firstlight.

It also reports the requests firstlight sent while the server was loading, and what two naive checks would
have said on the same runs: a `curl` loop every 30 s (detection at the first poll after the reference
moment, polls at 0, 30, 60 s after launch) and a `/health`-only check (measured: the first 200 from
/health seen by the independent loop, compared with the first working generation).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.sim.fixtures import free_port, make_weights  # noqa: E402


class Reference(threading.Thread):
    """A tight independent loop: first /health 200 and first successful generation, in epoch seconds."""

    def __init__(self, url: str, deadline_s: float) -> None:
        super().__init__(daemon=True)
        self.url, self.deadline = url, time.monotonic() + deadline_s
        self.health_ok: float | None = None
        self.generation_ok: float | None = None

    def run(self) -> None:
        with httpx.Client(timeout=httpx.Timeout(2.0, connect=0.2)) as c:
            while time.monotonic() < self.deadline and self.generation_ok is None:
                try:
                    if self.health_ok is None and c.get(self.url + "/health").status_code == 200:
                        self.health_ok = time.time()
                    r = c.post(self.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 1, "temperature": 0})
                    if r.status_code == 200 and r.json()["choices"][0]["text"] is not None:
                        self.generation_ok = time.time()
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                time.sleep(0.02)


def vllm_server(port: int, cache: Path) -> tuple[list[str], dict[str, str]]:
    paths = json.loads(subprocess.run([sys.executable, str(REPO / "scripts" / "setup_vllm.py"), "--print-paths"],
                                      capture_output=True, text=True, check=True).stdout)
    return ([paths["python"], "-m", "vllm.entrypoints.openai.api_server", "--model", paths["model"], "--host",
             "127.0.0.1", "--port", str(port), "--max-model-len", "2048"],
            {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CACHE_ROOT": str(cache), "HF_HUB_OFFLINE": "1"})


def watch_own_usage(p: subprocess.Popen[str]) -> dict[str, float]:
    """firstlight's own CPU seconds and peak RSS, sampled until it exits (its children are not counted)."""
    proc = psutil.Process(p.pid)
    cpu = rss = 0.0
    while p.poll() is None:
        try:
            t = proc.cpu_times()
            cpu = t.user + t.system
            rss = max(rss, float(proc.memory_info().rss))
        except psutil.Error:
            break
        time.sleep(0.5)
    return {"cpu_s": cpu, "peak_rss": rss}


def one_run(engine: str, workdir: Path, extra: list[str], warm: bool = False) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ready_file = workdir / f"ready-{port}"
    env = dict(os.environ)
    if engine == "vllm":
        cache = workdir / ("vllm-cache" if warm else f"vllm-cache-{port}")
        server, vllm_env = vllm_server(port, cache)
        env.update(vllm_env)
    elif engine == "sim":
        server = [sys.executable, "-m", "firstlight.sim", "--scenario", "normal", "--port", str(port),
                  "--model-path", str(workdir / "model"), "--load-seconds", "2", "--ready-file", str(ready_file)]
    else:
        paths = json.loads(subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"),
                                           "--print-paths"], capture_output=True, text=True, check=True).stdout)
        server = [paths["llama_server"], "-m", paths["model"], "--host", "127.0.0.1", "--port", str(port),
                  "-c", "2048", "-np", "1"]
    ref = Reference(url, 1800 if engine == "vllm" else 120) if engine != "sim" else None
    # llama: --detach, so that the server outlives firstlight's READY until the reference loop has its answer.
    after = "--detach" if ref is not None else "--stop-when-ready"
    cmd = [sys.executable, "-m", "firstlight", "up", "--json", after, "--quiet-server", *extra, "--", *server]
    t_launch = time.time()
    if ref is not None:
        ref.start()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as p:
        usage: dict[str, float] = {}
        watcher = threading.Thread(target=lambda: usage.update(watch_own_usage(p)), daemon=True)
        watcher.start()
        stdout, stderr = p.communicate(timeout=1800)
        watcher.join(5)
    t_end = time.time()
    summary = json.loads(stdout.splitlines()[-1])
    if summary["verdict"] != "ready":
        raise SystemExit(f"run failed: {summary['verdict']}: {summary.get('evidence')}\n{stderr[-2000:]}")
    if ref is not None:
        ref.join(30)
        os.killpg(summary["pid"], signal.SIGKILL)
        if summary.get("server_log"):  # --detach: the server's output file outlives firstlight; not ours to keep
            Path(summary["server_log"]).unlink(missing_ok=True)
        could_serve = ref.generation_ok
        health_ok = ref.health_ok
    else:
        could_serve = float(ready_file.read_text())
        health_ok = None
    assert could_serve is not None
    reqs = summary["requests"]
    return {
        "latency_s": summary["ready_at"] - could_serve,
        "requests": sum(reqs.values()),
        "requests_by_level": reqs,
        "load_s": could_serve - t_launch,
        "first_generation_s": summary["first_generation"]["latency_s"],
        "naive30_latency_s": 30 * math.ceil((could_serve - t_launch) / 30) - (could_serve - t_launch),
        "health_only_early_s": None if health_ok is None else could_serve - health_ok,
        "cold_start_s": summary["ready_at"] - summary["started_at"],
        "firstlight_cpu_pct": 100 * usage.get("cpu_s", 0.0) / max(t_end - t_launch, 1e-3),
        "firstlight_peak_rss_mb": usage.get("peak_rss", 0.0) / 2**20,
        "procs": summary.get("progress", {}).get("procs"),
    }


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--engine", choices=["sim", "llama", "vllm"], default="sim")
    ap.add_argument("--warm", action="store_true", help="vLLM: share one compile cache across the runs")
    ap.add_argument("extra", nargs="*", help="extra firstlight options")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        workdir = Path(d)
        make_weights(workdir / "model", 64 << 20)
        runs = []
        for i in range(args.runs):
            r = one_run(args.engine, workdir, args.extra, args.warm)
            runs.append(r)
            print(f"run {i + 1}: detection {r['latency_s'] * 1000:.0f} ms, {r['requests']} requests, "
                  f"load {r['load_s']:.2f} s", file=sys.stderr)
    lat = [r["latency_s"] for r in runs]
    out = {
        "engine": args.engine,
        "runs": len(runs),
        "detection_latency_median_s": statistics.median(lat),
        "detection_latency_p95_s": pct(lat, 0.95),
        "requests_median": statistics.median(r["requests"] for r in runs),
        "requests_per_loading_second_median": statistics.median(r["requests"] / max(r["load_s"], 1e-3) for r in runs),
        "load_median_s": statistics.median(r["load_s"] for r in runs),
        "naive_curl_30s_latency_median_s": statistics.median(r["naive30_latency_s"] for r in runs),
        "cold_start_median_s": statistics.median(r["cold_start_s"] for r in runs),
        "firstlight_cpu_pct_median": statistics.median(r["firstlight_cpu_pct"] for r in runs),
        "firstlight_peak_rss_mb_max": max(r["firstlight_peak_rss_mb"] for r in runs),
        "procs_median": statistics.median(r["procs"] or 0 for r in runs),
        "first_generation_median_s": statistics.median(r["first_generation_s"] for r in runs),
        "per_run": runs,
    }
    early = [r["health_only_early_s"] for r in runs if r["health_only_early_s"] is not None]
    if early:
        out["health_only_says_ready_before_a_generation_works_median_s"] = statistics.median(early)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
