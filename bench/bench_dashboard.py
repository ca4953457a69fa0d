"""What the live dashboard costs. Run by hand:

    .venv/bin/python bench/bench_dashboard.py [--seconds 30] [--runs 3]

`firstlight watch` at 1 Hz on a simulated server with 8 worker processes (a tree of 9), its stderr on a
pseudo-terminal (so that the dashboard is on, redrawing at 2 Hz), against the same with `--plain` on the same
kind of terminal. Reported: firstlight's CPU (% of one core, from its own CPU times, after start-up) per mode,
median over --runs, and the dashboard's extra cost. The budget is 1 % of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.sim.fixtures import free_port, make_weights  # noqa: E402


def drain(fd: int, counts: list[int]) -> None:
    """Read the terminal's output so that firstlight never blocks on a full pty buffer."""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            return
        if not data:
            return
        counts[0] += len(data)


def one(model: Path, seconds: float, plain: bool) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "firstlight.sim", "--scenario", "hang", "--port", str(port),
                               "--model-path", str(model), "--workers", "8", "--load-seconds", "2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    master, slave = pty.openpty()
    written = [0]
    reader = threading.Thread(target=drain, args=(master, written), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 10
        while len(psutil.Process(server.pid).children()) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        cmd = [sys.executable, "-m", "firstlight", "watch", f"http://127.0.0.1:{port}", "--pid", str(server.pid),
               "--sample-interval", "1", "--timeout", str(seconds + 3), "--stall-timeout", "3600", "--no-history",
               *(["--plain"] if plain else [])]
        fl = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL,
                              env={**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"})
        proc = psutil.Process(fl.pid)
        time.sleep(3)  # past interpreter start-up: measure the steady state
        c0, t0, b0 = proc.cpu_times(), time.monotonic(), written[0]
        while fl.poll() is None:
            try:
                c1, t1, b1 = proc.cpu_times(), time.monotonic(), written[0]
            except psutil.Error:
                break
            time.sleep(0.5)
        fl.wait()
        return {"cpu_percent": (c1.user + c1.system - c0.user - c0.system) / (t1 - t0) * 100,
                "terminal_bytes_per_s": (b1 - b0) / (t1 - t0)}
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        os.close(slave)
        os.close(master)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    results: dict[str, list[dict[str, float]]] = {"dashboard": [], "plain": []}
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "model"
        make_weights(model, 64 << 20)
        for _ in range(args.runs):  # interleaved, so that a busy spell of the machine hits both modes
            for mode in ("dashboard", "plain"):
                results[mode].append(one(model, args.seconds, plain=mode == "plain"))
    out: dict[str, float] = {"runs": args.runs, "seconds": args.seconds, "tree_processes": 9}
    for mode, rs in results.items():
        out[f"{mode}_cpu_percent_median"] = statistics.median(r["cpu_percent"] for r in rs)
        out[f"{mode}_terminal_bytes_per_s_median"] = statistics.median(r["terminal_bytes_per_s"] for r in rs)
    out["dashboard_extra_cpu_percent"] = out["dashboard_cpu_percent_median"] - out["plain_cpu_percent_median"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
