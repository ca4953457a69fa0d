"""Probes are answered under a connection flood (issue 32): 80 slow clients held the readiness port's 64
connections and 70 % of /livez probes were refused, enough for the kubelet to restart a healthy engine. Real
sockets: clients that connect, send half a request line and wait, reconnecting when cut."""

from __future__ import annotations

import socket
import threading

import httpx

from firstlight.report.readiness import MAX_CONNECTIONS, ReadinessServer

SLOW_CLIENTS = 80


def _slow_client(port: int, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /readyz HT")  # and nothing more: held until cut
                s.settimeout(1)
                while not stop.is_set():
                    try:
                        if s.recv(1) == b"":
                            break  # cut: connect again, as a flood does
                    except TimeoutError:
                        continue
        except OSError:
            stop.wait(0.05)


def test_livez_is_answered_while_slow_clients_flood_the_port():
    assert SLOW_CLIENTS > MAX_CONNECTIONS
    server = ReadinessServer("127.0.0.1", 0)
    stop = threading.Event()
    clients = [threading.Thread(target=_slow_client, args=(server.port, stop), daemon=True)
               for _ in range(SLOW_CLIENTS)]
    try:
        for c in clients:
            c.start()
        answers = []
        for _ in range(20):
            try:
                answers.append(httpx.get(f"{server.url}/livez", timeout=5).status_code)
            except httpx.HTTPError as e:
                answers.append(type(e).__name__)
            stop.wait(0.1)
        assert answers == [200] * 20, answers
    finally:
        stop.set()
        for c in clients:
            c.join(10)
        server.close()
