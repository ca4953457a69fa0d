"""The deadline under every byte (``firstlight.wire.deadline``) against real sockets: nesting, a deadline already
passed, name resolution bounded, every resolved address tried, and the asyncio backend (the benchmark's) ending a
silent read by the deadline too. Written to kill the mutants scripts/mutation.sh found surviving."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx
import pytest

from firstlight.wire import Wire, WireError
from firstlight.wire.deadline import (
    _DEADLINE,
    AsyncDeadlineBackend,
    DeadlineBackend,
    _ssl_context,
    async_transport,
    deadline,
    resolve,
    transport,
)
from tests.support.rule_boundaries import _silent_mid_read


def test_a_nested_deadline_never_extends_the_outer_one_and_each_is_undone_on_exit():
    assert _DEADLINE.get() is None
    with deadline(100.0):
        with deadline(200.0):
            assert _DEADLINE.get() == 100.0
        with deadline(50.0):
            assert _DEADLINE.get() == 50.0
        assert _DEADLINE.get() == 100.0
    assert _DEADLINE.get() is None


def test_a_passed_deadline_fails_connect_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with deadline(time.monotonic() - 1), pytest.raises(httpcore.ConnectTimeout):
            DeadlineBackend().connect_tcp("127.0.0.1", port, timeout=5.0)
        DeadlineBackend().connect_tcp("127.0.0.1", port, timeout=5.0).close()  # no deadline: connects


def test_names_are_resolved_and_every_address_tried():
    literal = resolve("127.0.0.1", 80, 1.0)  # no resolver thread for a literal
    assert literal[0][4] == ("127.0.0.1", 80) and all(a[1] == socket.SOCK_STREAM for a in literal)
    addresses = resolve("localhost", 8080, 5.0)
    assert addresses and all(a[4][1] == 8080 and a[1] == socket.SOCK_STREAM for a in addresses)  # TCP only
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        DeadlineBackend().connect_tcp("localhost", port, timeout=5.0).close()


def test_a_name_that_does_not_resolve_is_a_connect_error_not_a_hang():
    t0 = time.monotonic()
    with pytest.raises((httpcore.ConnectError, httpcore.ConnectTimeout)) as e:
        DeadlineBackend().connect_tcp("no-such-host.invalid", 80, timeout=2.0)
    assert time.monotonic() - t0 < 30
    assert "resolve" in str(e.value)


def test_a_refused_connection_is_a_connect_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(httpcore.ConnectError):
            DeadlineBackend().connect_tcp("127.0.0.1", port, timeout=2.0)


def test_the_transports_use_the_deadline_backends_with_the_pool_asked_for():
    for t, backend in ((transport(3), DeadlineBackend), (async_transport(3), AsyncDeadlineBackend)):
        pool = t._pool  # type: ignore[attr-defined]
        assert isinstance(pool._network_backend, backend)
        assert (pool._max_connections, pool._max_keepalive_connections, pool._keepalive_expiry) == (3, 3, 5.0)
        assert pool._ssl_context is _ssl_context()  # one context, built without the environment's settings


def test_an_async_connect_after_the_deadline_fails_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]

        async def connect() -> None:
            with deadline(time.monotonic() - 1), pytest.raises(httpcore.ConnectTimeout):
                await AsyncDeadlineBackend().connect_tcp("127.0.0.1", port, timeout=5.0)
            await (await AsyncDeadlineBackend().connect_tcp("127.0.0.1", port, timeout=5.0)).aclose()

        asyncio.run(connect())


def test_the_async_backend_ends_a_silent_read_by_the_deadline():
    async def fetch(url: str) -> float:
        async with httpx.AsyncClient(transport=async_transport()) as client:
            t0 = time.monotonic()
            with deadline(t0 + 1.0), pytest.raises(httpx.TimeoutException):
                await client.get(url, timeout=8.0)
            return time.monotonic() - t0

    with _silent_mid_read() as url:
        took = asyncio.run(fetch(url))
    assert took < 6.0, f"held {took:.1f}s: the 8 s read timeout, not the 1 s deadline, ended the read"


def test_once_the_deadline_has_passed_every_read_and_write_fails_at_once():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(2)
        port = server.getsockname()[1]
        stream = DeadlineBackend().connect_tcp("127.0.0.1", port, timeout=5.0)  # no deadline yet
        assert isinstance(stream.get_extra_info("socket"), socket.socket)
        with deadline(time.monotonic() - 1):
            with pytest.raises(httpcore.ReadTimeout):
                stream.read(10, timeout=5.0)
            with pytest.raises(httpcore.WriteTimeout):
                stream.write(b"x", timeout=5.0)
        stream.close()

        async def on_asyncio() -> None:
            s = await AsyncDeadlineBackend().connect_tcp("127.0.0.1", port, timeout=5.0)
            assert s.get_extra_info("socket") is not None
            with deadline(time.monotonic() - 1):
                with pytest.raises(httpcore.ReadTimeout):
                    await s.read(10, timeout=5.0)
                with pytest.raises(httpcore.WriteTimeout):
                    await s.write(b"x", timeout=5.0)
            await s.aclose()

        asyncio.run(on_asyncio())


def test_the_async_read_timeout_still_bounds_a_read_before_a_far_deadline():
    async def fetch(url: str) -> float:
        async with httpx.AsyncClient(transport=async_transport()) as client:
            t0 = time.monotonic()
            with deadline(t0 + 60.0), pytest.raises(httpx.TimeoutException):
                await client.get(url, timeout=httpx.Timeout(5.0, read=0.5))
            return time.monotonic() - t0

    with _silent_mid_read() as url:
        took = asyncio.run(fetch(url))
    assert took < 30.0, f"held {took:.1f}s: the 0.5 s read timeout was lost under the 60 s deadline"


def test_the_write_timeout_still_bounds_a_write_before_a_far_deadline():
    """A server that accepts and never reads: the send buffer fills, the write blocks; its 0.5 s write timeout ends
    it, not the 60 s deadline (blocking and asyncio)."""
    body = b"x" * (64 << 20)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/"
        timeout = httpx.Timeout(5.0, write=0.5)

        t0 = time.monotonic()
        with httpx.Client(transport=transport()) as client, deadline(t0 + 60.0), \
                pytest.raises(httpx.TimeoutException):
            client.post(url, content=body, timeout=timeout)
        assert time.monotonic() - t0 < 30.0

        async def post() -> float:
            async with httpx.AsyncClient(transport=async_transport()) as client:
                t1 = time.monotonic()
                with deadline(t1 + 60.0), pytest.raises(httpx.TimeoutException):
                    await client.post(url, content=body, timeout=timeout)
                return time.monotonic() - t1

        assert asyncio.run(post()) < 30.0


def test_a_transport_holds_ten_connections_unless_told_otherwise():
    assert transport()._pool._max_connections == 10  # type: ignore[attr-defined]
    assert async_transport()._pool._max_connections == 10  # type: ignore[attr-defined]


def test_the_read_timeout_still_bounds_a_read_before_a_far_deadline():
    with _silent_mid_read() as url, httpx.Client(transport=transport()) as client:
        t0 = time.monotonic()
        with deadline(t0 + 60.0), pytest.raises(httpx.TimeoutException):
            client.get(url, timeout=httpx.Timeout(5.0, read=0.5))
        took = time.monotonic() - t0
    assert took < 30.0, f"held {took:.1f}s: the 0.5 s read timeout was lost under the 60 s deadline"


def test_a_stuck_resolver_is_bounded_and_leaves_only_a_daemon_thread(monkeypatch: pytest.MonkeyPatch):
    """getaddrinfo has no timeout. A resolver that never answers cannot be made real here (no network), so this
    one test stands in a getaddrinfo that blocks until released."""
    import threading

    release = threading.Event()
    seen: list[threading.Thread] = []

    def stuck(*args: object, **kw: object) -> list[object]:
        seen.append(threading.current_thread())
        release.wait(60)
        return []

    monkeypatch.setattr(socket, "getaddrinfo", stuck)
    t0 = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"^cannot resolve slow\.example in time$"):
            resolve("slow.example", 80, 0.3)
        assert time.monotonic() - t0 < 30
        assert len(seen) == 1 and seen[0].daemon and seen[0].name == "firstlight-resolve"
    finally:
        release.set()


# -- the second run's survivors: what each connect is given, and what each failure says -------------------------
@contextmanager
def _full_backlog() -> Iterator[int]:
    """A port whose listener never accepts and whose accept queue is full: the kernel drops further SYNs, so a
    connect to it hangs (a real hanging connect, as to a blackholed address)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        held: list[socket.socket] = []
        try:
            for _ in range(16):
                try:
                    held.append(socket.create_connection(("127.0.0.1", port), timeout=0.5))
                except TimeoutError:
                    break
            else:
                pytest.fail("the accept queue never filled")
            yield port
        finally:
            for s in held:
                s.close()


