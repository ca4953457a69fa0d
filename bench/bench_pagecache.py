"""Does a warm page cache save what the anatomy of a cold start said it would? Run by hand (a real vLLM, set up
by scripts/setup_vllm.py; two starts per run, a few minutes of both cores):

    .venv/bin/python bench/bench_pagecache.py                       # this machine's disk as it is
    .venv/bin/python bench/bench_pagecache.py --throttle-mbps 40 --runs 3   # a slow disk (root, a blkio cgroup)

1. A private copy of the model, evicted from the page cache (``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file,
   residency checked before the start), then ``firstlight up --stop-when-ready`` of vLLM
   (``-O0``: no compile): the anatomy's weights phase, its bound, and its ``warm_page_cache`` saving.
2. The same start again, the weights now resident: its weights phase.
3. The saving the warm start showed (cold weights phase - warm weights phase) against the estimate: the error.

The 260 MB model of the tests loads in about a second from this machine's disk, bound by the loader's CPU, so a
warm page cache saves nothing there. ``--throttle-mbps`` makes the disk a slow one for real: the kernel's block
throttle (cgroup v1 ``blkio.throttle.read_bps_device``, or v2 ``io.max``) on the device holding the model, with
firstlight, vLLM and ``firstlight preflight --disk`` (the device rate the anatomy compares with, kept in a private
history) all inside that cgroup; page-cache hits are not throttled, as on a real slow disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.sim.fixtures import free_port  # noqa: E402
from tests.support.slow_disk import Throttle, evict  # noqa: E402


def _env(cache: str) -> dict[str, str]:
    return dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CACHE_ROOT=cache, VLLM_NO_USAGE_STATS="1",
                HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


def _server(setup: dict[str, str], model: Path) -> list[str]:
    return [setup["python"], "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host",
            "127.0.0.1", "--port", str(free_port()), "--max-model-len", "2048", "-O0"]


def _start(setup: dict[str, str], model: Path, cache: str, history: list[str],
           throttle: Throttle | None) -> dict[str, Any]:
    with tempfile.TemporaryFile("w+") as out:
        subprocess.run([sys.executable, "-m", "firstlight", "up", "--json", "--stop-when-ready", *history,
                        "--sample-interval", "0.5", "--timeout", "900", "--", *_server(setup, model)],
                       cwd=REPO, env=_env(cache), stdout=out, stderr=subprocess.DEVNULL, timeout=1000, check=False,
                       preexec_fn=throttle.enter if throttle else None)
        out.seek(0)
        summary: dict[str, Any] = json.loads(out.read().strip().splitlines()[-1])
    return summary


def _weights(summary: dict[str, Any]) -> dict[str, Any]:
    a = summary["anatomy"]
    w = next(p for p in a["phases"] if p["name"] == "weights_loading")
    cut = next((c for c in a.get("cuts", []) if c["cut"] == "warm_page_cache"), None)
    return {"verdict": summary["verdict"], "ready_s": summary.get("cold_start_s"), "weights_s": w["seconds"],
            "bound": w["bound"], "read_rate": w.get("read_rate"), "device_rate": a["cache"]["device_rate"],
            "resident": a["cache"]["page_cache_resident"], "estimated_saving_s": cut["saving_s"] if cut else None,
            "evidence": w["evidence"][0]["value"] if w.get("evidence") else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--throttle-mbps", type=float, help="throttle reads of the model's disk to this (root)")
    ap.add_argument("--runs", type=int, default=1, help="cold/warm pairs (medians reported)")
    args = ap.parse_args()
    setup = json.loads(subprocess.run([sys.executable, str(REPO / "scripts" / "setup_vllm.py"), "--print-paths"],
                                      capture_output=True, text=True, timeout=300, check=True).stdout)
    errors: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "model"
        shutil.copytree(setup["model"], model)  # a private copy: nothing else holds it mapped
        throttle = None
        history = ["--no-history"]
        if args.throttle_mbps:
            throttle = Throttle(model, int(args.throttle_mbps * 1e6))
            history = ["--history", str(Path(d) / "history.db")]
            evict(model)
            measured = subprocess.run([sys.executable, "-m", "firstlight", "preflight", "--disk", *history, "--",
                                       *_server(setup, model)], cwd=REPO, env=_env(d), capture_output=True,
                                      text=True, timeout=300, check=False, preexec_fn=throttle.enter)
            print(json.dumps({"preflight_disk": (measured.stderr.strip().splitlines() or [""])[-1]}), flush=True)
        try:
            for run in range(args.runs):
                left = evict(model)
                cold = _weights(_start(setup, model, d, history, throttle))
                cold["resident_bytes_before"] = left
                warm = _weights(_start(setup, model, d, history, throttle))
                saved = cold["weights_s"] - warm["weights_s"]
                est = cold["estimated_saving_s"]
                err = abs(est - saved) / saved if est is not None and saved > 0 else None
                if err is not None:
                    errors.append(err)
                print(json.dumps({"run": run + 1, "cold": cold, "warm": warm, "saved_s": round(saved, 3),
                                  "estimated_s": est, "error": None if err is None else round(err, 3)}), flush=True)
        finally:
            if throttle:
                throttle.close()
    if errors:
        print(json.dumps({"runs": args.runs, "median_error": round(statistics.median(errors), 3),
                          "max_error": round(max(errors), 3)}))


if __name__ == "__main__":
    main()
