"""How long hostile servers hold firstlight, through the real CLI. Run by hand:

    .venv/bin/python bench/bench_wire.py [--runs 5]

1. `probe --timeout 5` against a server that sends its status line and then one header byte a second:
   wall-clock seconds until the command returns (interpreter start-up included).
2. `probe --timeout 2.5 --level generation` against a server that takes 1.5 s per answer: seconds to return.
3. `watch URL` (engine unknown) against a server whose first 2 generations are 503 and whose engine-specific
   endpoints never answer: seconds from start to the READY line.
Medians (and max) over --runs; the fault servers are tests/faults.py's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.faults import fault_server  # noqa: E402

CLI = [sys.executable, "-m", "firstlight"]


def timed(args: list[str], limit: float = 300.0) -> tuple[float, int]:
    t0 = time.monotonic()
    p = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=limit, stdin=subprocess.DEVNULL)
    return time.monotonic() - t0, p.returncode


def ready_after(args: list[str]) -> float | None:
    p = subprocess.run([*CLI, *args, "--json"], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    for line in p.stdout.splitlines():
        event = json.loads(line)
        if event.get("event") == "summary" and event.get("ready_at"):
            return float(event["ready_at"]) - float(event["started_at"])
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    figures: dict[str, list[float]] = {"header_trickle_probe_timeout_5": [], "slow_rungs_probe_timeout_2.5": [],
                                       "ready_with_identify_hanging": []}
    for _ in range(runs):
        with fault_server("header_trickle") as s:
            figures["header_trickle_probe_timeout_5"].append(timed(["probe", s.url, "--timeout", "5"])[0])
        with fault_server("slow", delay=1.5) as s:
            figures["slow_rungs_probe_timeout_2.5"].append(
                timed(["probe", s.url, "--timeout", "2.5", "--level", "generation"])[0])
        with fault_server("identify_hangs", fail_first=2) as s:
            took = ready_after(["watch", s.url, "--timeout", "120", "--poll-min", "0.1"])
            figures["ready_with_identify_hanging"].append(took if took is not None else float("nan"))
    for name, values in figures.items():
        print(f"{name:34} median {statistics.median(values):6.2f} s  max {max(values):6.2f} s  ({runs} runs)")


if __name__ == "__main__":
    main()
