"""Readiness detection latency: READY reported by firstlight minus the moment the server could first serve.

Run by hand (not in the test suite):

    .venv/bin/python bench/bench_readiness.py --runs 20                 # the simulated server
    .venv/bin/python bench/bench_readiness.py --runs 10 --engine llama  # the real llama-server (setup first)

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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.sim.server import free_port, make_weights  # noqa: E402


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


def one_run(engine: str, workdir: Path, extra: list[str]) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ready_file = workdir / f"ready-{port}"
    if engine == "sim":
        server = [sys.executable, "-m", "firstlight.sim", "--scenario", "normal", "--port", str(port),
                  "--model-path", str(workdir / "model"), "--load-seconds", "2", "--ready-file", str(ready_file)]
    else:
        paths = json.loads(subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"),
                                           "--print-paths"], capture_output=True, text=True, check=True).stdout)
        server = [paths["llama_server"], "-m", paths["model"], "--host", "127.0.0.1", "--port", str(port),
                  "-c", "2048", "-np", "1"]
    ref = Reference(url, 120) if engine != "sim" else None
    # llama: --detach, so that the server outlives firstlight's READY until the reference loop has its answer.
    after = "--detach" if ref is not None else "--stop-when-ready"
    cmd = [sys.executable, "-m", "firstlight", "up", "--json", after, "--quiet-server", *extra, "--", *server]
    t_launch = time.time()
    if ref is not None:
        ref.start()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    summary = json.loads(p.stdout.splitlines()[-1])
    if summary["verdict"] != "ready":
        raise SystemExit(f"run failed: {summary['verdict']}: {summary.get('evidence')}\n{p.stderr[-2000:]}")
    if ref is not None:
        ref.join(30)
        os.killpg(summary["pid"], signal.SIGKILL)
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
    }


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--engine", choices=["sim", "llama"], default="sim")
    ap.add_argument("extra", nargs="*", help="extra firstlight options")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        workdir = Path(d)
        make_weights(workdir / "model", 64 << 20)
        runs = []
        for i in range(args.runs):
            r = one_run(args.engine, workdir, args.extra)
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
    }
    early = [r["health_only_early_s"] for r in runs if r["health_only_early_s"] is not None]
    if early:
        out["health_only_says_ready_before_a_generation_works_median_s"] = statistics.median(early)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
