"""What the Python API and the pytest plugin cost. Run by hand:

    .venv/bin/python bench/bench_api.py [--runs 5]

1. Import cost, in a fresh interpreter each time (median of --runs): ``import firstlight.pytest_plugin`` (what every
   pytest run in an environment with firstlight installed pays) against ``import firstlight.api`` (the first use
   of the API) and ``import pytest`` alone.
2. Time to READY of the real llama-server (scripts/setup_llama_server.py's binary and model), median of --runs:
   ``with firstlight.up(...)`` in this process (from the call to entering the block) against
   ``firstlight up --stop-when-ready`` (its cold_start_s, launch to READY, and the whole command's wall time).
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

import firstlight  # noqa: E402
from firstlight.sim.fixtures import free_port  # noqa: E402


def _import_s(statement: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], cwd=REPO, check=True, timeout=60)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _llama() -> dict[str, str]:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"), "--print-paths"],
                       capture_output=True, text=True, timeout=120, check=True)
    paths: dict[str, str] = json.loads(p.stdout)
    return paths


def _cmd(llama: dict[str, str], port: int) -> list[str]:
    return [llama["llama_server"], "-m", llama["model"], "--host", "127.0.0.1", "--port", str(port), "-np", "1",
            "-c", "2048"]


def _api_ready_s(llama: dict[str, str]) -> float:
    t0 = time.perf_counter()
    with firstlight.up(_cmd(llama, free_port()), timeout=300, history=False):
        return time.perf_counter() - t0


def _cli_ready_s(llama: dict[str, str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "firstlight", "up", "--json", "--stop-when-ready", "--no-history",
                        "--", *_cmd(llama, free_port())], cwd=REPO, capture_output=True, text=True, timeout=300)
    summary = json.loads(p.stdout.splitlines()[-1])
    assert summary["verdict"] == "ready", summary
    return float(summary["cold_start_s"]), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    bare = _import_s("pass", args.runs)
    with_pytest = _import_s("import pytest", args.runs)  # loaded anyway wherever the plugin is
    plugin = _import_s("import firstlight.pytest_plugin", args.runs)
    api = _import_s("import firstlight.api", args.runs)
    ms = {k: round(v * 1e3) for k, v in (("bare", bare), ("pytest", with_pytest), ("plugin", plugin), ("api", api))}
    print(f"import, median of {args.runs} fresh interpreters: bare {ms['bare']} ms, pytest {ms['pytest']} ms, "
          f"firstlight.pytest_plugin {ms['plugin']} ms (+{ms['plugin'] - ms['pytest']} over pytest), "
          f"firstlight.api {ms['api']} ms (+{ms['api'] - ms['bare']} over bare)")
    llama = _llama()
    api_s = statistics.median(_api_ready_s(llama) for _ in range(args.runs))
    cli = [_cli_ready_s(llama) for _ in range(args.runs)]
    cold, whole = statistics.median(c for c, _ in cli), statistics.median(w for _, w in cli)
    print(f"llama-server to READY, median of {args.runs}: firstlight.up {api_s:.2f} s (the call to the block: "
          f"preflight, launch, READY); firstlight up --stop-when-ready: launch to READY (cold_start_s) {cold:.2f} s, "
          f"the whole command {whole:.2f} s")


if __name__ == "__main__":
    main()
