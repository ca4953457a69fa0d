"""``/events`` and ``/startupz`` of the readiness server (firstlight.report.readiness) on a real socket: the events
as they happen, resumption with ``Last-Event-ID``, the client bound, the stream outliving the request deadline,
and the start's state in every endpoint's body."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from firstlight.assessment import Event
from firstlight.report import events as event_log
from firstlight.report import readiness
from firstlight.report.readiness import ReadinessServer
from tests.support.common import wait_for
from tests.support.readiness import _assessment, _outcome, get


@pytest.fixture
def server() -> Iterator[ReadinessServer]:
    s = ReadinessServer("127.0.0.1", 0)
    yield s
    s.close()


def _events(port: int, n: int, last_id: int | None = None, timeout: float = 20) -> list[tuple[int, dict[str, Any]]]:
    """The next ``n`` events of /events (id, object), read by a real HTTP client within ``timeout`` seconds."""
    headers = {} if last_id is None else {"Last-Event-ID": str(last_id)}
    out: list[tuple[int, dict[str, Any]]] = []
    deadline = time.monotonic() + timeout
    with httpx.stream("GET", f"http://127.0.0.1:{port}/events", headers=headers,
                      timeout=httpx.Timeout(timeout, connect=5)) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        event_id = None
        for line in r.iter_lines():
            assert time.monotonic() < deadline, out
            if line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("data: "):
                assert event_id is not None
                out.append((event_id, json.loads(line[6:])))
                if len(out) == n:
                    return out
    raise AssertionError(f"the stream ended after {out}")


def _phase(name: str, t: float = 1.0) -> Event:
    return Event(t, "phase", name, {})


def test_the_stream_sends_the_json_lines_objects_in_order_with_growing_ids(server: ReadinessServer):
    server.started({"pid": 4242, "started_at": 100.0})
    server.event(_phase("weights_loading"), _assessment())
    server.message("preflight: ok")
    server.verdict(_outcome("ready", ready_at=1.0).result)
    got = _events(server.port, 4)
    assert [e["event"] for _, e in got] == ["started", "phase", "message", "verdict"]
    first = server.events.first_id
    assert [i for i, _ in got] == [first, first + 1, first + 2, first + 3]
    assert got[0][1]["pid"] == 4242 and got[1][1]["message"] == "weights_loading"
    assert got[3][1]["verdict"] == "ready"


def test_an_event_reaches_a_waiting_client_as_it_happens(server: ReadinessServer):
    server.started({"pid": 1, "started_at": 0.0})
    appended: dict[str, float] = {}

    def later() -> None:
        appended["at"] = time.monotonic()
        server.event(_phase("cuda_graph"), _assessment(phase="cuda_graph"))

    threading.Timer(0.5, later).start()
    got = _events(server.port, 2)
    received = time.monotonic()
    assert got[1][1]["message"] == "cuda_graph"
    assert received - appended["at"] < 5  # pushed when it happened, not at the next keep-alive (15 s)


def test_last_event_id_resumes_after_that_event(server: ReadinessServer):
    server.started({"pid": 1, "started_at": 0.0})
    for name in ("weights_loading", "kv_cache", "cuda_graph"):
        server.event(_phase(name), _assessment(phase=name))
    first = server.events.first_id
    got = _events(server.port, 2, last_id=first + 1)
    assert [i for i, _ in got] == [first + 2, first + 3] and got[0][1]["message"] == "kv_cache"


def test_an_id_from_before_a_restart_follows_the_new_log_from_its_start(server: ReadinessServer):
    """The sidecar restarted: the client's Last-Event-ID is the earlier process's, below this log's first id (its
    ids count from the wall clock's milliseconds when it began); an id past the newest is not this log's either."""
    server.started({"pid": 1, "started_at": 0.0})
    server.event(_phase("weights_loading"), _assessment(phase="weights_loading"))
    first = server.events.first_id
    assert abs(first - time.time() * 1000) < 60_000
    for stale in (first - 1, 5, first + 10**6):
        got = _events(server.port, 2, last_id=stale)
        assert [i for i, _ in got] == [first, first + 1], stale


def test_a_stream_outlives_the_per_request_deadline(server: ReadinessServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(readiness, "REQUEST_TIMEOUT_S", 0.3)  # read at each connection's start
    server.started({"pid": 1, "started_at": 0.0})
    threading.Timer(1.5, lambda: server.event(_phase("warmup"), _assessment(phase="warmup"))).start()
    got = _events(server.port, 2)  # the second event comes 5x the deadline after the request
    assert got[1][1]["message"] == "warmup"


def test_more_streams_than_the_bound_get_a_503_and_probes_still_answer(server: ReadinessServer):
    server.started({"pid": 1, "started_at": 0.0})
    bound = event_log.MAX_CLIENTS
    streams = [httpx.stream("GET", f"http://127.0.0.1:{server.port}/events", timeout=10) for _ in range(bound)]
    opened = []
    try:
        for s in streams:
            r = s.__enter__()
            opened.append(s)
            assert r.status_code == 200
            next(r.iter_lines())  # the stream is open: its "retry:" line came
        over = httpx.get(f"http://127.0.0.1:{server.port}/events", timeout=5)
        assert over.status_code == 503 and "at most" in over.json()["error"]
        assert get(server.port, "/livez")[0] == 200  # a probe never waits behind the streams
    finally:
        for s in opened:
            s.__exit__(None, None, None)


def test_closing_the_server_ends_every_stream_after_what_is_left(server: ReadinessServer):
    server.started({"pid": 1, "started_at": 0.0})
    seen: list[str] = []
    ended = threading.Event()

    def follow() -> None:
        with httpx.stream("GET", f"http://127.0.0.1:{server.port}/events", timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:])["event"])
        ended.set()

    threading.Thread(target=follow, daemon=True).start()
    deadline = time.monotonic() + 20
    while not seen and time.monotonic() < deadline:
        ended.wait(0.02)
    server.summary(_outcome("ready", ready_at=1.0).result)
    server.close()
    assert ended.wait(20), seen
    assert seen[-1] == "summary", seen


def test_startupz_says_state_phase_detail_elapsed_progress_and_eta(server: ReadinessServer):
    p = server.port
    assert get(p, "/startupz")[1]["state"] == "starting"  # waiting for the first start
    server.started({"pid": 7, "started_at": 0.0})
    a = _assessment(phase="warmup")
    a.detail = "busy-wait suspected"
    server.status(a)
    code, body = get(p, "/startupz")
    assert code == 503
    assert (body["state"], body["phase"], body["detail"], body["elapsed_seconds"]) == \
        ("starting", "warmup", "busy-wait suspected", 3.0)
    assert body["progress"]["weights_fraction"] == 0.4 and body["eta_s"] == 42.0
    ready = _outcome("ready", level="generation").result
    ready = dataclasses.replace(ready, ready_at=ready.started_at + 12.5)
    server.verdict(ready)
    code, body = get(p, "/startupz")
    assert code == 200 and body["state"] == "ready" and body["elapsed_seconds"] == 12.5
    assert get(p, "/readyz")[1]["state"] == "ready"  # every endpoint's body says the same


# -- the stream's bytes, read from a raw socket -------------------------------------------------------------------
def _raw_stream(port: int, request: bytes, until: bytes | None = None, timeout: float = 20) -> tuple[dict[str, str],
                                                                                                      bytes]:
    """(headers by lower-case name, body) of one request: the body up to ``until`` (else to the end)."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while time.monotonic() < deadline:
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep and until is not None and until in body:
                break
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        else:
            raise AssertionError(f"no {until!r} within {timeout}s: {data!r}")
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    headers[":status"] = lines[0].split()[1]
    return headers, body


