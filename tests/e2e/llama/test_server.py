"""End to end against a real engine: llama.cpp's llama-server with a real model (SmolLM2-135M, GGUF).

scripts/setup_llama_server.py builds the server and extracts the model into the cache; CI runs it first.
Outside CI these tests skip, with the reason, when the binary is absent; in CI they must run.

A big context (-c 65536) makes llama-server spend ~5 s allocating its KV cache with the port already open
and /health answering 503 "Loading model": a real loading window to probe and to interrupt.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from firstlight.cli import main as cli_main
from firstlight.config import ProbeConfig
from firstlight.probes.ladder import Ladder
from firstlight.sim.fixtures import free_port
from firstlight.timeline import Level
from tests.support.common import Output, children, firstlight_cmd, run_firstlight, wait_for
from tests.support.llama_server import (
    FAST,
    SLOW_LOAD,
    llama,  # noqa: F401 (a fixture)
    server_cmd,
)

pytestmark = pytest.mark.llama


def _llama_seconds(text: str) -> float | None:
    """llama.cpp's log prefix: elapsed time since start, M.SS.mmm.uuu."""
    m = re.match(r"\s*(\d+)\.(\d\d)\.(\d{3})\.(\d{3}) ", text)
    return None if m is None else int(m[1]) * 60 + int(m[2]) + int(m[3]) / 1e3 + int(m[4]) / 1e6


def test_up_is_ready_after_a_real_completion_with_phases_and_consistent_timings(llama: dict[str, str]):  # noqa: F811
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", *FAST, "--", *server_cmd(llama, port, *SLOW_LOAD))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["engine"] == "llamacpp" and s["verdict"] == "ready"
    assert s["first_generation"]["text"].strip()
    names = [p["name"] for p in s["phases"]]
    # From llama.cpp's own lines (the big context also prints a KV-cache warning, hence kv_cache when present).
    assert [n for n in names if n != "kv_cache"] == ["process_start", "weights_loading", "warmup", "ready"], names
    # READY only after the generation, which comes after /health said 200, which comes after the engine's line.
    assert s["ready_at"] >= s["levels"]["generation"] >= s["levels"]["health"] >= s["engine_ready_at"] - 0.5
    # Our clock and the server's own log timestamps agree on when the model finished loading.
    loaded = next(line for line in r.stderr.splitlines() if "model loaded" in line and _llama_seconds(line))
    server_elapsed = _llama_seconds(loaded)
    assert server_elapsed is not None and server_elapsed > 0
    assert abs((s["engine_ready_at"] - s["started_at"]) - server_elapsed) < 0.5


def test_up_with_chat_completions_and_expect(llama: dict[str, str]):  # noqa: F811
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--api", "chat", "--max-tokens", "16",
                       "--expect", r"\w", *FAST, "--", *server_cmd(llama, port))
    assert r.rc == 0, r.stderr[-3000:]
    assert r.summary["first_generation"]["text"].strip()
    r = run_firstlight("up", "--json", "--api", "chat", "--expect", r"^no such answer$", *FAST, "--",
                       *server_cmd(llama, free_port()))
    assert r.rc == 1 and r.summary["failure"] == "bad_generation", r.stderr[-2000:]


