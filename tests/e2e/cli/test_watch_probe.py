"""`firstlight watch` (attach to a server someone else started) and `firstlight probe` (one-shot checks)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx

from firstlight.sim.fixtures import free_port
from tests.support.common import Run, run_firstlight, sim_cmd, wait_for
from tests.support.faults import fault_server

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]


def _start_sim(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        p = subprocess.Popen(sim_cmd(*args), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return p, log


def _watch_sim(tmp_path: Path, scenario: str, *sim_args: str) -> tuple[Run, int]:
    """Start the simulator as somebody else would (its own session, output to a file), then watch it."""
    port = free_port()
    server, log = _start_sim(tmp_path, scenario, port, *sim_args)
    try:
        r = run_firstlight("watch", f"http://127.0.0.1:{port}", "--pid", str(server.pid), "--log", str(log),
                           "--json", *FAST)
    finally:
        server.kill()
        server.wait()
    return r, server.pid


def test_watch_attaches_with_pid_and_log_and_reports_ready(tmp_path: Path, weights: Path):
    r, pid = _watch_sim(tmp_path, "normal", "--model-path", str(weights), "--load-seconds", "2")
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["verdict"] == "ready" and s["pid"] == pid
    assert "weights_loading" in [p["name"] for p in s["phases"]]
    assert s["progress"]["weights_bytes"] == 64 << 20  # found from the watched process's command line


def test_watch_a_crash_of_a_foreign_server_is_failed(tmp_path: Path, weights: Path):
    r, _ = _watch_sim(tmp_path, "crash_oom", "--model-path", str(weights))
    assert r.rc == 1, r.stderr[-3000:]
    assert r.summary["failure"] == "oom"


def test_models_and_health_200_forever_is_never_ready():
    with fault_server("models_only") as s:
        r = run_firstlight("watch", s.url, "--json", "--timeout", "2", *FAST)
    assert r.rc == 3
    assert r.summary["verdict"] == "timeout" and r.summary["level"] == "models"
    assert r.summary["ready_at"] is None


def test_a_server_that_never_answers_does_not_hang_firstlight():
    with fault_server("silent") as s:
        t0 = time.monotonic()
        r = run_firstlight("watch", s.url, "--json", "--timeout", "2", "--read-timeout", "0.5", *FAST)
        took = time.monotonic() - t0
    assert r.rc == 3 and r.summary["level"] == "port"
    assert took < 15


def test_empty_completions_fail_as_bad_generation():
    with fault_server("empty") as s:
        r = run_firstlight("watch", s.url, "--json", "--timeout", "20", *FAST)
    assert r.rc == 1
    assert r.summary["failure"] == "bad_generation"


def test_probe_levels_against_a_loading_then_loaded_server(tmp_path: Path, weights: Path):
    port = free_port()
    # llama.cpp-style: the port opens at once, /health says 503 "Loading model" while the weights load.
    # The loading window is long (60 s) so that the probes land in it even on a busy machine; the loaded
    # check runs against a second server that loads at once.
    server, _ = _start_sim(tmp_path, "normal", port, "--dialect", "llamacpp", "--model-path", str(weights),
                           "--load-seconds", "60")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _port_open(url), 20, "the port")
        loading_port = run_firstlight("probe", url, "--level", "port")
        loading_gen = run_firstlight("probe", url, "--level", "generation", "--json")
        loading_models = run_firstlight("probe", url, "--level", "models", "--engine", "llamacpp")
        still_loading = _health(url) == 503
    finally:
        server.kill()
        server.wait()
    assert still_loading, "the loading window ended before the probes ran"
    port = free_port()
    server, _ = _start_sim(tmp_path, "normal", port, "--dialect", "llamacpp", "--model-path", str(weights),
                           "--load-seconds", "0")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _health(url) == 200, 30, "health 200")
        loaded = run_firstlight("probe", url, "--level", "generation", "--json")
    finally:
        server.kill()
        server.wait()
    assert loading_port.rc == 0
    assert loading_gen.rc == 1 and "503" in loading_gen.stderr
    assert loading_models.rc == 1  # /v1/models answers 200 while loading, but the ladder never skips /health
    assert loaded.rc == 0, loaded.stderr


def test_probe_is_bounded_by_its_timeout():
    with fault_server("silent") as s:
        t0 = time.monotonic()
        r = run_firstlight("probe", s.url, "--timeout", "1")
        took = time.monotonic() - t0
    assert r.rc == 1
    # the probe is capped at 1 s per request against a server that never answers; the bound leaves room for the
    # interpreter start-up on a busy machine, far below "for ever"
    assert took < 30


def test_probe_bad_url_is_a_usage_error():
    r = run_firstlight("probe", "http://:::")
    assert r.rc == 64 and "Traceback" not in r.stderr
    r = run_firstlight("watch", "http://no-such-host.invalid:8000", "--timeout", "600")
    assert r.rc == 64 and "cannot resolve host" in r.stderr and "Traceback" not in r.stderr


def _port_open(url: str) -> bool:
    try:
        httpx.get(url + "/health", timeout=0.5)
        return True
    except httpx.HTTPError:
        return False


def _health(url: str) -> int | None:
    try:
        return httpx.get(url + "/health", timeout=1).status_code
    except httpx.HTTPError:
        return None


def test_watch_by_url_alone_identifies_the_engine_by_its_endpoints(tmp_path: Path, weights: Path):
    port = free_port()
    server, _ = _start_sim(tmp_path, "normal", port, "--dialect", "llamacpp", "--model-path", str(weights),
                           "--load-seconds", "2")
    try:
        r = run_firstlight("watch", f"http://127.0.0.1:{port}", "--json", *FAST)
    finally:
        server.kill()
        server.wait()
    assert r.rc == 0, r.stderr[-3000:]
    assert r.summary["engine"] == "llamacpp"
    assert any(e["event"] == "note" and "identified by its endpoints" in e["message"] for e in r.events)
