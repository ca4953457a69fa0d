"""A refused ``/models/sse`` is retried after a back-off that doubles from 0.2 s (docs/engine-clocks.md), not every
0.2 s: a router that refuses the stream is asked 7 times in 12 s, not 59. Against a real loopback server in this
process that refuses every request in each of the ways a refusal comes: an HTTP error status, a connection accepted
and closed without an answer, a stream answered but ended before its first event. Only lower bounds on the gaps are
asserted: a loaded machine can only make them longer."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from firstlight.samplers.models_sse import BACKOFF_MIN_S, ModelsSSE
from firstlight.timeline import Observation
from tests.support.common import wait_for

TRIES = 4  # three gaps: 0.2, 0.4, 0.8 s with the back-off; 0.2 s each without it
REFUSALS = {
    "503": b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    "500": b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    "closed without an answer": b"",
    # accepted, then ended before any event (a proxy that buffers, a router closing it): no "at once" retry
    "an empty stream": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n"
                       b"Connection: close\r\n\r\n",
}


@pytest.fixture(params=sorted(REFUSALS))
def refusing(request: pytest.FixtureRequest) -> Iterator[tuple[int, list[float]]]:
    """A loopback listener that refuses every request the same way; yields (port, the times of its requests)."""
    answer = REFUSALS[request.param]
    seen: list[float] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)  # accept wakes to see the test is over (closing a listener does not wake it)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                seen.append(time.monotonic())
                conn.settimeout(2.0)
                try:
                    conn.recv(65536)  # the request's head (small: one read)
                    conn.sendall(answer)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], seen
    finally:
        done.set()
        thread.join(5)
        listener.close()


def test_a_refused_models_sse_is_retried_after_a_back_off_that_doubles(refusing: tuple[int, list[float]]):
    port, seen = refusing
    got: list[Observation] = []
    src = ModelsSSE(f"http://127.0.0.1:{port}")
    src.start(got.append)
    try:
        wait_for(lambda: len(seen) >= TRIES, 20.0, f"{TRIES} requests to the refusing server")
    finally:
        src.stop()
        src.join(5)
    gaps = [b - a for a, b in itertools.pairwise(seen[:TRIES])]
    floors = [0.9 * BACKOFF_MIN_S * 2 ** i for i in range(TRIES - 1)]
    assert all(g >= f for g, f in zip(gaps, floors, strict=True)), (gaps, floors)
    assert src.events == 0  # nothing was read: every try was refused

