"""After READY: warm-up, benchmark, speculative decoding, and the history that makes the next ETA and catches
regressions (the simulated server, with a configured token rate and acceptance)."""

from __future__ import annotations

import json
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import Output, run_firstlight, sim_cmd

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]


def up(history: Path, weights: Path, *opts: str, load: str = "1", rate: str = "100", extra: tuple[str, ...] = (),
       port: int | None = None):
    port = port or free_port()
    return run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), *FAST, *opts, "--",
                          *sim_cmd("normal", port, "--model-path", str(weights), "--token-rate", rate, *extra),
                          env={"FIRSTLIGHT_SIM_LOAD_SECONDS": load})


def test_warmup_and_bench_with_spec_decoding_go_into_the_summary(tmp_path: Path, weights: Path):
    r = up(tmp_path / "h.sqlite3", weights, "--warmup", "3", "--bench", "--bench-requests", "8",
           "--bench-concurrency", "2", "--bench-output-len", "20", extra=("--spec-accept", "2.5"))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["warmup"]["n"] == 3 and s["warmup"]["first_s"] > 0
    b = s["bench"]
    assert b["completed"] == 8 and b["errors"] == 0
    # 2 concurrent streams at 100 tok/s each: at most ~200 output tok/s. Load on the machine can only slow the
    # simulator down, so only the upper bound is a fact (the accuracy is measured in bench/bench_throughput_sim.py).
    assert 0 < b["output_throughput"] <= 250
    assert s["spec_decoding"]["status"] == "ok"
    assert abs(s["spec_decoding"]["mean_acceptance_length"] - 2.5) < 0.2
    assert "bench:" in r.stderr and "speculative decoding: ok" in r.stderr


def test_zero_acceptance_is_said_plainly(tmp_path: Path, weights: Path):
    r = up(tmp_path / "h.sqlite3", weights, "--bench", "--bench-requests", "4", "--bench-output-len", "10",
           extra=("--spec-accept", "1.0"))
    assert r.rc == 0, r.stderr[-3000:]
    assert r.summary["spec_decoding"]["status"] == "zero_acceptance"


def test_history_gives_the_eta_and_catches_a_slower_cold_start(tmp_path: Path, weights: Path):
    history = tmp_path / "h.sqlite3"
    port = free_port()  # one deployment: the same command line every time
    # A busy machine makes 1 s starts vary: the baseline runs allow 10x (--margin 10), so only the slow start
    # below is judged; it is 8x slower by construction, caught with --margin 0.5 whatever the machine does.
    for _ in range(3):
        r = up(history, weights, "--margin", "10", load="1", port=port)
        assert r.rc == 0, r.stderr[-3000:]
        assert r.summary["verdict"] == "ready" and not r.summary["regression"]
    slow = up(history, weights, "--fail-on-regression", "--margin", "0.5", load="8", port=port)
    assert slow.rc == 4, slow.stderr[-3000:]
    s = slow.summary
    assert s["verdict"] == "regression"
    reg = s["regression"][0]
    assert reg["metric"] == "cold_start_s" and reg["value"] > reg["baseline"] * 1.5
    assert s["baseline"]["cold_start_s"] == reg["baseline"]
    etas = [e["eta_total_s"] for e in slow.events if e["event"] == "status" and e.get("eta_total_s") is not None]
    assert etas, "no whole-start ETA although the history had three starts"
    assert "REGRESSION" in slow.stderr
    listing = run_firstlight("history", "--history", str(history), "--json")
    assert listing.rc == 0 and '"kind": "up"' in listing.stdout


def test_sigint_during_the_benchmark_stops_at_once(tmp_path: Path, weights: Path):
    import signal
    import subprocess
    import time

    from tests.support.common import firstlight_cmd, pids_in_group

    port = free_port()
    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--history", str(tmp_path / "h.sqlite3"), *FAST, "--bench",
                                         "--bench-requests", "1000", "--bench-duration", "120", "--",
                                         *sim_cmd("normal", port, "--model-path", str(weights), "--token-rate", "20")),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    try:
        output = Output(fl)
        verdict = output.wait_line(lambda line: '"event": "verdict"' in line and line, 60, "the READY verdict")
        assert json.loads(verdict)["verdict"] == "ready"
        t0 = time.monotonic()
        fl.send_signal(signal.SIGINT)
        out, _ = output.rest(timeout=30)
        took = time.monotonic() - t0
    finally:
        if fl.poll() is None:
            fl.kill()
    summary = json.loads(out.splitlines()[-1])
    assert fl.returncode == 130 and summary.get("verdict") == "interrupted", out.splitlines()[-3:]
    assert took < 15  # not the benchmark's 120 s
    assert not pids_in_group(summary["pid"])
