"""How good the forecast is on the real llama-server. Run by hand (needs ``python scripts/setup_llama_server.py``):

    .venv/bin/python bench/bench_forecast.py [--starts 8]

``firstlight up --stop-when-ready`` starts llama-server with SmolLM2-135M ``--starts`` times on one fresh history (one
thread, ``-c 2048``, the weights in the page cache as a restart finds them); each start from the second on is
forecast from the ones before it. Printed: per start its forecast, what it took and the error; then the median of the
absolute errors of the whole start and of each phase, and the median error (the bias). The memory fit's KV cache is
checked against llama.cpp's own ``llama_kv_cache: size`` line once (the byte count, not a timing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_serving import llama_paths  # noqa: E402

from firstlight.sim.fixtures import free_port  # noqa: E402

MIB = 1 << 20


def _up(paths: dict[str, str], history: Path, port: int) -> tuple[dict, str]:
    cmd = [sys.executable, "-m", "firstlight", "up", "--json", "--stop-when-ready", "--history", str(history),
           "--margin", "10", "--", paths["llama_server"], "-m", paths["model"], "--host", "127.0.0.1", "--port",
           str(port), "-np", "1", "-c", "2048", "-lv", "4"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                       env={**os.environ, "LLAMA_ARG_THREADS": "1"})
    if p.returncode != 0:
        sys.exit(f"bench_forecast: a start failed (exit {p.returncode}): {p.stderr[-500:]}")
    summary = next(json.loads(x) for x in reversed(p.stdout.splitlines()) if '"event": "summary"' in x)
    return summary, p.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=8, help="starts on one history (default 8)")
    args = ap.parse_args()
    paths = llama_paths()
    totals: list[float] = []
    phases: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        history, port = Path(tmp) / "h.sqlite3", free_port()
        for i in range(args.starts):
            summary, err = _up(paths, history, port)
            said = summary.get("forecast") or {}
            if i == 0:
                own = re.search(r"llama_kv_cache: size = +([\d.]+) MiB", err)
                fit = said.get("fit") or {}
                print(f"KV cache: forecast {fit.get('kv_min_bytes')} bytes, llama.cpp {own.group(1) if own else '?'} "
                      f"MiB = {float(own.group(1)) * MIB if own else float('nan'):.0f} bytes")
            graded = (said.get("graded") or {})
            total = graded.get("total")
            if total and total.get("error") is not None:
                totals.append(total["error"])
                print(f"start {i + 1}: forecast {total['forecast_s']:.3f} s, took {total['actual_s']:.3f} s, "
                      f"error {total['error']:+.1%} ({said.get('note')})")
            else:
                print(f"start {i + 1}: not forecast ({said.get('note')})")
            for name, e in (graded.get("phases") or {}).items():
                if e.get("error") is not None:
                    phases.setdefault(name, []).append(e["error"])
    if totals:
        print(f"whole start: median |error| {statistics.median(abs(e) for e in totals):.1%}, median error "
              f"{statistics.median(totals):+.1%} over {len(totals)} forecast starts")
    for name, errs in phases.items():
        print(f"{name}: median |error| {statistics.median(abs(e) for e in errs):.1%} over {len(errs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
