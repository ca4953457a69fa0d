"""How fast the readiness endpoints follow the verdict (targets: /readyz 200 < 0.5 s after the first real
generation; /livez 503 < 2 s after a hung or failed verdict).

Run by hand (not in the test suite):

    .venv/bin/python bench/bench_readyz.py --rounds 7                  # the simulated server
    .venv/bin/python bench/bench_readyz.py --rounds 5 --engine llama   # the real llama-server (setup first)

One `firstlight watch --pid-from TOKEN --log FILE --serve-readiness` sidecar watches starts one after
another, as in a Pod (the server's output goes to a log file truncated at each start, as the manifests' tee
does): per round a start that serves (READY, then SIGTERM as a kubelet would), a start that hangs (the
simulator's hang_after_load; a SIGSTOPped llama-server) judged hung with --stall-timeout 3, and one that fails
(an OOM; llama-server with a missing model). A 5 ms poller in this process sees the endpoints.

- ready: from the first real generation (the generation level's time in firstlight's READY summary; and, as an
  independent reference, the moment the server could first serve, which it writes itself with --ready-file)
  to the first /readyz 200;
- hung: from the verdict (the summary's ended_at) to the first /livez 503;
- failed: from the verdict, and from the server process's exit (seen by this process), to the first /livez 503;
- serving ended: from the serving engine's exit to the first /livez 503.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.sim.fixtures import free_port, make_weights  # noqa: E402

POLL_S = 0.005


class Summaries(threading.Thread):
    """firstlight's JSON Lines: the summaries as they come."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream, self.items, self.cond = stream, [], threading.Condition()

    def run(self) -> None:
        for line in self.stream:
            if line.startswith("{") and '"summary"' in line:
                with self.cond:
                    self.items.append(json.loads(line))
                    self.cond.notify_all()

    def wait(self, n: int, timeout: float) -> dict[str, Any]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.items) >= n, timeout):
                raise SystemExit(f"no summary #{n} within {timeout}s")
            return self.items[n - 1]


