"""report/listener.py: a run's end stops its HTTP servers at once, not at their select's next poll."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer

import pytest

from firstlight.report import listener

LONG_POLL_S = 60.0  # shutdown() alone would wait this long for the loop to look at its flag


class _V6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _serving(host: str = "127.0.0.1") -> tuple[ThreadingHTTPServer, threading.Thread]:
    server = (_V6Server if ":" in host else ThreadingHTTPServer)((host, 0), BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": LONG_POLL_S}, daemon=True)
    thread.start()
    return server, thread


def test_a_server_polling_once_a_minute_stops_within_the_bound_and_its_socket_is_closed():
    server, thread = _serving()
    t0 = time.monotonic()
    assert listener.stop(server, within_s=10.0)
    took = time.monotonic() - t0
    thread.join(5.0)
    assert not thread.is_alive() and took < 10.0 < LONG_POLL_S
    assert server.socket.fileno() == -1


def test_a_server_on_another_loopback_address_is_woken_at_its_own():
    server, thread = _serving("127.0.1.5")  # not 127.0.0.1, where nothing listens on its port
    assert listener.stop(server, within_s=10.0)
    thread.join(5.0)
    assert not thread.is_alive()


@pytest.mark.parametrize("every", ["0.0.0.0", "::"])
def test_a_server_on_every_address_is_woken_through_loopback(every: str):
    server, thread = _serving(every)
    assert listener.stop(server, within_s=10.0)
    thread.join(5.0)
    assert not thread.is_alive()


def test_a_server_on_ipv6_loopback_is_woken_at_its_four_part_address():
    server, thread = _serving("::1")  # server_address: (host, port, flowinfo, scope_id)
    t0 = time.monotonic()
    assert listener.stop(server, within_s=10.0)
    thread.join(5.0)
    assert not thread.is_alive() and time.monotonic() - t0 < 10.0


def test_a_loop_that_does_not_end_within_the_bound_is_said_and_the_socket_still_closed():
    entered, release = threading.Event(), threading.Event()

    class Held(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            entered.set()
            release.wait(30)
            self.send_response(204)
            self.end_headers()

    server = HTTPServer(("127.0.0.1", 0), Held)  # one request at a time: the loop waits inside the handler
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    client = socket.create_connection(server.server_address[:2], timeout=5)
    try:
        client.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert entered.wait(10)
        assert listener.stop(server, within_s=0.2) is False
        assert server.socket.fileno() == -1
        left = [t for t in threading.enumerate() if t.name == "firstlight-listener-stop"]
        assert left and all(t.daemon for t in left)  # named in a thread dump, and never holds the exit
    finally:
        release.set()
        client.close()
    thread.join(10)
    assert not thread.is_alive()  # released, the loop saw the stop