def test_the_stream_says_it_is_an_uncached_unbuffered_event_stream_any_page_may_follow(server: ReadinessServer):
    headers, _ = _raw_stream(server.port, b"GET /events HTTP/1.0\r\n\r\n", until=b"retry: ")
    assert headers[":status"] == "200" and headers["content-type"] == "text/event-stream"
    assert headers["cache-control"] == "no-store" and headers["x-accel-buffering"] == "no"
    assert headers["access-control-allow-origin"] == "*"


def test_head_of_the_stream_is_its_headers_alone(server: ReadinessServer):
    server.events.append({"event": "message", "message": "x"})
    headers, body = _raw_stream(server.port, b"HEAD /events HTTP/1.0\r\n\r\n")
    assert (headers[":status"], headers["content-type"], body) == ("200", "text/event-stream", b"")
    assert server.events.clients == 0  # the stream was left at once
    server.events.max_clients = 0  # full: the refusal, still without a body
    headers, body = _raw_stream(server.port, b"HEAD /events HTTP/1.0\r\n\r\n")
    assert (headers[":status"], body) == ("503", b"")


def test_a_closed_log_ends_the_stream_after_exactly_its_events(server: ReadinessServer):
    first = server.events.append({"event": "message", "message": "one"})
    done: dict[str, bytes] = {}
    reader = threading.Thread(target=lambda: done.update(body=_raw_stream(server.port,
                                                                          b"GET /events HTTP/1.0\r\n\r\n")[1]))
    reader.start()
    wait_for(lambda: server.events.clients == 1, 20, "the stream to begin")
    second = server.events.append({"event": "message", "message": "two"})
    assert server.events.close(20)
    reader.join(20)
    data = server.events.after(0, 0)[0]
    assert done["body"] == (f"retry: {event_log.RETRY_MS}\n\n".encode() + b"".join(event_log.frame(i, d)
                                                                                  for i, d in data))
    assert [i for i, _ in data] == [first, second]  # no keep-alive between events, none at the end


def test_an_idle_stream_sends_a_keep_alive_comment(server: ReadinessServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(event_log, "KEEPALIVE_S", 0.2)
    _, body = _raw_stream(server.port, b"GET /events HTTP/1.0\r\n\r\n", until=b": keep-alive\n\n: keep-alive\n\n")
    head = f"retry: {event_log.RETRY_MS}\n\n".encode()
    assert body.startswith(head)
    # nothing but comments; a reader slower than them may find more than two, the last one still arriving
    *complete, partial = body[len(head):].split(b"\n\n")
    assert len(complete) >= 2 and set(complete) == {b": keep-alive"} and b": keep-alive".startswith(partial)


def test_a_client_further_behind_than_the_log_is_told_how_many_it_missed(server: ReadinessServer):
    small = event_log.EventLog(capacity=2)
    server.events = server._server.events = small
    for n in range(5):
        small.append({"event": "message", "message": str(n)})
    _, body = _raw_stream(server.port, b"GET /events HTTP/1.0\r\nLast-Event-ID: 1\r\n\r\n", until=b"id: 5\n")
    kept = small.after(0, 0)[0]
    assert body.startswith(f"retry: {event_log.RETRY_MS}\n\n: 2 earlier events are no longer kept\n\n".encode()
                           + event_log.frame(*kept[0]))
