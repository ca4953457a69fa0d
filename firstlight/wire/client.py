"""Requests to one server: headers, timeouts, a deadline covering every byte, capped bodies, one error type.

``Wire`` (blocking: the readiness ladder, discovery, spec-decoding reads, the members' /readyz, and with
``Wire.stream`` an event stream such as llama.cpp's /models/sse) and ``AsyncWire`` (the streaming benchmark) share
the headers, the deadline transport (:mod:`firstlight.wire.deadline`) and the error describer, so the probe and the
benchmark see a server the same way.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from firstlight.wire.content import MAX_BODY, parse_json, snippet
from firstlight.wire.deadline import DeadlineBackend, async_transport, deadline, transport
from firstlight.wire.errors import WireError, describe_error, wire_error
from firstlight.wire.urls import normalise_url, split_query, split_url

USER_AGENT = "firstlight"


def headers(api_key: str | None, user_agent: str = USER_AGENT) -> dict[str, str]:
    """The headers of every request: who we are, and the bearer token when there is one."""
    h = {"User-Agent": user_agent}
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    return h


@dataclass(frozen=True)
class Answer:
    """An HTTP answer read whole (at most ``MAX_BODY`` bytes) within its deadline."""

    status: int
    body: bytes
    latency_s: float
    truncated: bool = False

    def text(self, limit: int) -> str:
        """The start of the body as one clean line (escape sequences stripped, clipped)."""
        return snippet(self.body, limit)

    def json(self) -> Any:
        """The body as JSON; :class:`firstlight.wire.content.NotJSON` otherwise."""
        return parse_json(self.body)


class Stream:
    """An answer read as it comes (an event stream, which lasts as long as the server sends): its status, its body's
    chunks (at most ``max_body`` bytes in all, each read within the read timeout), and ``abort`` for another
    thread."""

    def __init__(self, resp: httpx.Response, max_body: int) -> None:
        self._resp, self._max = resp, max_body
        self.status = resp.status_code

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes as they arrive; :class:`WireError` when the read fails, times out or runs over the
        cap."""
        size = 0
        try:
            for chunk in self._resp.iter_raw():
                size += len(chunk)
                if size > self._max:
                    raise WireError(f"answer longer than {self._max} bytes: the rest left unread")
                yield chunk
        except httpx.HTTPError as e:
            raise wire_error(e, past_deadline=False, budget_s=0.0) from None

    def abort(self) -> None:
        """From another thread: end a read in progress at once (closing the response does not wake it; shutting
        its socket down does)."""
        network = self._resp.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _timeout(connect: float, read: float) -> httpx.Timeout:
    return httpx.Timeout(connect, read=read)  # writing and waiting for a connection: the connect timeout


class Wire:
    """Blocking requests to the server at ``url``. Each request ends by its deadline: ``connect_timeout +
    read_timeout`` after it starts, or the caller's ``deadline`` (``time.monotonic``) if that is sooner."""

    def __init__(self, url: str, *, api_key: str | None = None, connect_timeout: float,
                 user_agent: str = USER_AGENT, transport_: httpx.BaseTransport | None = None) -> None:
        self.base = normalise_url(url)
        self.host, self.port = split_url(self.base)
        self.connect_timeout = connect_timeout
        root, query = split_query(self.base)  # the base's query goes after each request's path
        # httpx follows no redirect unless told to, and a client given its transport takes no proxy from the
        # environment (it mounts those only when it builds its own): both pinned by tests/unit/wire/test_client.py.
        # No client-wide timeout: `request`, the one way out, gives each request its own.
        self._client = httpx.Client(base_url=root, params=query, headers=headers(api_key, user_agent),
                                    transport=transport_ or transport())

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _until(self, read_timeout: float, at: float | None) -> tuple[float, float]:
        start = time.monotonic()
        until = start + self.connect_timeout + read_timeout
        return start, until if at is None else min(until, at)

    def request(self, method: str, path: str, *, read_timeout: float, json: Any = None,
                deadline_at: float | None = None, max_body: int = MAX_BODY) -> Answer:
        """One request, its body read up to ``max_body`` bytes; :class:`WireError` when no answer came."""
        start, until = self._until(read_timeout, deadline_at)
        if until <= start:
            raise WireError("no time left for the request", timed_out=True)
        try:
            with deadline(until), self._client.stream(method, path, json=json,
                                                      timeout=_timeout(self.connect_timeout, read_timeout)) as resp:
                body, truncated = _read_capped(resp, max_body)
                return Answer(resp.status_code, body, time.monotonic() - start, truncated)
        except httpx.HTTPError as e:
            raise wire_error(e, past_deadline=time.monotonic() >= until, budget_s=until - start) from None

    @contextmanager
    def stream(self, method: str, path: str, *, read_timeout: float, headers: dict[str, str] | None = None,
               max_body: int = MAX_BODY) -> Iterator[Stream]:
        """An answer whose body is read as it comes: its status and headers by the request's deadline
        (``connect_timeout + read_timeout``), then each read of the body within ``read_timeout``, up to
        ``max_body`` bytes (:class:`Stream`); :class:`WireError` when no answer came."""
        start, until = self._until(read_timeout, None)
        try:
            with contextlib.ExitStack() as stack:
                with deadline(until):  # the headers only: the body lasts as long as the server sends
                    resp = stack.enter_context(self._client.stream(method, path, headers=headers,
                                                                   timeout=_timeout(self.connect_timeout,
                                                                                    read_timeout)))
                yield Stream(resp, max_body)
        except httpx.HTTPError as e:
            raise wire_error(e, past_deadline=time.monotonic() >= until, budget_s=until - start) from None

    def get(self, path: str, *, read_timeout: float, deadline_at: float | None = None) -> Answer:
        return self.request("GET", path, read_timeout=read_timeout, deadline_at=deadline_at)

    def post_json(self, path: str, body: Any, *, read_timeout: float, deadline_at: float | None = None) -> Answer:
        return self.request("POST", path, json=body, read_timeout=read_timeout, deadline_at=deadline_at)

    def port_open(self, deadline_at: float | None = None) -> float:
        """Connect a TCP socket to the server and close it (name resolution bounded too); the seconds it took.
        :class:`WireError` when nothing accepts."""
        start, until = self._until(0.0, deadline_at)
        connect_tcp(self.host, self.port, self.connect_timeout, until)
        return time.monotonic() - start