def test_watch_attaches_to_a_separately_started_server(llama: dict[str, str]):  # noqa: F811
    port = free_port()
    server = subprocess.Popen(server_cmd(llama, port, *SLOW_LOAD), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        r = run_firstlight("watch", f"http://127.0.0.1:{port}", "--pid", str(server.pid), "--json", *FAST)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["engine"] == "llamacpp" and s["pid"] == server.pid  # detected from the watched command line
    assert s["levels"]["port"] < s["levels"]["health"]  # it was watched while loading


def _probe_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The real `firstlight probe` command, run in this process: no interpreter start-up, so that it fits
    in llama-server's loading window, which lasts well under a second once the machine is warm."""
    with pytest.raises(SystemExit) as exit_:
        cli_main(["probe", *args])
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


def test_probe_levels_while_loading_and_when_loaded(llama: dict[str, str], capsys: pytest.CaptureFixture[str]):  # noqa: F811
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(server_cmd(llama, port, *SLOW_LOAD), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: _status(url + "/health") == 503, 30, "/health 503 while loading", interval=0.002)
        health = _probe_in_process(capsys, url, "--level", "health")
        models = _probe_in_process(capsys, url, "--level", "models", "--engine", "llamacpp")
        serving = _probe_in_process(capsys, url, "--level", "generation", "--json")
        port_ok = _probe_in_process(capsys, url, "--level", "port")
        still_loading = _status(url + "/health") == 503
        # The same ladder in a tight loop: while /health says 503 the serving level never holds.
        seen_503 = seen_ready = 0
        with Ladder(ProbeConfig(url=url, read_timeout=2, generation_timeout=30)) as ladder:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not seen_ready:
                results = ladder.climb()
                top = max((p.level for p in results if p.ok), default=Level.NONE)
                if any(p.level == Level.HEALTH and p.status == 503 for p in results):
                    seen_503 += 1
                    assert top < Level.GENERATION
                seen_ready += top == Level.GENERATION
        loaded = run_firstlight("probe", url, "--level", "generation", "--timeout", "120")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert still_loading, "the loading window closed before the CLI probes ran"
    assert port_ok[0] == 0
    assert health[0] == 1 and "503" in health[2]
    assert models[0] == 1  # /v1/models may answer while loading, but the ladder does not skip /health
    assert serving[0] == 1 and json.loads(serving[1])["held"] in ("port", "http")
    assert seen_503 >= 1 and seen_ready == 1
    assert loaded.rc == 0, loaded.stderr


@pytest.mark.parametrize("case", ["missing", "truncated", "not_gguf", "port_in_use"])
def test_failures_end_quickly_with_the_category_and_the_servers_own_line(llama: dict[str, str], tmp_path: Path,  # noqa: F811
                                                                        case: str):
    port = free_port()
    model = llama["model"]
    blocker = None
    if case == "missing":
        model, category, needle = str(tmp_path / "absent.gguf"), "model_not_found", "failed to open GGUF file"
    elif case == "truncated":
        model = str(tmp_path / "truncated.gguf")  # an interrupted download: half the file
        with open(llama["model"], "rb") as src, open(model, "wb") as dst:
            dst.write(src.read(Path(llama["model"]).stat().st_size // 2))
        category, needle = "corrupt_weights", "corrupted or incomplete"
    elif case == "not_gguf":
        model = str(tmp_path / "notes.gguf")
        Path(model).write_text("this is not a model\n" * 100)
        category, needle = "corrupt_weights", "invalid magic"
    else:
        blocker = socket.socket()
        blocker.bind(("127.0.0.1", port))
        blocker.listen(1)
        # found before the launch (nothing is started): the evidence names who holds the port
        category, needle = "port_in_use", f"held by pid {os.getpid()}"
    try:
        t0 = time.monotonic()
        # --no-preflight: the server's own failure is under test (test_preflight.py: caught before launch)
        r = run_firstlight("up", "--json", "--no-preflight", *FAST, "--", *server_cmd(llama, port, model=model))
        took = time.monotonic() - t0
    finally:
        if blocker is not None:
            blocker.close()
    assert r.rc == 1, r.stderr[-3000:]
    s = r.summary
    assert s["failure"] == category, s["evidence"]
    assert needle in s["evidence"][0]["value"]  # the server's own error line (or who holds the port)
    assert took < 15  # it exits within ~50 ms; the rest is two interpreter start-ups


def _start_up(llama: dict[str, str], port: int, *extra: str, grace: str = "3") -> subprocess.Popen[str]:  # noqa: F811
    return subprocess.Popen(firstlight_cmd("up", "--json", "--grace", grace, *FAST, "--",
                                           *server_cmd(llama, port, *extra)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def _server_of(fl: subprocess.Popen[str], llama: dict[str, str]) -> psutil.Process:  # noqa: F811
    """firstlight's child that runs llama-server: not any child (a preflight's helper comes and goes before it;
    taking the first one failed once, NoSuchProcess, in a fresh CI run)."""

    def server() -> psutil.Process | None:
        for p in children(fl.pid):
            try:
                if p.cmdline()[:1] == [llama["llama_server"]]:
                    return p
            except psutil.Error:  # gone meanwhile, or not yet exec'd
                continue
        return None

    found = wait_for(server, 30, "llama-server")
    assert isinstance(found, psutil.Process)
    return found


def _gone_within(proc: psutil.Process, seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
    except psutil.TimeoutExpired:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_loading_stops_the_server(llama: dict[str, str], sig: signal.Signals):  # noqa: F811
    port = free_port()
    fl = _start_up(llama, port, *SLOW_LOAD)
    try:
        server = _server_of(fl, llama)
        wait_for(lambda: _status(f"http://127.0.0.1:{port}/health") == 503, 30, "loading")
        fl.send_signal(sig)
        fl.communicate(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert fl.returncode == 130
    assert _gone_within(server, 3 + 3)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_after_ready_stops_the_supervised_server(llama: dict[str, str], sig: signal.Signals):  # noqa: F811
    port = free_port()
    fl = _start_up(llama, port)
    try:
        server = _server_of(fl, llama)
        output = Output(fl)
        _wait_ready(output)
        fl.send_signal(sig)
        out, _ = output.rest(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert fl.returncode == 130
    assert json.loads(out.splitlines()[-1])["verdict"] == "interrupted"
    assert _gone_within(server, 3 + 3)


def test_sigterm_during_a_long_completion_escalates(llama: dict[str, str]):  # noqa: F811
    # llama-server logs "cleaning up before exit..." on TERM and then hangs with a completion in flight;
    # a second SIGTERM makes it exit at once (scripts/llama_server_notes.md), SIGKILL is the last resort.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    fl = _start_up(llama, port, "-c", "4096", grace="2")
    client_done = threading.Event()
    try:
        server = _server_of(fl, llama)
        output = Output(fl)
        _wait_ready(output)

        def long_completion() -> None:
            try:
                httpx.post(url + "/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 3000,
                                                          "ignore_eos": True}, timeout=120)
            except httpx.HTTPError:
                pass
            client_done.set()

        threading.Thread(target=long_completion, daemon=True).start()
        wait_for(lambda: _metric(url, "llamacpp:requests_processing") >= 1, 30, "the completion in flight")
        t0 = time.monotonic()
        fl.send_signal(signal.SIGTERM)
        _, err = output.rest(timeout=60)
        assert _gone_within(server, 2 + 5), "llama-server survived the grace period"
        took = time.monotonic() - t0
    finally:
        if fl.poll() is None:
            fl.kill()
    assert fl.returncode == 130
    assert took < 2 + 5
    # It ignored the first SIGTERM (a completion in flight) and went at the second, before any SIGKILL.
    assert "stopped by a second SIGTERM" in err or "SIGKILL" in err, err[-2000:]


def test_detach_leaves_the_server_serving(llama: dict[str, str], tmp_path: Path):  # noqa: F811
    port = free_port()
    r = run_firstlight("up", "--json", "--detach", *FAST, "--", *server_cmd(llama, port),
                       env={"TMPDIR": str(tmp_path)})  # the server's output file: in the test's directory
    assert r.rc == 0, r.stderr[-3000:]
    pid = r.summary["pid"]
    try:
        resp = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json={"prompt": "Hello", "max_tokens": 4},
                          timeout=30)
        assert resp.status_code == 200 and resp.json()["choices"][0]["text"]
    finally:
        os.killpg(pid, signal.SIGKILL)


def _wait_ready(output: Output) -> dict[str, Any]:
    return output.wait_event("summary", 60, "READY", verdict="ready")


def _status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=1).status_code
    except httpx.HTTPError:
        return None


def _metric(url: str, name: str) -> float:
    try:
        text = httpx.get(url + "/metrics", timeout=2).text
    except httpx.HTTPError:
        return 0.0
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0
