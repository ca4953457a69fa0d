"""Helpers shared by tests/e2e/bench/test_client.py, tests/e2e/cli/test_bench.py, tests/e2e/bench/test_spec.py,
tests/unit/bench/test_client.py, tests/unit/cli/test_bench.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from firstlight.sim.fixtures import free_port
from tests.support.common import sim_cmd, wait_for


@contextlib.contextmanager
def running_sim(*extra: str, scenario: str = "normal", dialect: str = "sglang", rate: float = 50.0,
                timeout: float = 30.0) -> Iterator[str]:
    """The simulated server on a free port; yields its URL once /health answers 200 (deadline ``timeout``)."""
    port = free_port()
    cmd = sim_cmd(scenario, port, "--dialect", dialect, "--token-rate", str(rate), "--load-seconds", "0.1", *extra)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert proc.poll() is None, f"the simulated server exited with {proc.returncode}"
        try:
            return httpx.get(f"{url}/health", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(healthy, timeout, "the simulated server's /health to answer 200")
        yield url
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def fake_server(post: Callable[[BaseHTTPRequestHandler, threading.Event], None]) -> Iterator[str]:
    """A tiny HTTP server whose POST behaviour the test chooses; GET /v1/models lists one model."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = b'{"data": [{"id": "fake-model"}]}' if self.path == "/v1/models" else b"{}"
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with contextlib.suppress(OSError):
                post(self, stop)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def _sse_head(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Connection", "close")
    h.end_headers()
    h.close_connection = True
