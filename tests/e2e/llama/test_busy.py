"""Busy is not hung (issue 32): a one-slot llama-server generating one long request was ``not_serving`` for the
whole request (every 1-token check waits behind it; its counters move only at the request's end). Its /slots
say the tokens still come: serving. The real llama-server (one slot) and a real streaming client."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, wait_for
from tests.support.llama_server import llama  # noqa: F401 (llama is a fixture)
from tests.support.readiness import answers, get

pytestmark = pytest.mark.llama
STREAM_S = 16.0  # longer than two checks' interval + generation timeout (2 x (2 + 6) = 16 s) would take to fail

STOP_S = 120.0  # SIGTERM to exit: the 10 s grace, the reaping and the summary, beside a busy machine's other tests
INTERVAL, GEN_TIMEOUT, STALL = 2.0, 6.0, 14.0  # as tests/e2e/llama/test_serving.py: generous on 2 busy cores


def test_a_one_slot_llama_server_busy_on_a_long_request_is_serving(llama: dict[str, str],  # noqa: F811
                                                                   tmp_path: Path):
    port, rport = free_port(), free_port()
    err = tmp_path / "firstlight.err"  # what firstlight said, for the failure message
    # Without --metrics: only the checks (each waits behind the long request) and the slots can tell.
    err_file = err.open("wb")  # closed when the test ends: firstlight writes into it until it exits
    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--no-preflight", "--no-history", "--poll-min", "0.05",
                                         "--serving-interval", str(INTERVAL), "--max-tokens", "2",
                                         "--generation-timeout", str(GEN_TIMEOUT), "--stall-timeout", str(STALL),
                                         "--serve-readiness", f"127.0.0.1:{rport}", "--", llama["llama_server"],
                                         "-m", llama["model"], "--host", "127.0.0.1", "--port", str(port), "-np",
                                         "1", "-c", "2048"),
                          stdout=subprocess.DEVNULL, stderr=err_file, stdin=subprocess.DEVNULL)
    states: list[str | None] = []
    chunks = 0
    try:
        wait_for(lambda: answers(rport, "/readyz", 200), 120, "READY")
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                states.append((get(rport, "/readyz")[1].get("serving") or {}).get("state"))
                done.wait(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        body = {"prompt": "Tell a long story about a lighthouse.", "max_tokens": 4000, "ignore_eos": True,
                "stream": True}
        end = time.monotonic() + STREAM_S
        with httpx.Client(timeout=30) as client, client.stream("POST", f"http://127.0.0.1:{port}/v1/completions",
                                                               json=body) as r:
            for _ in r.iter_lines():
                chunks += 1
                if time.monotonic() > end:
                    break  # closing the stream cancels the request
        done.set()
        watcher.join(5)
        fl.send_signal(signal.SIGTERM)
        try:  # the server's stop (a second SIGTERM at half the 10 s grace, then SIGKILL) and the summary
            fl.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"firstlight still running {STOP_S:g} s after SIGTERM; its stderr ends: "
                                 f"{err.read_text(errors='replace')[-3000:]}") from None
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
        err_file.close()
    assert chunks > 5, chunks  # the tokens kept coming
    assert "not_serving" not in states and "hung" not in states, states
