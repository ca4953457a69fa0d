"""--serve-readiness against the real engine: llama.cpp's llama-server with a real model, through `firstlight up`
and the sidecar loop of `firstlight watch` (the engine restarted under it, as a kubelet would)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid

import httpx
import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, wait_for
from tests.support.llama_server import SLOW_LOAD, llama, server_cmd  # noqa: F401 (llama is a fixture)
from tests.support.readiness import FAST, answers, get

pytestmark = pytest.mark.llama


def test_up_serves_readyz_only_after_a_real_generation(llama: dict[str, str]):  # noqa: F811
    port, rport = free_port(), free_port()
    fl = subprocess.Popen(firstlight_cmd("up", "--json", *FAST, "--serve-readiness", f"127.0.0.1:{rport}", "--",
                                         *server_cmd(llama, port, *SLOW_LOAD)),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    polls: list[tuple[float, int, str | None, int]] = []  # (answered by, /readyz, level, llama's /v1/models)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (polls and polls[-1][1] == 200):
            code, body = get(rport, "/readyz")
            try:
                models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code
            except httpx.HTTPError:
                models = 0
            polls.append((time.time(), code, body.get("level"), models))
            time.sleep(0.01)  # the polling period of this deadline-bounded loop
        assert polls and polls[-1][1] == 200, "/readyz never turned 200"
        assert get(rport, "/startupz")[0] == 200 and get(rport, "/livez")[0] == 200
        fl.send_signal(signal.SIGTERM)
        out, _ = fl.communicate(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
    summaries = [e for e in map(json.loads, filter(lambda x: x.startswith("{"), out.splitlines()))
                 if e["event"] == "summary"]
    generation_at = summaries[0]["levels"]["generation"]
    before = [p for p in polls if p[0] < generation_at and p[1] != 0]
    assert before, "firstlight listens before it launches the server: answers before READY must exist"
    assert all(p[1] == 503 and p[2] != "generation" for p in before), before
    # firstlight itself saw the engine list its model (the check a naive readiness probe stops at) before its own
    # generation, and /readyz said 503 until that generation; every poll the test made while /v1/models already
    # answered 200 said 503 too (that window, between the load's end and the generation, may be too short to poll)
    levels = summaries[0]["levels"]
    assert levels.get("models") is not None and levels["models"] <= generation_at, levels
    window = [p for p in before if p[3] == 200]
    assert all(p[1] == 503 for p in window)
    assert fl.returncode == 130 and summaries[-1]["verdict"] == "interrupted"


def test_sidecar_watches_a_restarted_llama_server_again(llama: dict[str, str]):  # noqa: F811
    port, rport, alias = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid-from", alias, *FAST,
                                         "--no-history", "--serve-readiness", f"127.0.0.1:{rport}"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    servers: list[subprocess.Popen[bytes]] = []

    def start_server() -> subprocess.Popen[bytes]:
        p = subprocess.Popen([*server_cmd(llama, port), "--alias", alias], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        servers.append(p)
        return p

    try:
        wait_for(lambda: answers(rport, "/livez", 200, start=0), 60, "the sidecar, waiting for llama-server")
        first = start_server()
        body = wait_for(lambda: answers(rport, "/readyz", 200, start=1), 90, "/readyz 200 for the first start")
        assert body["pid"] == first.pid and body["evidence"][0]["signal"] == "probe:generation"
        first.send_signal(signal.SIGTERM)  # the kubelet restarts the engine container
        first.wait(timeout=30)
        body = wait_for(lambda: answers(rport, "/readyz", 503, verdict="failed"), 30, "/readyz 503 once it exited")
        assert get(rport, "/livez")[0] == 503 and fl.poll() is None
        second = start_server()
        body = wait_for(lambda: answers(rport, "/readyz", 200, start=2), 90, "/readyz 200 for the restarted server")
        assert body["pid"] == second.pid and get(rport, "/startupz")[0] == 200
        fl.send_signal(signal.SIGTERM)
        assert fl.wait(timeout=30) == 130
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
        for p in servers:
            if p.poll() is None:
                p.kill()
                p.wait()