def test_a_connect_that_hangs_is_ended_by_the_connect_timeout():
    with _full_backlog() as port:
        t0 = time.monotonic()
        with pytest.raises(httpcore.ConnectTimeout):
            DeadlineBackend().connect_tcp("127.0.0.1", port, timeout=0.5)
        assert time.monotonic() - t0 < 30  # a connect with no timeout waits out the kernel's SYN retries (~2 min)

        async def connect() -> None:
            with pytest.raises(httpcore.ConnectTimeout):
                await AsyncDeadlineBackend().connect_tcp("127.0.0.1", port, timeout=0.5)

        t0 = time.monotonic()
        asyncio.run(connect())
        assert time.monotonic() - t0 < 30


def test_a_passed_deadline_says_so():
    with pytest.raises(httpcore.ConnectTimeout, match=r"^the request's deadline passed$"), \
            deadline(time.monotonic() - 1):
        DeadlineBackend().connect_tcp("127.0.0.1", 9, timeout=5.0)


def test_a_deadline_that_passes_while_resolving_fails_the_connect(monkeypatch: pytest.MonkeyPatch):
    """The connect after a slow resolution gets the time left, and none once the deadline has passed."""
    real = socket.getaddrinfo
    at = time.monotonic() + 0.3

    def slow(*args: Any, **kw: Any) -> Any:
        while time.monotonic() < at + 0.05:
            time.sleep(0.05)
        return real(*args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    with pytest.raises(httpcore.ConnectTimeout, match=r"^the request's deadline passed$"), deadline(at):
        DeadlineBackend().connect_tcp("127.0.0.1", 9, timeout=5.0)


def test_no_timeout_under_a_deadline_is_the_time_left():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        with deadline(time.monotonic() + 30):
            DeadlineBackend().connect_tcp("127.0.0.1", s.getsockname()[1], timeout=None).close()


def test_an_ip_literal_is_not_given_to_a_resolver_thread(monkeypatch: pytest.MonkeyPatch):
    real = socket.getaddrinfo
    threads: list[threading.Thread] = []

    def record(*args: Any, **kw: Any) -> Any:
        threads.append(threading.current_thread())
        return real(*args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", record)
    resolve("127.0.0.1", 80, 1.0)
    resolve("::1", 80, 1.0)
    assert threads == [threading.current_thread()] * 2
    resolve("localhost", 80, 5.0)
    assert threads[-1].name == "firstlight-resolve"


@contextmanager
def _stuck_resolver(monkeypatch: pytest.MonkeyPatch, answer: Any = ()) -> Iterator[None]:
    """A getaddrinfo that blocks until released (10 s at most), then answers ``answer`` (or raises it)."""
    release = threading.Event()

    def stuck(*args: object, **kw: object) -> Any:
        release.wait(10)
        if isinstance(answer, BaseException):
            raise answer
        return list(answer)

    monkeypatch.setattr(socket, "getaddrinfo", stuck)
    try:
        yield
    finally:
        release.set()


def test_a_stuck_resolver_is_bounded_by_the_connect_timeout(monkeypatch: pytest.MonkeyPatch):
    with _stuck_resolver(monkeypatch), \
            pytest.raises(httpcore.ConnectTimeout, match=r"^cannot resolve slow\.example in time$"):
        DeadlineBackend().connect_tcp("slow.example", 80, timeout=0.3)


def test_a_resolver_error_and_an_empty_answer_are_named(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [])
    with pytest.raises(httpcore.ConnectError, match=r"^no address for nowhere\.example$"):
        DeadlineBackend().connect_tcp("nowhere.example", 80, timeout=2.0)

    def fails(*a: object, **k: object) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fails)
    with pytest.raises(httpcore.ConnectError, match=r"^cannot resolve host \(Name or service not known\)$"):
        DeadlineBackend().connect_tcp("nowhere.example", 80, timeout=2.0)


def _assert_dialled_from_127_0_0_3_with_keepalive(sock: socket.socket) -> None:
    assert sock.getsockname()[0] == "127.0.0.3"
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1


def test_each_address_is_dialled_as_resolved_with_the_callers_socket_settings():
    """A listener on 127.0.0.2 only (all of 127/8 is loopback on Linux): the address resolved is the one dialled;
    the local address and socket options the caller gives reach the socket."""
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        s.listen(4)
        port = s.getsockname()[1]
        keepalive = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        stream = DeadlineBackend().connect_tcp("127.0.0.2", port, timeout=5.0, local_address="127.0.0.3",
                                               socket_options=keepalive)
        try:
            _assert_dialled_from_127_0_0_3_with_keepalive(stream.get_extra_info("socket"))
        finally:
            stream.close()

        async def connect() -> None:
            a = await AsyncDeadlineBackend().connect_tcp("127.0.0.2", port, timeout=5.0, local_address="127.0.0.3",
                                                         socket_options=keepalive)
            try:
                _assert_dialled_from_127_0_0_3_with_keepalive(a.get_extra_info("socket"))
            finally:
                await a.aclose()

        asyncio.run(connect())


def test_the_deadline_shortens_a_single_read_on_a_server_gone_silent_mid_body():
    # 1 s deadline, 8 s read timeout: the read that waits for the rest of the body must end by the deadline.
    with _silent_mid_read() as url, Wire(url, connect_timeout=1.0) as wire:
        t0 = time.monotonic()
        with pytest.raises(WireError) as e:
            wire.get("/health", read_timeout=8.0, deadline_at=t0 + 1.0)
        took = time.monotonic() - t0
    said = re.search(r"within ([\d.]+)s \(the request's deadline\)", str(e.value))
    assert e.value.timed_out and said is not None and 0.5 < float(said.group(1)) <= 1.0, e.value  # not 8 s
    assert took < 6.0, f"held {took:.1f}s: the 8 s read timeout, not the 1 s deadline, ended the read"
