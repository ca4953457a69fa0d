"""What a fleet of firstlight sidecars costs, scraped by the real Prometheus (Debian's package), and how fast an
alert follows a verdict through it and Alertmanager.

Run by hand (not in the test suite):

    .venv/bin/python bench/bench_fleet.py                  # N = 50 sidecars
    .venv/bin/python bench/bench_fleet.py --n 20 --hung 4  # a smaller fleet on a busy machine

N `firstlight watch --pid-from TOKEN --log FILE --serve-readiness ... --metrics-port ...` sidecars, each watching
its own simulated server (tests/fleet.py starts Prometheus, Alertmanager and the webhook receiver, with the
shipped rules evaluated every second): N - H servers start normally, H hang after loading their weights
(their sidecars judge them hung after --hung-stall seconds). Every server is started at once, the worst case
of a fleet rollout.

- per sidecar, CPU (user + system, in % of one core) and RSS, while starting (from the servers' launch until every
  sidecar has its verdict) and while serving (a window of --serve-seconds after that; the sidecars of the hung
  servers apart: they wait for the next start meanwhile);
- Prometheus' scrape of one sidecar: scrape_duration_seconds and scrape_samples_scraped (median and max over the
  targets, as Prometheus reports them), and Prometheus' own CPU and RSS;
- alert latency for the hung ones: from the verdict (the sidecar's JSON summary) to FirstlightStartHung firing
  (Prometheus' activeAt) and to its delivery at the webhook.
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
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.fleet_cases import _epoch  # noqa: E402

from firstlight.sim.fixtures import free_port, make_weights  # noqa: E402
from tests.support.fleet import Stack, binaries_present  # noqa: E402


def _cpu(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
        return t.user + t.system
    except psutil.Error:
        return float("nan")


def _rss(p: psutil.Process) -> float:
    try:
        return float(p.memory_info().rss)
    except psutil.Error:
        return float("nan")


def _summaries(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            e = json.loads(line)
            if e.get("event") == "summary":
                out.append(e)
    return out


def _wait(cond: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_fleet: timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)  # polling period of this deadline-bounded wait


def _stats(values: list[float], scale: float = 1.0, digits: int = 2) -> dict[str, float]:
    v = [x * scale for x in values if x == x]
    if not v:
        return {}
    return {"median": round(statistics.median(v), digits), "max": round(max(v), digits), "n": len(v)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50, help="sidecars (and simulated servers)")
    ap.add_argument("--hung", type=int, default=5, help="of which this many servers hang (alert latency)")
    ap.add_argument("--serve-seconds", type=float, default=30.0, help="the serving window measured")
    ap.add_argument("--load-seconds", type=float, default=3.0, help="each server's weight load")
    ap.add_argument("--scrape-interval", type=float, default=1.0, help="Prometheus' scrape interval, seconds")
    ap.add_argument("--hung-stall", type=float, default=10.0,
                    help="--stall-timeout of the hung ones' sidecars (the others keep firstlight's 120 s: every "
                         "server starting at once on a small machine starves them for seconds)")
    ap.add_argument("--timeout", type=float, default=600.0, help="bound on every wait")
    args = ap.parse_args()
    if not binaries_present():
        raise SystemExit("bench_fleet: needs prometheus and prometheus-alertmanager (apt-get install prometheus "
                         "prometheus-alertmanager)")
    if not 0 <= args.hung < args.n:
        raise SystemExit("bench_fleet: --hung must be in 0..N-1")
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    weights = work / "model"
    make_weights(weights, 16 << 20, shards=2)
    # Every port this run will bind, distinct: free_port() alone, called 150 times before the engines bind theirs,
    # once gave an engine the port a sidecar's endpoint had taken meanwhile
    ports: list[int] = []
    while len(ports) < 3 * args.n + 2:
        if (p := free_port()) not in ports:
            ports.append(p)
    cars: list[dict[str, Any]] = []
    engines: list[subprocess.Popen[bytes]] = []
    stack: Stack | None = None
    try:
        for i in range(args.n):
            c = {"i": i, "port": ports.pop(), "mport": ports.pop(), "token": f"tok-{uuid.uuid4().hex[:8]}",
                 "out": work / f"car{i}.jsonl", "log": work / f"car{i}.engine.log", "hung": i < args.hung}
            with c["out"].open("wb") as out:
                c["proc"] = subprocess.Popen(
                    [sys.executable, "-m", "firstlight", "watch", f"http://127.0.0.1:{c['port']}", "--pid-from",
                     c["token"], "--log", str(c["log"]), "--json", "--no-history", "--stall-timeout",
                     str(args.hung_stall if c["hung"] else 120),
                     "--deployment", "bench", "--serve-readiness", f"127.0.0.1:{ports.pop()}",
                     "--metrics-port", str(c["mport"])],
                    stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            c["ps"] = psutil.Process(c["proc"].pid)
            cars.append(c)
        (work / "stack").mkdir()
        stack = Stack(work / "stack", [f"127.0.0.1:{c['mport']}" for c in cars], scrape_s=args.scrape_interval,
                      ports=(ports.pop(), ports.pop()))
        stack.wait_ready(args.timeout)

        def all_up() -> bool:
            assert stack is not None
            return sum(r["value"][1] == "1" for r in stack.query('up{job="firstlight"}')) == args.n
        _wait(all_up, args.timeout, "every sidecar scraped")
        load_before = os.getloadavg()  # the machine is shared: what else ran, in the 1/5/15-minute averages
        idle_rss = [_rss(c["ps"]) for c in cars]

        # -- starting: every server at once -------------------------------------------------------------------
        cpu0 = [_cpu(c["ps"]) for c in cars]
        t0 = time.monotonic()
        for c in cars:
            scenario = "hang_after_load" if c["hung"] else "normal"
            with c["log"].open("wb") as out:
                engines.append(subprocess.Popen(
                    [sys.executable, "-m", "firstlight.sim", "--scenario", scenario, "--port", str(c["port"]),
                     "--model-path", str(weights), "--served-model-name", c["token"], "--load-seconds",
                     str(args.load_seconds)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        _wait(lambda: all(_summaries(c["out"]) for c in cars), args.timeout, "every sidecar's verdict")
        t1 = time.monotonic()
        cpu1 = [_cpu(c["ps"]) for c in cars]
        start_rss = [_rss(c["ps"]) for c in cars]
        verdicts = [_summaries(c["out"])[0]["verdict"] for c in cars]

        # -- serving (and hung: the sidecar keeps serving its verdict) --------------------------------------
        time.sleep(args.serve_seconds)  # the measured window itself, not a wait for a state
        t2 = time.monotonic()
        cpu2 = [_cpu(c["ps"]) for c in cars]
        serve_rss = [_rss(c["ps"]) for c in cars]

        # -- the alerts of the hung ones ----------------------------------------------------------------------
        fire, deliver = [], []
        for c in cars:
            if not c["hung"]:
                continue
            inst = f"127.0.0.1:{c['mport']}"
            verdict_at = _summaries(c["out"])[0]["ended_at"]
            alert = _wait(lambda inst=inst: stack.firing("FirstlightStartHung", instance=inst), args.timeout,
                          f"FirstlightStartHung for {inst}")
            fired = _epoch(alert["activeAt"])
            got = _wait(lambda inst=inst, fired=fired: stack.webhook.delivered("FirstlightStartHung", fired - 1.0,
                                                                               instance=inst),
                        args.timeout, f"delivery for {inst}")
            fire.append(fired - verdict_at)
            deliver.append(got - verdict_at)
        healthy = {f"127.0.0.1:{c['mport']}" for c in cars if not c["hung"]}
        wrong = [a["labels"] for a in stack.alerts() if a["labels"].get("instance") in healthy]

        dur = {r["metric"]["instance"]: float(r["value"][1]) for r in stack.query("scrape_duration_seconds")}
        samples = {r["metric"]["instance"]: float(r["value"][1]) for r in stack.query("scrape_samples_scraped")}
        prom = psutil.Process(stack.procs[1].pid)
        result = {
            "n": args.n, "hung": args.hung, "scrape_interval_s": args.scrape_interval, "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
            "starting_window_s": round(t1 - t0, 1), "serving_window_s": round(t2 - t1, 1),
            "sidecar_cpu_s_starting": _stats([b - a for a, b in zip(cpu0, cpu1, strict=True)]),
            "sidecar_cpu_pct_starting": _stats([(b - a) / (t1 - t0) for a, b in zip(cpu0, cpu1, strict=True)],
                                              100),
            # a sidecar whose start hung waits for the next start: --pid-from scans the process table each 0.25 s
            "sidecar_cpu_pct_serving": _stats([(b - a) / (t2 - t1) for a, b, c in zip(cpu1, cpu2, cars, strict=True)
                                               if not c["hung"]], 100),
            "sidecar_cpu_pct_after_hung": _stats([(b - a) / (t2 - t1) for a, b, c in zip(cpu1, cpu2, cars, strict=True)
                                                  if c["hung"]], 100),
            "sidecar_rss_mib_idle": _stats(idle_rss, 1 / 2**20, 1),
            "sidecar_rss_mib_starting": _stats(start_rss, 1 / 2**20, 1),
            "sidecar_rss_mib_serving": _stats(serve_rss, 1 / 2**20, 1),
            "scrape_duration_ms": _stats(list(dur.values()), 1000),
            "scrape_samples": _stats(list(samples.values()), 1, 0),
            "prometheus_cpu_s": round(_cpu(prom), 1), "prometheus_rss_mib": round(_rss(prom) / 2**20, 1),
            "alert_fired_after_verdict_s": _stats(fire),
            "alert_delivered_after_verdict_s": _stats(deliver),
            "alerts_for_healthy_ones": wrong,
        }
        print(json.dumps(result, indent=2))
    finally:
        for p in engines:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        for c in cars:
            if c["proc"].poll() is None:
                c["proc"].send_signal(signal.SIGTERM)
        for c in cars:
            try:
                c["proc"].wait(timeout=30)
            except subprocess.TimeoutExpired:
                c["proc"].kill()
        for p in engines:
            p.wait()
        if stack is not None:
            stack.close()


if __name__ == "__main__":
    main()