def first_seen(url: str, status: int, start: int, timeout: float = 120) -> float:
    """Epoch time of the first answer with this status for start number ``start``."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2) as c:
        while time.monotonic() < deadline:
            try:
                r = c.get(url)
                if r.status_code == status and r.json().get("start") == start:
                    return time.time()
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(POLL_S)
    raise SystemExit(f"{url} never answered {status} for start {start}")


class Engines:
    """Starts of the watched engine, by kind: one that serves, one that hangs, one that fails."""

    def __init__(self, engine: str, work: Path, port: int, token: str) -> None:
        self.engine, self.work, self.port, self.token = engine, work, port, token
        self.ready_file = work / "ready"
        self.paths: dict[str, str] = {}
        if engine == "llama":
            p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"), "--print-paths"],
                               capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                raise SystemExit("llama-server is not in the cache: run scripts/setup_llama_server.py first")
            self.paths = json.loads(p.stdout)
        else:
            make_weights(work / "model", 64 << 20, shards=4)

    def start(self, kind: str) -> subprocess.Popen[bytes]:
        self.ready_file.unlink(missing_ok=True)
        with open(self.work / "engine.log", "wb") as log:  # truncated at each start, like the manifests' tee
            p = subprocess.Popen(self._command(kind), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if self.engine == "llama" and kind in ("hang", "fail"):
            # hang: a start that never moves again (no log, no reads, no CPU). fail: llama-server exits within
            # 50 ms of a missing model, before a sidecar polling every 0.25 s may see it; held until it is watched
            p.send_signal(signal.SIGSTOP)
        return p

    def _command(self, kind: str) -> list[str]:
        if self.engine == "llama":
            model = self.paths["model"] if kind != "fail" else str(self.work / "absent.gguf")
            return [self.paths["llama_server"], "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
                    "-np", "1", "-c", "2048", "--alias", self.token]
        scenario = {"ready": "normal", "hang": "hang_after_load", "fail": "crash_oom"}[kind]
        return [sys.executable, "-m", "firstlight.sim", "--scenario", scenario, "--port", str(self.port),
                "--model-path", str(self.work / "model"), "--served-model-name", self.token,
                "--ready-file", str(self.ready_file)]


def kill(p: subprocess.Popen[bytes]) -> None:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def exit_time(p: subprocess.Popen[bytes]) -> list[float]:
    """Filled with the moment ``p`` exits, seen by a thread of this process."""
    out: list[float] = []
    threading.Thread(target=lambda: (p.wait(), out.append(time.time())), daemon=True).start()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--engine", choices=("sim", "llama"), default="sim")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-readyz-"))
    port, rport, token = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    engines = Engines(args.engine, work, port, token)
    fl = subprocess.Popen([sys.executable, "-m", "firstlight", "watch", f"http://127.0.0.1:{port}", "--pid-from",
                           token, "--json", "--no-history", "--poll-min", "0.05", "--sample-interval", "0.2",
                           "--stall-timeout", "3", "--log", str(work / "engine.log"),
                           "--serve-readiness", f"127.0.0.1:{rport}"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    summaries = Summaries(fl.stdout)
    summaries.start()
    figures: dict[str, list[float]] = {k: [] for k in ("gen", "server", "ended", "hung", "failed", "exit")}
    n = start = 0
    readyz, livez = f"http://127.0.0.1:{rport}/readyz", f"http://127.0.0.1:{rport}/livez"
    try:
        for r in range(args.rounds):
            server = engines.start("ready")
            start += 1
            seen = first_seen(readyz, 200, start)
            n += 1
            s = summaries.wait(n, 60)
            figures["gen"].append(seen - s["levels"]["generation"])
            if engines.ready_file.exists():
                figures["server"].append(seen - float(engines.ready_file.read_text()))
            exited = exit_time(server)
            server.send_signal(signal.SIGTERM)  # the kubelet stops the engine container
            seen = first_seen(livez, 503, start)
            n += 1
            if exited:
                figures["ended"].append(seen - exited[0])
            server.wait()
            server = engines.start("hang")
            start += 1
            seen = first_seen(livez, 503, start)
            n += 1
            s = summaries.wait(n, 60)
            assert s["verdict"] == "hung", s["verdict"]
            figures["hung"].append(seen - s["ended_at"])
            kill(server)
            server = engines.start("fail")
            start += 1
            exited = exit_time(server)
            if args.engine == "llama":
                first_seen(livez, 200, start)  # the sidecar watches it: let it run into its error now
                server.send_signal(signal.SIGCONT)
            seen = first_seen(livez, 503, start)
            n += 1
            s = summaries.wait(n, 60)
            assert s["verdict"] == "failed", s["verdict"]
            figures["failed"].append(seen - s["ended_at"])
            if exited:
                figures["exit"].append(seen - exited[0])
            server.wait()
            print(f"round {r + 1}: /readyz 200 +{figures['gen'][-1]:.3f}s after the generation; /livez 503 "
                  f"+{figures['hung'][-1]:.3f}s after hung, +{figures['failed'][-1]:.3f}s after failed", flush=True)
    finally:
        fl.send_signal(signal.SIGTERM)
        fl.wait(timeout=30)

    print(f"\n{args.engine}, {args.rounds} rounds")
    for key, name, target in (("gen", "first real generation -> /readyz 200", 0.5),
                              ("server", "server could first serve -> /readyz 200", 0.5),
                              ("ended", "serving engine's exit -> /livez 503", 2),
                              ("hung", "hung verdict -> /livez 503", 2),
                              ("failed", "failed verdict -> /livez 503", 2),
                              ("exit", "failing engine's exit -> /livez 503", 2)):
        xs = figures[key]
        if xs:
            print(f"{name:45} median {statistics.median(xs):.3f}s  max {max(xs):.3f}s  n={len(xs)}  "
                  f"(target < {target} s)")


if __name__ == "__main__":
    main()
