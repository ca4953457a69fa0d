"""``firstlight.wire.client`` against real loopback servers: the benchmark's ``AsyncWire`` (its headers, the base
URL's query, no redirects followed, no proxy from the environment, its read and connect timeouts, its connection
bound), the one TCP connect (refused, unresolved, hung: bounded by its timeout or its deadline) and the port checks
made with it, and the blocking ``Wire``'s edges (no time left, the body's cap)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest

from firstlight.wire import WireError
from firstlight.wire.client import USER_AGENT, AsyncWire, Wire, connect_tcp, port_open
from tests.support.faults import full_accept_queue, serving


class _Recorded(BaseHTTPRequestHandler):
    """Answers 200 ``ok`` (``/redirect``: a 302; ``/slow``: headers, then nothing for 30 s), and records each
    request and how many were in flight at once; an answer waits up to ``hold_s`` for ``together`` requests to be
    in flight, unless all ``total`` came."""

    seen: ClassVar[list[dict[str, Any]]] = []
    lock: ClassVar[threading.Condition] = threading.Condition()
    in_flight: ClassVar[int] = 0
    most: ClassVar[int] = 0
    hold_s: ClassVar[float] = 0.0
    together: ClassVar[int] = 1
    total: ClassVar[int] = 1_000

    def log_message(self, *a: object) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.seen.append({"path": self.path, "headers": dict(self.headers)})
            cls.in_flight += 1
            cls.most = max(cls.most, cls.in_flight)
            cls.lock.notify_all()
        answered = False
        try:
            if self.path.startswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path.startswith("/slow"):
                self.send_response(200)
                self.send_header("Content-Length", "10")
                self.end_headers()
                self.wfile.flush()
                time.sleep(30)
                return
            with cls.lock:
                cls.lock.wait_for(lambda: cls.in_flight >= cls.together or len(cls.seen) >= cls.total, cls.hold_s)
                # out of flight before the answer goes: the server closes each connection (HTTP/1.0), so the
                # client's next request may reach another thread before this one gets past its last write
                cls.in_flight -= 1
                answered = True
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        finally:
            if not answered:
                with cls.lock:
                    cls.in_flight -= 1


@pytest.fixture
def recorded() -> Iterator[tuple[str, type[_Recorded]]]:
    handler = type("H", (_Recorded,), {"seen": [], "lock": threading.Condition(), "in_flight": 0, "most": 0,
                                       "hold_s": 0.0, "together": 1, "total": 1_000})
    with serving(handler) as url:
        yield url, handler


def _wire(url: str, **kw: Any) -> AsyncWire:
    args: dict[str, Any] = {"api_key": None, "connect_timeout": 2.0, "read_timeout": 10.0, "concurrency": 1}
    return AsyncWire(url, **(args | kw))


async def _get(wire: AsyncWire, path: str, within_s: float = 30.0) -> tuple[int, bytes]:
    async with wire.stream("GET", path, deadline_at=time.monotonic() + within_s) as resp:
        return resp.status_code, await resp.aread()


def test_each_request_says_who_asks_and_carries_the_key(recorded):
    url, h = recorded

    async def run() -> None:
        async with _wire(url, api_key="sk-test", user_agent="firstlight-bench") as w:
            await _get(w, "/v1/models")
        async with _wire(url) as w:
            await _get(w, "/v1/models")

    asyncio.run(run())
    keyed, plain = (s["headers"] for s in h.seen)
    assert keyed["User-Agent"] == "firstlight-bench" and keyed["Authorization"] == "Bearer sk-test"
    assert plain["User-Agent"] == USER_AGENT and "Authorization" not in plain


def test_the_base_urls_query_goes_after_each_path(recorded):
    url, h = recorded

    async def run() -> None:
        async with _wire(f"{url}/v1?api-version=2") as w:
            await _get(w, "/v1/completions")  # the base's /v1 is the server's root (firstlight.wire.urls)

    asyncio.run(run())
    assert h.seen[0]["path"] == "/v1/completions?api-version=2"


def test_a_redirect_is_an_answer_not_followed(recorded):
    url, h = recorded

    async def run() -> tuple[int, bytes]:
        async with _wire(url) as w:
            return await _get(w, "/redirect")

    assert asyncio.run(run()) == (302, b"")
    assert [s["path"] for s in h.seen] == ["/redirect"]


def test_a_proxy_in_the_environment_is_not_used(recorded, monkeypatch: pytest.MonkeyPatch):
    url, _ = recorded
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing there: a client that used it would fail
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    async def run() -> tuple[int, bytes]:
        async with _wire(url) as w:
            return await _get(w, "/v1/models")

    assert asyncio.run(run()) == (200, b"ok")
    with Wire(url, connect_timeout=2.0) as blocking:
        assert blocking.get("/v1/models", read_timeout=5.0).status == 200


def test_a_body_that_stops_coming_ends_at_the_read_timeout(recorded):
    url, _ = recorded

    async def run() -> None:
        async with _wire(url, read_timeout=0.3) as w:
            await _get(w, "/slow", within_s=30)

    t0 = time.monotonic()
    with pytest.raises(WireError) as e:
        asyncio.run(run())
    assert e.value.timed_out and time.monotonic() - t0 < 10  # the read timeout, long before the deadline


def test_a_connect_that_hangs_ends_at_the_connect_timeout():
    async def run(port: int) -> None:
        async with _wire(f"http://127.0.0.1:{port}", connect_timeout=0.3) as w:
            await _get(w, "/v1/models", within_s=30)

    with full_accept_queue() as port:
        t0 = time.monotonic()
        with pytest.raises(WireError) as e:
            asyncio.run(run(port))
    assert e.value.timed_out and time.monotonic() - t0 < 10


@pytest.mark.parametrize("concurrency", [1, 2])
def test_no_more_connections_than_the_concurrency_at_once(recorded, concurrency: int):
    url, h = recorded
    # each answer waits for a second request in flight: 0.3 s at most with one connection (none can come), until
    # it comes with two
    h.together, h.total, h.hold_s = 2, 4, 0.3 if concurrency == 1 else 10.0

    async def run() -> None:
        async with _wire(url, concurrency=concurrency) as w:
            await asyncio.gather(*(_get(w, "/v1/models") for _ in range(4)))

    asyncio.run(run())
    assert len(h.seen) == 4 and h.most == concurrency


def test_a_request_waiting_for_a_connection_waits_its_whole_budget(recorded):
    """The pool's wait is the connect and read timeouts together: a request queued behind a long one is not
    failed for lack of a free connection before its own time is up."""
    url, h = recorded
    h.together, h.hold_s = 2, 1.0  # the first answer takes 1 s: the second request waits for its connection

    async def run() -> list[tuple[int, bytes]]:
        async with _wire(url, connect_timeout=0.5, read_timeout=2.0) as w:
            return await asyncio.gather(_get(w, "/v1/models"), _get(w, "/v1/models"))

    assert asyncio.run(run()) == [(200, b"ok"), (200, b"ok")]


def test_port_open_is_whether_the_urls_port_accepts_a_connection():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
        assert port_open(f"http://127.0.0.1:{port}/v1", 1.0)
        assert port_open(f"127.0.0.1:{port}", 1.0)  # a URL as users write it
    assert not port_open(f"http://127.0.0.1:{port}", 1.0)


# -- the one TCP connect and the blocking client's edges ---------------------------------------------------------
def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def test_a_refused_connect_says_so_in_words():
    with pytest.raises(WireError) as e:
        connect_tcp("127.0.0.1", _closed_port(), 2.0, time.monotonic() + 2.0)
    assert (str(e.value), e.value.refused, e.value.timed_out) == ("connection refused", True, False)


def test_a_host_that_does_not_resolve_says_so():
    with pytest.raises(WireError) as e:
        connect_tcp("no-such-host.invalid", 80, 5.0, time.monotonic() + 5.0)
    assert str(e.value).startswith("cannot resolve host (") and not e.value.refused


@pytest.mark.parametrize(("timeout", "within"), [(0.3, 30.0), (30.0, 0.3)])
def test_a_connect_that_hangs_ends_at_its_timeout_or_its_deadline_whichever_first(timeout: float, within: float):
    with full_accept_queue() as port:
        t0 = time.monotonic()
        with pytest.raises(WireError) as e:
            connect_tcp("127.0.0.1", port, timeout, t0 + within)
        took = time.monotonic() - t0
    assert (str(e.value), e.value.timed_out, e.value.refused) == ("connect timed out", True, False)
    assert took < 10


def test_port_open_asks_the_urls_own_host():
    with socket.create_server(("127.0.1.3", 0)) as s:  # not on 127.0.0.1: only this address answers
        port = s.getsockname()[1]
        assert port_open(f"http://127.0.1.3:{port}", 2.0)
        assert not port_open(f"http://127.0.0.1:{port}", 2.0)


def test_the_wires_port_check_keeps_the_callers_deadline_and_says_how_long_it_took():
    with socket.create_server(("127.0.1.5", 0)) as s:  # its own address: only the URL's host reaches it
        with Wire(f"http://127.0.1.5:{s.getsockname()[1]}", connect_timeout=2.0) as w:
            took = w.port_open()
        assert 0 <= took < 2.0
    with full_accept_queue() as port, Wire(f"http://127.0.0.1:{port}", connect_timeout=30.0) as w:
        t0 = time.monotonic()
        with pytest.raises(WireError):
            w.port_open(deadline_at=t0 + 0.3)
        assert time.monotonic() - t0 < 10  # the deadline, not the 30 s connect timeout


def test_a_request_with_no_time_left_is_not_sent(recorded):
    url, h = recorded
    with Wire(url, connect_timeout=2.0) as w, pytest.raises(WireError) as e:
        w.get("/v1/models", read_timeout=5.0, deadline_at=time.monotonic() - 1)
    assert (str(e.value), e.value.timed_out) == ("no time left for the request", True)
    assert h.seen == []


@pytest.mark.parametrize(("size", "truncated"), [(5, False), (6, True)])
def test_a_body_is_read_up_to_its_cap(size: int, truncated: bool):
    class Sized(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.wfile.write(b"abcdef"[:size])

    with serving(Sized) as url, Wire(url, connect_timeout=2.0) as w:
        answer = w.request("GET", "/", read_timeout=5.0, max_body=5)
    assert (answer.body, answer.truncated) == (b"abcdef"[:5], truncated)


def test_a_body_cut_at_its_cap_is_the_bytes_as_they_came():
    class TwoPieces(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "120")
            self.end_headers()
            self.wfile.write(b"a" * 60)
            self.wfile.flush()
            time.sleep(0.2)  # the client reads the first piece on its own
            self.wfile.write(b"b" * 60)

    with serving(TwoPieces) as url, Wire(url, connect_timeout=2.0) as w:
        t0 = time.monotonic()
        answer = w.request("GET", "/", read_timeout=5.0, max_body=100)
        took = time.monotonic() - t0
    assert (answer.body, answer.truncated) == (b"a" * 60 + b"b" * 40, True)
    assert 0 < answer.latency_s <= took


def test_the_blocking_client_says_who_asks_carries_the_key_and_follows_no_redirect(recorded):
    url, h = recorded
    with Wire(url, api_key="sk-test", connect_timeout=2.0, user_agent="firstlight-probe") as w:
        assert w.get("/redirect", read_timeout=5.0).status == 302
    with Wire(url, connect_timeout=2.0) as w:
        w.get("/v1/models", read_timeout=5.0)
    keyed, plain = (s["headers"] for s in h.seen)
    assert keyed["User-Agent"] == "firstlight-probe" and keyed["Authorization"] == "Bearer sk-test"
    assert plain["User-Agent"] == USER_AGENT and "Authorization" not in plain
    assert [s["path"] for s in h.seen] == ["/redirect", "/v1/models"]  # the redirect's target never asked


def test_the_blocking_clients_hung_connect_is_its_connect_timeout():
    with full_accept_queue() as port, Wire(f"http://127.0.0.1:{port}", connect_timeout=0.3) as w, \
            pytest.raises(WireError) as e:
        w.get("/health", read_timeout=30.0)
    assert (str(e.value), e.value.timed_out) == ("connect timed out", True)  # not the 30.3 s deadline


def test_a_streamed_answer_may_take_longer_than_httpxs_default_timeout(recorded):
    """httpx's own default is 5 s for every phase; a generation is given its read timeout."""
    url, h = recorded
    h.together, h.hold_s = 2, 6.0  # one request alone: its answer waits 6 s

    async def run() -> tuple[int, bytes]:
        async with _wire(url, read_timeout=30.0) as w:
            return await _get(w, "/v1/models")

    assert asyncio.run(run()) == (200, b"ok")


def test_a_streamed_body_comes_as_it_is_sent_each_read_within_the_read_timeout_up_to_its_cap():
    """``Wire.stream`` (an event stream): the body lasts as long as the server sends, not the request's deadline;
    a quiet body ends at the read timeout, a body over the cap is refused."""

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            pieces = 6 if self.path == "/long" else 2
            for _ in range(pieces):  # 0.3 s apart: longer in all than connect + read timeouts
                self.wfile.write(b"data: x\n\n")
                self.wfile.flush()
                time.sleep(0.3)
            time.sleep(5)  # then quiet

    with serving(Trickle) as url, Wire(url, connect_timeout=0.5) as w:
        got = b""
        with w.stream("GET", "/long", read_timeout=0.8) as s, pytest.raises(WireError) as quiet:
            assert s.status == 200
            for chunk in s.chunks():
                got += chunk
        assert got == b"data: x\n\n" * 6 and quiet.value.timed_out
        with w.stream("GET", "/", read_timeout=5.0, max_body=12) as s, pytest.raises(WireError) as big:
            list(s.chunks())
        assert str(big.value) == "answer longer than 12 bytes: the rest left unread" and not big.value.timed_out
