"""What the serving checks after READY cost: active checks per minute with and without client traffic, and
firstlight's own CPU while it supervises a serving server.

Run by hand (not in the test suite), on the real llama-server (scripts/setup_llama_server.py first):

    .venv/bin/python bench/bench_serving.py --runs 3 --seconds 30 --interval 10

Per run: `firstlight up --serving-interval I -- llama-server ... --metrics`, READY, then ``--seconds`` idle and
``--seconds`` with a client sending requests back to back. The checks are counted on the server: llama-server
logs one "stop processing: n_tokens = N" line per finished request; firstlight's check (its 5-token prompt, 1
token) has N < 15, the client's requests (a 20-token prompt, 4 tokens) N >= 15. firstlight's CPU is its own
process's (user + system, not its children's) over each phase.
The busy window opens when the client's second request is done (a check sent while idle may be queued behind
the first).
Prints one JSON object per run and the medians.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.sim.fixtures import free_port  # noqa: E402

STOP_LINE = re.compile(r"stop processing: n_tokens = (\d+)")
CLIENT_PROMPT = "Count slowly from one to thirty, one number per line, and never stop: one, two, three, four,"


def llama_paths() -> dict[str, str]:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"), "--print-paths"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"bench_serving: llama-server is not set up: {p.stderr.strip()[-300:]}")
    return dict(json.loads(p.stdout))


def cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def one_run(paths: dict[str, str], seconds: float, interval: float) -> dict[str, Any]:
    port, rport = free_port(), free_port()
    cmd = [sys.executable, "-m", "firstlight", "up", "--json", "--no-preflight", "--no-history",
           "--serving-interval", str(interval), "--serve-readiness", f"127.0.0.1:{rport}", "--",
           paths["llama_server"], "-m", paths["model"], "--host", "127.0.0.1", "--port", str(port), "-np", "1",
           "--metrics", "-c", "2048"]
    fl = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          stdin=subprocess.DEVNULL)
    finished: list[tuple[float, int]] = []

    def read() -> None:
        assert fl.stderr is not None
        for line in fl.stderr:
            m = STOP_LINE.search(line)
            if m:
                finished.append((time.monotonic(), int(m[1])))

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{rport}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or fl.poll() is not None:
                raise SystemExit("bench_serving: no READY")
            time.sleep(0.05)
        t0, c0 = time.monotonic(), cpu_s(fl.pid)
        time.sleep(seconds)  # idle: only firstlight's checks reach the server
        t1, c1 = time.monotonic(), cpu_s(fl.pid)
        sent = 0
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            while time.monotonic() - t1 < seconds:
                client.post("/v1/completions", json={"prompt": CLIENT_PROMPT, "max_tokens": 4, "temperature": 0,
                                                     "ignore_eos": True})
                sent += 1
        t2, c2 = time.monotonic(), cpu_s(fl.pid)
    finally:
        fl.send_signal(signal.SIGTERM)
        try:
            fl.wait(timeout=60)
        except subprocess.TimeoutExpired:
            fl.kill()
            fl.wait()

    def checks(a: float, b: float) -> int:
        return len([n for at, n in finished if a < at <= b and n < 15])

    # A check sent while idle, just before the client began, may be queued behind the client's first request
    # (one slot serves them in turn): the busy window opens when the client's second request is done.
    client_done = sorted(at for at, n in finished if at > t1 and n >= 15)
    t1b = client_done[1] if len(client_done) > 1 else t1

    return {"interval_s": interval, "seconds": seconds,
            "checks_per_min_idle": round(checks(t0, t1) * 60 / (t1 - t0), 2),
            "checks_per_min_busy": round(checks(t1b, t2) * 60 / max(t2 - t1b, 1e-9), 2),
            "client_requests": sent, "client_requests_seen": len([n for at, n in finished if t1 < at <= t2
                                                                  and n >= 15]),
            "cpu_pct_idle": round(100 * (c1 - c0) / (t1 - t0), 2),
            "cpu_pct_busy": round(100 * (c2 - c1) / (t2 - t1), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=10.0)
    args = ap.parse_args()
    paths = llama_paths()
    runs = []
    for _ in range(args.runs):
        r = one_run(paths, args.seconds, args.interval)
        print(json.dumps(r), flush=True)
        runs.append(r)
    keys = ("checks_per_min_idle", "checks_per_min_busy", "cpu_pct_idle", "cpu_pct_busy")
    print(json.dumps({"median": {k: statistics.median(r[k] for r in runs) for k in keys}, "runs": len(runs)}))


if __name__ == "__main__":
    main()
