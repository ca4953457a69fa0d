"""One describer of what went wrong on the wire, for the readiness ladder and the benchmark alike."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx

from firstlight.errors import FirstlightError


class WireError(FirstlightError):
    """No usable HTTP answer. ``str()`` is one line for a person; ``timed_out`` tells a deadline or timeout
    from a refusal or a protocol error; ``refused`` that nothing listens (the server is down, or not up yet)."""

    def __init__(self, message: str, *, timed_out: bool = False, refused: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        self.refused = refused


def describe_oserror(e: OSError) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, socket.timeout | TimeoutError):
        return "connect timed out"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve host ({e.strerror})"
    return e.strerror or type(e).__name__


def _chain(e: BaseException) -> Iterator[BaseException]:
    """``e`` and what it was raised from, 8 deep at most (httpx wraps httpcore's error, which wraps the OSError;
    anyio wraps a ConnectionRefusedError in "All connection attempts failed")."""
    cause: BaseException | None = e
    for _ in range(8):
        if cause is None:
            return
        yield cause
        cause = cause.__cause__ or cause.__context__


def _refused(e: BaseException) -> bool:
    return any(isinstance(c, ConnectionRefusedError) or "refused" in str(c).lower() for c in _chain(e))


def describe_error(e: BaseException) -> str:
    """One line for an HTTP failure, without a traceback."""
    if isinstance(e, WireError):
        return str(e)
    if isinstance(e, httpx.ConnectError):
        return "connection refused" if _refused(e) else f"cannot connect ({e})"
    if isinstance(e, httpx.ConnectTimeout):
        return "connect timed out"
    if isinstance(e, httpx.TimeoutException):
        return "no answer within the read timeout"
    if isinstance(e, httpx.RemoteProtocolError):
        return f"not a valid HTTP answer ({e})"
    if isinstance(e, httpx.ReadError | httpx.WriteError) and any(isinstance(c, ConnectionResetError)
                                                                  for c in _chain(e)):
        return "connection reset by the server"
    if isinstance(e, OSError):
        return describe_oserror(e)
    cause = e.__cause__ or e.__context__  # the first cause with words
    while cause is not None and not str(cause) and (cause.__cause__ or cause.__context__):
        cause = cause.__cause__ or cause.__context__
    detail = str(e) or (f"{type(cause).__name__}: {cause}" if cause is not None else "")
    return f"{type(e).__name__}: {detail}" if detail else type(e).__name__


def wire_error(e: BaseException, *, past_deadline: bool, budget_s: float) -> WireError:
    """``e`` as a :class:`WireError`; a timeout once the request's deadline has passed says so."""
    timed_out = isinstance(e, httpx.TimeoutException | socket.timeout | TimeoutError)
    if timed_out and past_deadline:
        return WireError(f"no complete answer within {budget_s:.3g}s (the request's deadline)", timed_out=True)
    return WireError(describe_error(e), timed_out=timed_out, refused=_refused(e) and not timed_out)
