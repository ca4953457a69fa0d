"""The one describer of wire failures (``firstlight.wire.errors``): each failure a real server can cause, through the
blocking client on loopback (refused, a connect or a read that times out, the deadline, garbage, a reset, a close),
and the describer's rules on the exception chains httpx and anyio raise (a refusal wrapped several times, a cause
with no words, an error of no known kind)."""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from firstlight.wire import WireError
from firstlight.wire.client import Wire
from firstlight.wire.errors import _refused, describe_error, describe_oserror, wire_error


@contextlib.contextmanager
def _raw_server(answer: bytes | None, reset: bool = False, stall_s: float = 0.0) -> Iterator[str]:
    """A TCP server that reads a request, then (after ``stall_s``) writes ``answer`` and closes; ``reset``: close
    with an RST instead."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    if stop.wait(stall_s) and stall_s:
                        return
                    if answer:
                        conn.sendall(answer)
                    if reset:
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join(10)
        srv.close()


def _fail(url: str, **kw: float) -> WireError:
    args = {"read_timeout": 5.0} | kw
    with Wire(url, connect_timeout=2.0) as w, pytest.raises(WireError) as e:
        w.get("/health", **args)  # type: ignore[arg-type]
    return e.value


def test_nothing_listening_is_refused():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    e = _fail(f"http://127.0.0.1:{port}")
    assert (str(e), e.refused, e.timed_out) == ("connection refused", True, False)


def test_a_server_that_never_answers_is_the_read_timeout():
    with _raw_server(None, stall_s=30) as url:
        e = _fail(url, read_timeout=0.3)
    assert (str(e), e.timed_out, e.refused) == ("no answer within the read timeout", True, False)


def test_a_request_past_its_deadline_says_the_deadline():
    with _raw_server(None, stall_s=30) as url:
        e = _fail(url, read_timeout=30.0, deadline_at=time.monotonic() + 0.5)
    assert str(e).startswith("no complete answer within 0.") and str(e).endswith("s (the request's deadline)")
    assert e.timed_out and not e.refused


def test_garbage_is_not_a_valid_http_answer():
    with _raw_server(b"HELLO THERE\r\n\r\n") as url:
        e = _fail(url)
    assert str(e).startswith("not a valid HTTP answer (") and not e.timed_out and not e.refused


def test_a_reset_connection_is_said_in_words():
    """httpx's ReadError, from httpcore's (whose words are the OSError's), from the ConnectionResetError."""
    with _raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", reset=True) as url:
        e = _fail(url)
    assert (str(e), e.timed_out, e.refused) == ("connection reset by the server", False, False)


def test_a_connection_closed_without_an_answer_names_what_happened():
    with _raw_server(None) as url:
        e = _fail(url)
    assert str(e) == "not a valid HTTP answer (Server disconnected without sending a response.)"


# -- the rules on the exception chains -------------------------------------------------------------------------
def _chain(*excs: BaseException) -> BaseException:
    """``excs[0]`` raised from ``excs[1]``, itself from ``excs[2]``..."""
    for outer, inner in itertools.pairwise(excs):
        outer.__cause__ = inner
    return excs[0]


def test_a_refusal_is_found_down_to_the_eighth_exception_of_a_chain():
    wrapped = [httpx.ConnectError("All connection attempts failed")]
    wrapped += [OSError(f"layer {i}") for i in range(6)]
    assert _refused(_chain(*wrapped, ConnectionRefusedError(111, "Connection refused")))  # the 8th
    assert not _refused(_chain(*wrapped, OSError("layer 6"), ConnectionRefusedError(111, "x")))  # the 9th


def test_a_refusal_is_its_type_or_its_words_and_a_context_counts_as_a_cause():
    assert _refused(OSError("[Errno 111] Connect call failed: REFUSED"))  # words in any case
    assert not _refused(OSError("reset by peer"))
    e = OSError("outer")
    e.__context__ = ConnectionRefusedError(111, "x")  # raised while handling it
    assert _refused(e)
    assert not _refused(OSError("nothing below"))


def test_a_connect_error_is_refused_or_says_what_it_was():
    assert describe_error(_chain(httpx.ConnectError("All connection attempts failed"),
                                 ConnectionRefusedError(111, "Connection refused"))) == "connection refused"
    assert describe_error(httpx.ConnectError("[Errno 101] Network is unreachable")) == \
        "cannot connect ([Errno 101] Network is unreachable)"


def test_each_timeout_says_which():
    assert describe_error(httpx.ConnectTimeout("")) == "connect timed out"
    assert describe_error(httpx.ReadTimeout("")) == "no answer within the read timeout"
    assert describe_error(WireError("as it was said")) == "as it was said"


def test_a_reset_is_found_below_causes_without_words():
    quiet = OSError()  # no words: looked through
    quiet.__cause__ = ConnectionResetError(104, "Connection reset by peer")
    assert describe_error(_chain(httpx.ReadError(""), quiet)) == "connection reset by the server"
    assert describe_error(_chain(httpx.WriteError(""), ConnectionResetError(104, "x"))) == \
        "connection reset by the server"
    # a reset under another kind of error is not a reset of this request
    assert describe_error(_chain(ValueError("bad frame"), ConnectionResetError(104, "x"))) == "ValueError: bad frame"


def test_an_error_of_no_known_kind_is_its_type_and_words_or_its_causes():
    assert describe_error(ValueError("bad")) == "ValueError: bad"
    assert describe_error(_chain(ValueError(), KeyError("x"))) == "ValueError: KeyError: 'x'"
    assert describe_error(ValueError()) == "ValueError"
    # the first cause with words, past one without
    assert describe_error(_chain(ValueError(), RuntimeError(), KeyError("x"))) == "ValueError: KeyError: 'x'"
    assert describe_error(_chain(httpx.ReadError(""), OSError("disk on fire"))) == "ReadError: OSError: disk on fire"


@pytest.mark.parametrize(("error", "words"), [
    (ConnectionRefusedError(111, "Connection refused"), "connection refused"),
    (TimeoutError("timed out"), "connect timed out"),
    (socket.gaierror(-2, "Name or service not known"), "cannot resolve host (Name or service not known)"),
    (OSError(113, "No route to host"), "No route to host"),
    (OSError(), "OSError"),
])
def test_an_os_error_in_words(error: OSError, words: str):
    assert describe_oserror(error) == words
    assert describe_error(error) == words


@pytest.mark.parametrize(("error", "past", "words", "timed_out", "refused"), [
    (httpx.ReadTimeout(""), True, "no complete answer within 2.5s (the request's deadline)", True, False),
    (httpx.ReadTimeout(""), False, "no answer within the read timeout", True, False),
    (httpx.ConnectError("refused"), True, "connection refused", False, True),  # a refusal is no timeout
    (_chain(httpx.ConnectTimeout(""), ConnectionRefusedError(111, "x")), False, "connect timed out", True, False),
    (httpx.RemoteProtocolError("bad"), True, "not a valid HTTP answer (bad)", False, False),
])
def test_a_wire_error_is_a_deadline_only_for_a_timeout_past_it(error: BaseException, past: bool, words: str,
                                                                timed_out: bool, refused: bool):
    e = wire_error(error, past_deadline=past, budget_s=2.5)
    assert (str(e), e.timed_out, e.refused) == (words, timed_out, refused)
