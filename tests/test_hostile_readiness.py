"""The readiness endpoints under hostile clients and options (issue 20): a client that trickles its request is
dropped at the request deadline, connection threads are capped, a bind beyond loopback is warned about, and
``up --detach --serve-readiness`` (endpoints that would die at READY) is refused. Real sockets."""

from __future__ import annotations

import socket
import threading
import time

import httpx

from firstlight.report.readiness import MAX_CONNECTIONS, REQUEST_TIMEOUT_S, ReadinessServer
from firstlight.sim.server import free_port
from tests.support.common import run_firstlight, sim_cmd


def test_a_client_trickling_its_request_is_dropped_at_the_deadline():
    server = ReadinessServer("127.0.0.1", 0)
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sent, closed = 0, False
        request = b"GET /readyz HTTP/1.0\r\n" + b"X-Slow: " + b"a" * 200
        t_end = time.monotonic() + REQUEST_TIMEOUT_S * 6  # a byte every 0.5 s: each read well within its timeout
        while time.monotonic() < t_end:
            try:
                sock.send(request[sent:sent + 1])
                sent += 1
                sock.settimeout(0.5)
                if sock.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except OSError:
                closed = True
                break
        sock.close()
        assert closed, f"still held after {sent} bytes trickled over {REQUEST_TIMEOUT_S * 6:.0f}s"
    finally:
        server.close()


def test_connection_threads_are_capped():
    server = ReadinessServer("127.0.0.1", 0)
    socks = []
    try:
        base = threading.active_count()
        for _ in range(MAX_CONNECTIONS * 3):
            try:
                socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))  # and say nothing
            except OSError:
                break
        peak, until = 0, time.monotonic() + REQUEST_TIMEOUT_S / 2  # sampled while the idle clients are held
        while time.monotonic() < until:
            peak = max(peak, threading.active_count())
            time.sleep(0.05)
        assert len(socks) > 2 * MAX_CONNECTIONS
        assert peak <= base + 2 * MAX_CONNECTIONS, peak - base  # a handler and its deadline timer each
    finally:
        for s in socks:
            s.close()
        server.close()
    server = ReadinessServer("127.0.0.1", 0)  # and it answers
    try:
        assert httpx.get(f"{server.url}/livez", timeout=5).status_code == 200
    finally:
        server.close()


def test_up_detach_with_serve_readiness_is_refused():
    r = run_firstlight("up", "--detach", "--serve-readiness", "127.0.0.1:0", "--", *sim_cmd("normal", free_port()))
    assert r.rc == 64 and "--detach" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_readiness_bind_beyond_loopback_is_warned_about_and_the_help_example_is_loopback():
    port = free_port()
    r = run_firstlight("up", "--no-preflight", "--stop-when-ready", "--poll-min", "0.05", "--serve-readiness",
                       f"0.0.0.0:{free_port()}", "--", *sim_cmd("normal", port, "--load-seconds", "0.2"))
    assert r.rc == 0, r.stderr[-2000:]
    assert "warning: --serve-readiness 0.0.0.0:" in r.stderr and "visible to anyone" in r.stderr
    r = run_firstlight("up", "--no-preflight", "--stop-when-ready", "--poll-min", "0.05", "--serve-readiness",
                       f"127.0.0.1:{free_port()}", "--", *sim_cmd("normal", free_port(), "--load-seconds", "0.2"))
    assert r.rc == 0 and "visible to anyone" not in r.stderr
    assert "--serve-readiness 0.0.0.0" not in run_firstlight("watch", "--help").stdout
