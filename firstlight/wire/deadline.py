"""A wall-clock deadline on every byte: connect (DNS included), TLS, writes, headers and body.

httpx's timeouts are per operation: a read timeout bounds each read, so a server that sends its status line
and then one header byte a second holds a request for ever (encode/httpx#1450). The fix sits under httpcore:
a network backend whose streams shrink every connect/read/write timeout to the time left before the current
request's deadline, and fail the operation once it has passed. The deadline is a context variable that
:func:`deadline` sets around one request (a thread, or an asyncio task, has its own), so a pooled connection
reused by the next request obeys that request's deadline. No timer threads, nothing to forget to cancel.

Host names are resolved in a daemon thread waited on up to the deadline (``getaddrinfo`` itself has no
timeout); every resolved address is tried in turn, as ``socket.create_connection`` does.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

_DEADLINE: ContextVar[float | None] = ContextVar("firstlight_wire_deadline", default=None)


@contextmanager
def deadline(at: float) -> Iterator[None]:
    """Every network operation inside this block (this thread / task) ends by ``at`` (``time.monotonic``)."""
    current = _DEADLINE.get()
    token = _DEADLINE.set(at if current is None else min(current, at))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None, exc: type[Exception]) -> float | None:
    """``timeout`` shrunk to the time left before the deadline; ``exc`` once it has passed."""
    at = _DEADLINE.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise exc("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


def resolve(host: str, port: int, timeout: float | None) -> list[tuple[Any, ...]]:
    """``getaddrinfo`` bounded by ``timeout`` (a stuck resolver leaves a daemon thread behind, not a hang)."""
    try:
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False
    if literal:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    box: list[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            box.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as e:
            box.append(e)
        done.set()

    threading.Thread(target=work, name="firstlight-resolve", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"cannot resolve {host} in time")
    if isinstance(box[0], OSError):
        raise box[0]
    return list(box[0])


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's blocking socket backend with every operation bounded by the current deadline."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            addresses = resolve(host, port, _left(timeout, httpcore.ConnectTimeout))
        except TimeoutError as e:
            raise httpcore.ConnectTimeout(str(e)) from None
        except OSError as e:
            raise httpcore.ConnectError(f"cannot resolve host ({e.strerror or e})") from None
        last: Exception = httpcore.ConnectError(f"no address for {host}")
        for *_, sockaddr in addresses:
            try:
                stream = self._inner.connect_tcp(str(sockaddr[0]), port, _left(timeout, httpcore.ConnectTimeout),
                                                 local_address, socket_options)
                return _Stream(stream)
            except httpcore.ConnectTimeout:
                raise
            except httpcore.ConnectError as e:
                last = e
        raise last

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _left(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        inner = await self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout))
        return _AsyncStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class AsyncDeadlineBackend(httpcore.AsyncNetworkBackend):
    """httpcore's asyncio (anyio) backend with every operation bounded by the current task's deadline (anyio
    resolves names under the same bound)."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout), local_address,
                                               socket_options)
        return _AsyncStream(stream)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(path, _left(timeout, httpcore.ConnectTimeout), socket_options)
        return _AsyncStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One per process: loading the CA bundle takes about 50 ms of CPU, and every Wire is a transport."""
    return httpx.create_ssl_context(trust_env=False)


def transport(max_connections: int = 10) -> httpx.HTTPTransport:
    """An httpx transport whose connections obey :func:`deadline`. httpx has no public hook for a network
    backend, so its connection pool is replaced by an identical one built on :class:`DeadlineBackend`
    (``tests/unit/wire/test_wire.py`` fails if a new httpx stops using it)."""
    t = httpx.HTTPTransport(verify=_ssl_context(), trust_env=False)  # its own context would be thrown away
    t._pool = httpcore.ConnectionPool(ssl_context=_ssl_context(), max_connections=max_connections,
                                      max_keepalive_connections=max_connections, keepalive_expiry=5.0,
                                      network_backend=DeadlineBackend())
    return t


def async_transport(max_connections: int = 10) -> httpx.AsyncHTTPTransport:
    """The asyncio counterpart of :func:`transport`."""
    t = httpx.AsyncHTTPTransport(verify=_ssl_context(), trust_env=False)
    t._pool = httpcore.AsyncConnectionPool(ssl_context=_ssl_context(), max_connections=max_connections,
                                           max_keepalive_connections=max_connections, keepalive_expiry=5.0,
                                           network_backend=AsyncDeadlineBackend())
    return t
