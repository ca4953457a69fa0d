"""`firstlight up` end to end against the simulated server: a real process on a real socket, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil

from firstlight.sim.fixtures import free_port
from tests.support.common import (
    Output,
    children,
    firstlight_cmd,
    launched_server,
    pids_in_group,
    run_firstlight,
    sim_cmd,
    wait_for,
)

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]


def test_normal_start_is_ready_only_after_a_generation(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", *FAST, "--",
                       *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "1"))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["verdict"] == "ready" and s["phase"] == "ready" and s["failure"] is None
    assert s["first_generation"]["text"].strip()
    assert s["ready_at"] >= s["levels"]["models"] >= s["levels"]["health"] >= s["levels"]["port"] >= s["started_at"]
    names = [p["name"] for p in s["phases"]]
    for phase in ("process_start", "weights_loading", "kv_cache", "cuda_graph", "ready"):
        assert phase in names, names
    assert s["engine"] == "sglang", s["engine"]  # the simulator speaks SGLang: detected from its log
    assert s["server_stopped"] == "stopped with SIGTERM", s["server_stopped"]  # --stop-when-ready stops it


def test_slow_first_request_is_ready_after_the_slow_generation(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", *FAST, "--",
                       *sim_cmd("slow_first_request", port, "--model-path", str(weights)))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["first_generation"]["latency_s"] >= 2.5  # the sim's first request takes 3 s
    assert s["engine_ready_at"] is not None and s["ready_at"] > s["engine_ready_at"] + 2.5


def test_crash_is_failed_with_the_log_evidence(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", *FAST, "--", *sim_cmd("crash_oom", port, "--model-path", str(weights)))
    assert r.rc == 1, r.stderr[-3000:]
    s = r.summary
    assert s["verdict"] == "failed" and s["failure"] == "oom"
    assert any("OutOfMemoryError" in e["value"] for e in s["evidence"])
    assert s["hint"]


def test_hang_is_hung_within_stall_timeout_and_the_server_is_stopped(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stall-timeout", "3", *FAST, "--",
                       *sim_cmd("hang", port, "--model-path", str(weights), "--load-seconds", "2"))
    assert r.rc == 2, r.stderr[-3000:]
    s = r.summary
    assert s["verdict"] == "hung"
    assert s["elapsed_s"] < 3 + 2 + 5
    assert s["evidence"][0]["since"] is not None
    assert not pids_in_group(s["pid"])


def test_timeout(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--timeout", "2", *FAST, "--",
                       *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "30"))
    assert r.rc == 3, r.stderr[-3000:]
    assert r.summary["verdict"] == "timeout"
    assert not pids_in_group(r.summary["pid"])


def test_missing_executable_is_failed_not_a_traceback():
    r = run_firstlight("up", "--json", "--", "/nonexistent/llama-server", "--port", "1")
    assert r.rc == 1
    assert r.summary["verdict"] == "failed"
    assert "cannot start" in r.summary["evidence"][0]["value"]
    assert "Traceback" not in r.stderr


def _start_up(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(firstlight_cmd("up", "--json", *FAST, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def _server_pid(fl: subprocess.Popen[str]) -> int:
    return launched_server(fl.pid).pid


def test_sigterm_during_loading_leaves_no_process_of_the_group(weights: Path):
    port = free_port()
    fl = _start_up("--", *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "60",
                                  "--workers", "3"))
    try:
        pid = _server_pid(fl)
        wait_for(lambda: len(children(pid)) >= 3, 30, "the workers")
        fl.send_signal(signal.SIGTERM)
        out, err = fl.communicate(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert fl.returncode == 130, err[-3000:]
    assert '"verdict": "interrupted"' in out.splitlines()[-1]
    assert not pids_in_group(pid)


def test_sigint_after_ready_stops_the_supervised_server(weights: Path):
    port = free_port()
    fl = _start_up("--", *sim_cmd("normal", port, "--model-path", str(weights)))
    try:
        pid = _server_pid(fl)
        output = Output(fl)
        output.wait_event("summary", 60, "READY", verdict="ready")
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        fl.send_signal(signal.SIGINT)
        _, err = output.rest(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert fl.returncode == 130, err[-3000:]
    assert not pids_in_group(pid)


def test_a_server_ignoring_sigterm_is_killed_after_the_grace_period(weights: Path):
    port = free_port()
    fl = _start_up("--grace", "1", "--", *sim_cmd("normal", port, "--model-path", str(weights),
                                                  "--load-seconds", "60", "--ignore-term"))
    try:
        pid = _server_pid(fl)
        output = Output(fl)
        # Its first phase line comes after it set SIGTERM to be ignored.
        output.wait_line(lambda line: '"event": "phase"' in line, 30, "the server's first phase")
        fl.send_signal(signal.SIGTERM)
        _, err = output.rest(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert "SIGKILL after 1s grace" in err
    assert not pids_in_group(pid)


def test_detach_exits_at_ready_and_leaves_the_server_serving(weights: Path, reap: list[int], tmp_path: Path):
    port = free_port()
    # TMPDIR: the server's output file (which outlives firstlight) lands in the test's own directory
    r = run_firstlight("up", "--json", "--detach", *FAST, "--", *sim_cmd("normal", port, "--model-path", str(weights)),
                       env={"TMPDIR": str(tmp_path)})
    assert r.rc == 0, r.stderr[-3000:]
    pid = r.summary["pid"]
    reap.append(pid)
    resp = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json={"prompt": "x", "max_tokens": 4}, timeout=10)
    assert resp.status_code == 200 and resp.json()["choices"][0]["text"]
    assert psutil.pid_exists(pid)
    log = Path(r.summary["server_log"])
    assert log.parent == tmp_path and log.read_text()  # the server keeps a log since nobody reads a pipe


def test_usage_errors_exit_64():
    r = run_firstlight("probe", "ftp://nope")
    assert r.rc == 64 and "Traceback" not in r.stderr
    r = run_firstlight("up", "--no-such-option", "--", "true")
    assert r.rc == 64
    r = run_firstlight("up", "--engine", "nonsense", "--", "true")
    assert r.rc == 64
    r = run_firstlight("up", "--url", "http://127.0.0.1:9", "--record", "/nonexistent/dir/run.jsonl", "--", "true")
    assert r.rc == 64 and "cannot write" in r.stderr and "Traceback" not in r.stderr
    r = run_firstlight("demo", "--scenario", "nonsense")
    assert r.rc == 64


def test_secrets_never_appear_in_output(weights: Path):
    port = free_port()
    key = "sk-test-0123456789abcdef"
    r = run_firstlight("up", "--json", "--stop-when-ready", "--api-key", key, *FAST, "--",
                       *sim_cmd("normal", port, "--model-path", str(weights), "--api-key", key))
    assert r.rc == 0, r.stderr[-3000:]
    assert key not in r.stdout and key not in r.stderr
    assert "***" in " ".join(r.summary["command"])


def test_demo_runs_without_gpu_or_model():
    env = {**os.environ}
    p = subprocess.run([sys.executable, "-m", "firstlight", "demo", "--scenario", "normal", "--json"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert '"verdict": "ready"' in p.stdout.splitlines()[-1]


def test_keep_on_failure_leaves_a_hung_server_and_says_how_to_find_it(weights: Path, reap: list[int]):
    port = free_port()
    r = run_firstlight("up", "--json", "--keep-on-failure", "--stall-timeout", "2", *FAST, "--",
                       *sim_cmd("hang", port, "--model-path", str(weights)))
    assert r.rc == 2, r.stderr[-3000:]
    pid = r.summary["pid"]
    reap.append(pid)
    assert pids_in_group(pid)  # still there for inspection
    assert f"kill -TERM -- -{pid}" in r.stderr
