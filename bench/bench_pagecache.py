"""Does a warm page cache save what the anatomy of a cold start said it would? Run by hand (a real vLLM, set up
by scripts/setup_vllm.py; two starts, a few minutes of both cores):

    .venv/bin/python bench/bench_pagecache.py

1. A private copy of the model, evicted from the page cache (``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file,
   residency checked with ``cached_bytes`` before the start), then ``firstlight up --stop-when-ready`` of vLLM
   (``-O0``: no compile): the anatomy's weights phase, its bound, and its ``warm_page_cache`` saving.
2. The same start again, the weights now resident: its weights phase.
3. The saving the warm start showed (cold weights phase - warm weights phase) against the estimate: the error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.preflight.pagecache import cached_bytes  # noqa: E402
from firstlight.sim.server import free_port  # noqa: E402


def _evict(model: Path) -> int:
    for f in model.iterdir():
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return sum(cached_bytes(f) or 0 for f in model.iterdir())


def _start(setup: dict[str, str], model: Path, cache: str) -> dict[str, Any]:
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CACHE_ROOT=cache, VLLM_NO_USAGE_STATS="1",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    with tempfile.TemporaryFile("w+") as out:
        subprocess.run([sys.executable, "-m", "firstlight", "up", "--json", "--stop-when-ready", "--no-history",
                        "--sample-interval", "0.5", "--timeout", "900", "--", setup["python"], "-m",
                        "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
                        "--port", str(free_port()), "--max-model-len", "2048", "-O0"],
                       cwd=REPO, env=env, stdout=out, stderr=subprocess.DEVNULL, timeout=1000, check=False)
        out.seek(0)
        summary: dict[str, Any] = json.loads(out.read().strip().splitlines()[-1])
    return summary


def _weights(summary: dict[str, Any]) -> dict[str, Any]:
    a = summary["anatomy"]
    w = next(p for p in a["phases"] if p["name"] == "weights_loading")
    cut = next((c for c in a.get("cuts", []) if c["cut"] == "warm_page_cache"), None)
    return {"verdict": summary["verdict"], "ready_s": summary.get("cold_start_s"), "weights_s": w["seconds"],
            "bound": w["bound"], "read_rate": w.get("read_rate"), "resident": a["cache"]["page_cache_resident"],
            "estimated_saving_s": cut["saving_s"] if cut else None}


def main() -> None:
    setup = json.loads(subprocess.run([sys.executable, str(REPO / "scripts" / "setup_vllm.py"), "--print-paths"],
                                      capture_output=True, text=True, timeout=300, check=True).stdout)
    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "model"
        shutil.copytree(setup["model"], model)  # a private copy: nothing else holds it mapped
        left = _evict(model)
        cold = _weights(_start(setup, model, d))
        cold["resident_bytes_before"] = left
        print(json.dumps({"cold": cold}), flush=True)
        warm = _weights(_start(setup, model, d))
        print(json.dumps({"warm": warm}), flush=True)
    saved = cold["weights_s"] - warm["weights_s"]
    est = cold["estimated_saving_s"]
    err = abs(est - saved) / saved if est is not None and saved > 0 else None
    print(json.dumps({"saved_s": round(saved, 3), "estimated_s": est,
                      "error": None if err is None else round(err, 3)}))


if __name__ == "__main__":
    main()