def connect_tcp(host: str, port: int, timeout: float, until: float) -> None:
    """The one TCP connect (a port check: connected, then closed; nothing sent), name resolution included, by
    ``until`` (monotonic) at the latest. :class:`WireError` when nothing accepts."""
    try:
        with deadline(until):
            DeadlineBackend().connect_tcp(host, port, timeout=timeout).close()
    except httpcore.TimeoutException:
        raise WireError("connect timed out", timed_out=True) from None
    except (httpcore.NetworkError, OSError) as e:
        cause = e.__cause__ or e.__context__ or e
        msg = describe_error(cause) if isinstance(cause, OSError) else f"cannot connect ({e})"
        raise WireError(msg, refused=isinstance(cause, ConnectionRefusedError)) from None


def port_open(url: str, timeout: float) -> bool:
    """Does the port of ``url`` accept a TCP connection within ``timeout`` (nothing is sent)?"""
    host, port = split_url(url)
    try:
        connect_tcp(host, port, timeout, time.monotonic() + timeout)
    except WireError:
        return False
    return True


def _read_capped(resp: httpx.Response, max_body: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_body:
            return b"".join(chunks)[:max_body], True
    return b"".join(chunks), False


class AsyncWire:
    """Streaming requests for the benchmark, with the same headers, deadline transport and errors as
    :class:`Wire`. ``concurrency`` bounds the connections."""

    def __init__(self, url: str, *, api_key: str | None, connect_timeout: float, read_timeout: float,
                 concurrency: int, user_agent: str = USER_AGENT) -> None:
        self.base = normalise_url(url)
        root, query = split_query(self.base)  # as in Wire
        self._client = httpx.AsyncClient(base_url=root, params=query, headers=headers(api_key, user_agent),
                                         transport=async_transport(concurrency),  # no redirect, no proxy
                                         # writing: the connect timeout; a request queued for a connection
                                         # waits its whole budget
                                         timeout=httpx.Timeout(connect_timeout, read=read_timeout,
                                                               pool=connect_timeout + read_timeout))

    async def __aenter__(self) -> AsyncWire:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    @asynccontextmanager
    async def stream(self, method: str, path: str, *, json: Any = None, deadline_at: float,
                     budget_s: float | None = None) -> AsyncIterator[httpx.Response]:
        """The response, its body still to be read, all of it by ``deadline_at`` (``time.monotonic``); httpx
        errors become :class:`WireError`. ``budget_s``: the caller's whole budget, which a timeout names (by
        default what was left at this call, which a busy machine makes a little less than the budget asked)."""
        start = time.monotonic()
        try:
            with deadline(deadline_at):
                async with self._client.stream(method, path, json=json) as resp:
                    yield resp
        except httpx.HTTPError as e:
            raise wire_error(e, past_deadline=time.monotonic() >= deadline_at,
                             budget_s=deadline_at - start if budget_s is None else budget_s) from None
