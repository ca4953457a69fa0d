"""How fast the readiness endpoints follow the verdict (targets: /readyz 200 < 0.5 s after the first real
generation; /livez 503 < 2 s after a hung or failed verdict).

Run by hand (not in the test suite):

    .venv/bin/python bench/bench_readyz.py --rounds 5

One `firstlight watch --pid-from TOKEN --log FILE --serve-readiness` sidecar watches simulated starts one after
another, as in a Pod (the server's output goes to a log file truncated at each start, as the manifests' tee
does): per round a normal start (READY), a start that hangs after loading its weights (hung, with
--stall-timeout 3) and one that dies of an OOM (failed). A 5 ms poller in this process sees the endpoints.

- ready: from the first real generation (the generation level's time in firstlight's READY summary; and, as an
  independent reference, the moment the server could first serve, which it writes itself with --ready-file)
  to the first /readyz 200;
- hung: from the verdict (the summary's ended_at) to the first /livez 503;
- failed: from the verdict, and from the server process's exit (seen by this process), to the first /livez 503.
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

from firstlight.sim.server import free_port, make_weights  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-readyz-"))
    make_weights(work / "model", 64 << 20, shards=4)
    port, rport, token = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    fl = subprocess.Popen([sys.executable, "-m", "firstlight", "watch", f"http://127.0.0.1:{port}", "--pid-from",
                           token, "--json", "--no-history", "--poll-min", "0.05", "--sample-interval", "0.2",
                           "--stall-timeout", "3", "--log", str(work / "engine.log"),
                           "--serve-readiness", f"127.0.0.1:{rport}"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    summaries = Summaries(fl.stdout)
    summaries.start()
    ready_from_gen, ready_from_server, hung_delay, failed_delay, failed_from_exit = [], [], [], [], []
    n = start = 0

    def sim(scenario: str) -> subprocess.Popen[bytes]:
        ready_file = work / "ready"
        ready_file.unlink(missing_ok=True)
        with open(work / "engine.log", "wb") as log:  # truncated at each start, like the manifests' tee
            return subprocess.Popen([sys.executable, "-m", "firstlight.sim", "--scenario", scenario, "--port",
                                     str(port), "--model-path", str(work / "model"), "--served-model-name", token,
                                     "--ready-file", str(ready_file)],
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(p: subprocess.Popen[bytes]) -> None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()

    try:
        for r in range(args.rounds):
            server = sim("normal")
            start += 1
            seen = first_seen(f"http://127.0.0.1:{rport}/readyz", 200, start)
            n += 1
            s = summaries.wait(n, 60)
            ready_from_gen.append(seen - s["levels"]["generation"])
            ready_from_server.append(seen - float((work / "ready").read_text()))
            kill(server)
            n += 1  # the "failed after serving" summary
            server = sim("hang_after_load")
            start += 1
            seen = first_seen(f"http://127.0.0.1:{rport}/livez", 503, start)
            n += 1
            s = summaries.wait(n, 60)
            assert s["verdict"] == "hung", s["verdict"]
            hung_delay.append(seen - s["ended_at"])
            kill(server)
            server = sim("crash_oom")
            start += 1
            exited: list[float] = []
            threading.Thread(target=lambda p=server, e=exited: (p.wait(), e.append(time.time())), daemon=True).start()
            seen = first_seen(f"http://127.0.0.1:{rport}/livez", 503, start)
            n += 1
            s = summaries.wait(n, 60)
            assert s["verdict"] == "failed", s["verdict"]
            failed_delay.append(seen - s["ended_at"])
            if exited:
                failed_from_exit.append(seen - exited[0])
            print(f"round {r + 1}: ready +{ready_from_gen[-1]:.3f}s after the generation "
                  f"(+{ready_from_server[-1]:.3f}s after the server could serve); hung +{hung_delay[-1]:.3f}s; "
                  f"failed +{failed_delay[-1]:.3f}s after the verdict", flush=True)
    finally:
        fl.send_signal(signal.SIGTERM)
        fl.wait(timeout=30)

    def line(name: str, xs: list[float], target: float) -> None:
        if xs:
            print(f"{name:55} median {statistics.median(xs):.3f}s  max {max(xs):.3f}s  n={len(xs)}  "
                  f"(target < {target} s)")

    print()
    line("first real generation -> /readyz 200", ready_from_gen, 0.5)
    line("server could first serve -> /readyz 200", ready_from_server, 0.5)
    line("hung verdict -> /livez 503", hung_delay, 2)
    line("failed verdict -> /livez 503", failed_delay, 2)
    line("server process exit -> /livez 503", failed_from_exit, 2)


if __name__ == "__main__":
    main()
