"""The live /models/sse source (firstlight.samplers.models_sse) against a real HTTP server on loopback in this
process: it waits for a server that is not up yet, reconnects after a cut stream and a quiet one, stops at
``loaded``, gives up on a 404, caps a line that never ends, and a stop ends it at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from firstlight.samplers.models_sse import PATH, ModelsSSE, is_router
from firstlight.timeline import EngineClock, Observation, SourceNote
from firstlight.wire import WireError
from tests.support.common import FIXTURES, wait_for

EVENTS = [line for line in (FIXTURES / "clocks" / "llamacpp-b11434-models-sse.txt").read_text().splitlines()
          if line.startswith("data:")]


class _Stream(BaseHTTPRequestHandler):
    """Each connection gets the next script: a list of actions (bytes to send, or a pause in seconds)."""

    scripts: list[Any]
    connections: list[float]

    def log_message(self, *a: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.connections.append(time.time())
        script = self.scripts.pop(0) if self.scripts else [("pause", 30.0)]
        if script == 404 or self.path != PATH:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for kind, value in script:
                if kind == "pause":
                    time.sleep(value)
                else:
                    self.wfile.write(value)
                    self.wfile.flush()
        except OSError:
            pass  # the client went away


def _serve(scripts: list[Any], port: int = 0) -> tuple[ThreadingHTTPServer, list[float]]:
    conns: list[float] = []
    handler = type("H", (_Stream,), {"scripts": scripts, "connections": conns})
    srv = ThreadingHTTPServer(("127.0.0.1", port), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv, conns


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ev(i: int) -> tuple[str, bytes]:
    return ("send", (EVENTS[i] + "\n\n").encode())


def _run(port: int, **kw: Any) -> tuple[ModelsSSE, list[Observation]]:
    got: list[Observation] = []
    src = ModelsSSE(f"http://127.0.0.1:{port}", **kw)
    src.start(got.append)
    return src, got


def _marks(got: list[Observation]) -> list[tuple[str, str]]:
    return [(o.stage, o.mark) for o in got if isinstance(o, EngineClock)]


def test_it_follows_the_real_stream_to_loaded_and_stops():
    srv, conns = _serve([[_ev(i) for i in range(len(EVENTS))] + [("pause", 30.0)]])
    src, got = _run(srv.server_port)
    try:
        wait_for(lambda: src.stream.loaded, 20, "the loaded event")
        src.join(10)
        assert not src._thread.is_alive()  # type: ignore[union-attr]  # it stopped by itself, mid-stream
        assert _marks(got) == [("load", "begin"), ("text_model", "begin"), ("text_model", "end"), ("load", "end")]
        assert len(conns) == 1
    finally:
        src.stop()
        srv.shutdown()


def test_it_waits_for_a_server_not_up_yet_then_reconnects_after_a_cut():
    port = _free_port()
    src, got = _run(port)
    srv = None
    try:
        time.sleep(0.5)  # a few refused connects with its back-off (the server is not there)
        srv, conns = _serve([[_ev(0), _ev(1)], [_ev(3), _ev(4)]], port)  # the first stream is cut after 2 events
        wait_for(lambda: src.stream.loaded, 30, "the loaded event after the reconnect")
        assert len(conns) == 2 and src.connects == 2
        assert _marks(got) == [("load", "begin"), ("text_model", "begin"), ("text_model", "end"), ("load", "end")]
    finally:
        src.stop()
        if srv is not None:
            srv.shutdown()


def test_a_quiet_stream_is_reconnected_after_the_read_timeout():
    srv, conns = _serve([[_ev(0), ("pause", 30.0)], [_ev(4)]])
    src, got = _run(srv.server_port, read_timeout=0.5)
    try:
        wait_for(lambda: src.stream.loaded, 30, "loaded on the second connection")
        assert len(conns) == 2 and _marks(got) == [("load", "begin"), ("load", "end")]
    finally:
        src.stop()
        srv.shutdown()


def test_a_server_without_the_stream_is_left_alone_with_a_note():
    srv, conns = _serve([404])
    src, got = _run(srv.server_port)
    try:
        src.join(10)
        assert not src._thread.is_alive()  # type: ignore[union-attr]
        assert len(conns) == 1
        notes = [o for o in got if isinstance(o, SourceNote)]
        assert len(notes) == 1 and "404" in notes[0].message
    finally:
        src.stop()
        srv.shutdown()


def test_a_line_that_never_ends_is_capped_and_noted():
    srv, _ = _serve([[("send", b"data: " + b"x" * (2 << 20))], [_ev(0), _ev(4)]])
    src, got = _run(srv.server_port)
    try:
        wait_for(lambda: src.stream.loaded, 30, "loaded after the capped line")
        notes = [o for o in got if isinstance(o, SourceNote)]
        assert len(notes) == 1 and "longer than" in notes[0].message
    finally:
        src.stop()
        srv.shutdown()


def test_stop_ends_a_blocked_read_at_once():
    srv, _ = _serve([[_ev(0), ("pause", 60.0)]])
    src, got = _run(srv.server_port)
    try:
        wait_for(lambda: _marks(got) == [("load", "begin")], 20, "the first event")
        t0 = time.monotonic()
        src.stop()
        src.join(10)
        assert not src._thread.is_alive() and time.monotonic() - t0 < 5  # type: ignore[union-attr]
    finally:
        srv.shutdown()


def test_router_mode_is_told_from_the_command():
    assert is_router(["llama-server", "--models-dir", "/m", "--port", "1"])
    assert is_router(["llama-server", "--models-preset=/p.ini"])
    assert is_router(["llama-server", "--port", "1"], {"LLAMA_ARG_MODELS_DIR": "/m"})
    assert not is_router(["llama-server", "-m", "/m/model.gguf"], {})
    assert not is_router(None)


def test_what_escapes_the_reader_is_a_failed_note_and_it_reads_on(monkeypatch: Any):
    """Its thread runs under the guard of every thread: an exception nobody foresaw (here the parser's) is a note
    marked failed, never a silent end, and the reader starts again and reaches ``loaded``."""
    from firstlight.samplers import models_sse

    monkeypatch.setattr(models_sse, "BACKOFF_MAX_S", 0.1)
    srv, conns = _serve([[_ev(0), ("pause", 30.0)], [_ev(0), _ev(4)]])
    src = ModelsSSE(f"http://127.0.0.1:{srv.server_port}")
    feed = src.stream.feed
    calls: list[int] = []

    def breaks_once(data: str, t: float) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise ZeroDivisionError("a parser bug")
        return feed(data, t)

    monkeypatch.setattr(src.stream, "feed", breaks_once)
    got: list[Observation] = []
    src.start(got.append)
    try:
        wait_for(lambda: src.stream.loaded, 30, "loaded after the escape")
        (note,) = [o for o in got if isinstance(o, SourceNote)]
        assert note.failed and note.source == "engine_clock" and note.message.startswith(
            f"the reader of {PATH} failed: ZeroDivisionError: a parser bug; started again in ")
        assert len(conns) == 2
    finally:
        src.stop()
        srv.shutdown()


def test_a_stream_of_comments_and_no_event_is_dropped_after_a_mebibyte_noted_once_and_read_again_later():
    """34 MB of keep-alive comments on one connection (the body's own cap is 64 MiB): the reader lets it go after
    about 1 MiB without an event (the socket buffers hold a few MB more), says so once, and reads the stream again
    after its back-off."""
    from firstlight.samplers.models_sse import BACKOFF_MIN_S, MAX_BYTES_WITHOUT_EVENT

    written: list[int] = []

    class Chatter(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            if written:  # the second connection: the load's events
                self.wfile.write(("\n\n".join([EVENTS[0], EVENTS[4]]) + "\n\n").encode())
                self.wfile.flush()
                time.sleep(30)
                return
            written.append(0)
            comments = b": keep-alive\n" * 65_536  # 832 KiB
            try:
                for _ in range(40):
                    self.wfile.write(comments)
                    written[0] += len(comments)
                self.wfile.flush()
            except OSError:
                pass  # the reader let go

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Chatter)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    t0 = time.monotonic()
    src, got = _run(srv.server_port)
    try:
        wait_for(lambda: src.stream.loaded, 30, "loaded on the second connection")
        assert MAX_BYTES_WITHOUT_EVENT == 1 << 20 and written[0] < 16 << 20, written  # not the whole 34 MB
        notes = [o.message for o in got if isinstance(o, SourceNote)]
        assert len(notes) == 1 and "bytes without an event; read again after a pause" in notes[0], notes
        assert time.monotonic() - t0 >= BACKOFF_MIN_S and src.connects == 2
        assert _marks(got) == [("load", "begin"), ("load", "end")]
    finally:
        src.stop()
        srv.shutdown()


# -- what it asks for, and how its thread lives and ends ------------------------------------------------------------
@pytest.mark.parametrize(("given", "base"), [("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
                                             ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
                                             ("http://127.0.0.1:8080//", "http://127.0.0.1:8080"),
                                             ("http://gw/routerX/", "http://gw/routerX")])  # only slashes go
def test_the_stream_followed_is_the_base_urls_models_sse_without_its_trailing_slashes(given: str, base: str):
    src = ModelsSSE(given)
    assert (src.base, src.url) == (base, base + "/models/sse")


def test_the_stream_is_asked_for_with_the_api_key_as_a_bearer_token_and_as_an_event_stream():
    asked: list[tuple[str | None, str | None, str]] = []

    class Records(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:
            asked.append((self.headers.get("Authorization"), self.headers.get("Accept"), self.path))
            self.send_response(404)  # the reader then leaves it alone: its thread ends by itself
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Records)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    src, _ = _run(srv.server_port, api_key="sk-router-key")
    try:
        src.join(10)
        assert not src._thread.is_alive()  # type: ignore[union-attr]
        assert asked == [("Bearer sk-router-key", "text/event-stream", PATH)]
    finally:
        src.stop()
        srv.shutdown()


def test_stop_and_join_before_start_do_nothing():
    src = ModelsSSE("http://127.0.0.1:9")
    src.stop()
    src.join(0.0)
    assert src._thread is None and src._done()


def test_the_reader_runs_on_a_daemon_thread_named_for_it():
    gate = threading.Event()
    src = ModelsSSE("http://127.0.0.1:9")
    src._read_all = lambda sink: gate.wait(10)  # type: ignore[method-assign]  # holds the thread until the test ends
    src.start(lambda o: None)
    try:
        thread = src._thread
        assert thread is not None and thread.name == "firstlight-models-sse" and thread.daemon is True
    finally:
        gate.set()
        src.join(10)


def test_join_waits_no_longer_than_its_timeout():
    gate = threading.Event()
    src = ModelsSSE("http://127.0.0.1:9")
    src._read_all = lambda sink: gate.wait(30)  # type: ignore[method-assign]  # a reader that does not end yet
    src.start(lambda o: None)
    try:
        t0 = time.monotonic()
        src.join(0.05)
        assert src._thread.is_alive() and time.monotonic() - t0 < 10  # type: ignore[union-attr]
    finally:
        gate.set()
        src.join(10)


def test_an_escape_is_a_failed_note_on_its_clock_and_stop_ends_the_wait_before_it_starts_again():
    src = ModelsSSE("http://127.0.0.1:9", clock=lambda: 42.0)

    def escapes(sink: Any) -> None:
        raise ZeroDivisionError("a parser bug")

    src._read_all = escapes  # type: ignore[method-assign]
    got: list[Observation] = []
    src.start(got.append)
    try:
        (note,) = wait_for(lambda: [o for o in got if isinstance(o, SourceNote)], 10, "the failed note")
        assert (note.t, note.source, note.failed) == (42.0, "engine_clock", True)
        t0 = time.monotonic()
        src.stop()  # during the guard's wait to start again (BACKOFF_MAX_S): it ends at once
        src.join(10)
        assert not src._thread.is_alive() and time.monotonic() - t0 < 4  # type: ignore[union-attr]
    finally:
        src.stop()


def test_it_stops_reading_after_max_events_events():
    from firstlight.samplers.models_sse import MAX_EVENTS

    other = ("send", b'data: {"model": "m", "data": {"status": "loading"}}\n\n')  # never "loaded"
    srv, conns = _serve([[other, other, other, ("pause", 30.0)]])
    src = ModelsSSE(f"http://127.0.0.1:{srv.server_port}")
    src.events = MAX_EVENTS - 2  # two more and it has read its fill
    src.start(lambda o: None)
    try:
        src.join(10)
        assert not src._thread.is_alive()  # type: ignore[union-attr]
        assert src.events == MAX_EVENTS and len(conns) == 1 and not src.stream.loaded
    finally:
        src.stop()
        srv.shutdown()


# -- its notes, and when it reads the stream again ------------------------------------------------------------------
_LONG_LINE = ("send", b"data: " + b"x" * (2 << 20))  # past the event-stream line's cap (1 MiB)
_CHATTER = ("send", b": keep-alive\n" * 1000)  # 13 kB of comments, no event: past the 1 kB cap the tests set
TROUBLES = {"404": ([404], "404"), "a line that never ends": ([[_LONG_LINE], [_ev(0), _ev(4)]], "longer than"),
            "chatter without an event": ([[_CHATTER], [_ev(0), _ev(4)]], "bytes without an event")}


@pytest.mark.parametrize("trouble", sorted(TROUBLES))
def test_every_note_of_the_reader_is_timed_by_its_clock_and_comes_from_the_engine_clock(trouble: str,
                                                                                          monkeypatch: Any):
    from firstlight.samplers import models_sse

    if trouble == "chatter without an event":
        monkeypatch.setattr(models_sse, "MAX_BYTES_WITHOUT_EVENT", 1000)
    scripts, says = TROUBLES[trouble]
    srv, _ = _serve(list(scripts))
    src, got = _run(srv.server_port, clock=lambda: 42.0)
    try:
        (note,) = wait_for(lambda: [o for o in got if isinstance(o, SourceNote)], 20, "the note")
        assert (note.t, note.source, note.failed) == (42.0, "engine_clock", False) and says in note.message
    finally:
        src.stop()
        srv.shutdown()


@pytest.mark.parametrize("trouble", ["a line that never ends", "chatter without an event"])
def test_a_trouble_that_comes_again_on_the_next_connection_is_noted_once(trouble: str, monkeypatch: Any):
    from firstlight.samplers import models_sse

    monkeypatch.setattr(models_sse, "BACKOFF_MIN_S", 0.01)
    if trouble == "chatter without an event":
        monkeypatch.setattr(models_sse, "MAX_BYTES_WITHOUT_EVENT", 1000)
    (bad,) = TROUBLES[trouble][0][0]
    srv, conns = _serve([[bad], [bad], [_ev(0), _ev(4)]])
    src, got = _run(srv.server_port)
    try:
        wait_for(lambda: src.stream.loaded, 20, "loaded on the third connection")
        notes = [o.message for o in got if isinstance(o, SourceNote)]
        assert len(conns) == 3 and len(notes) == 1 and TROUBLES[trouble][1] in notes[0], notes
    finally:
        src.stop()
        srv.shutdown()


def test_a_stream_cut_after_its_events_is_read_again_at_once_without_the_back_off(monkeypatch: Any):
    from firstlight.samplers import models_sse

    monkeypatch.setattr(models_sse, "BACKOFF_MIN_S", 30.0)  # a back-off would outlast the test's deadline
    srv, conns = _serve([[_ev(0), _ev(1)], [_ev(3), _ev(4)]])
    src, _ = _run(srv.server_port)
    try:
        wait_for(lambda: src.stream.loaded, 10, "loaded on the second connection, at once")
        assert len(conns) == 2
    finally:
        src.stop()
        srv.shutdown()


def test_after_a_stream_that_streamed_a_refusal_is_tried_again_after_the_least_back_off(monkeypatch: Any):
    from firstlight.samplers import models_sse

    monkeypatch.setattr(models_sse, "BACKOFF_MIN_S", 0.01)
    srv, conns = _serve([[_ev(0), _ev(1)], [], [_ev(3), _ev(4)]])  # events, then a stream ended with none
    src, _ = _run(srv.server_port)
    try:
        wait_for(lambda: src.stream.loaded, 10, "loaded on the third connection")
        assert len(conns) == 3
    finally:
        src.stop()
        srv.shutdown()


class _CountedStop(threading.Event):
    """A stop whose waits are written down and return at once (stopping after ``waits`` of them): the back-off's
    seconds, read without waiting them."""

    def __init__(self, waits: int) -> None:
        super().__init__()
        self.asked: list[float | None] = []
        self._waits = waits

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout)
        if len(self.asked) >= self._waits:
            self.set()
        return self.is_set()


def test_a_refused_stream_is_tried_again_after_a_back_off_that_doubles_from_its_least_to_its_most():
    from firstlight.samplers.models_sse import BACKOFF_MAX_S, BACKOFF_MIN_S

    src = ModelsSSE(f"http://127.0.0.1:{_free_port()}")  # nothing listens: each connect is refused
    stop = _CountedStop(8)
    src._stop = stop
    src.start(lambda o: None)
    src.join(20)
    assert not src._thread.is_alive()  # type: ignore[union-attr]
    assert stop.asked == [min(BACKOFF_MIN_S * 2 ** i, BACKOFF_MAX_S) for i in range(8)]
    assert stop.asked[:5] == [0.2, 0.4, 0.8, 1.6, 3.2] and stop.asked[-2:] == [5.0, 5.0]


# -- one connection, read from a stand-in of the wire: its chunks exactly as they come ------------------------------
class _Answer:
    def __init__(self, status: int, chunks: list[bytes]) -> None:
        self.status, self._chunks = status, chunks

    def chunks(self) -> Iterator[bytes]:
        yield from self._chunks

    def abort(self) -> None:
        pass


class _Wire:
    """Answers each request with ``status`` and ``chunks``; writes down what was asked."""

    def __init__(self, status: int, chunks: list[bytes]) -> None:
        self.answer = _Answer(status, chunks)
        self.asked: list[tuple[str, str, dict[str, Any]]] = []

    @contextmanager
    def stream(self, method: str, path: str, **kw: Any) -> Iterator[_Answer]:
        self.asked.append((method, path, kw))
        yield self.answer


def _follow(status: int, chunks: list[bytes], **kw: Any) -> tuple[ModelsSSE, str | None, list[Observation]]:
    src = ModelsSSE("http://127.0.0.1:9", **kw)
    got: list[Observation] = []
    said = src._follow(_Wire(status, chunks), got.append)  # type: ignore[arg-type]
    return src, said, got


def _comments(n: int) -> bytes:
    return (b": " + b"k" * (n - 3) + b"\n") if n >= 3 else b"\n" * n  # n bytes, no event


def test_the_stream_is_asked_for_as_an_event_stream_under_its_own_cap_and_read_timeout():
    from firstlight.samplers.models_sse import MAX_STREAM_BYTES

    wire = _Wire(200, [])
    ModelsSSE("http://127.0.0.1:9", read_timeout=3.5)._follow(wire, lambda o: None)  # type: ignore[arg-type]
    assert wire.asked == [("GET", PATH, {"read_timeout": 3.5, "headers": {"Accept": "text/event-stream"},
                                         "max_body": MAX_STREAM_BYTES})]


@pytest.mark.parametrize("status", [500, 502, 503, 401, 204])
def test_an_answer_neither_200_nor_404_is_a_wire_error_that_names_its_status(status: int):
    with pytest.raises(WireError, match=f"^/models/sse -> {status}$"):
        _follow(status, [])


def test_each_event_is_counted_and_its_marks_are_timed_by_the_clock():
    events = [EVENTS[0], EVENTS[1], EVENTS[2]]  # loading, its stage's first progress: not yet loaded
    src, said, got = _follow(200, [(e + "\n\n").encode() for e in events], clock=lambda: 42.0)
    assert said is None and src.events == 3 and src.connects == 1
    assert [(o.t, o.stage, o.mark) for o in got if isinstance(o, EngineClock)] == [
        (42.0, "load", "begin"), (42.0, "text_model", "begin")]


@pytest.mark.parametrize(("sizes", "dropped"), [
    ([1000], None),  # the cap itself: kept
    ([1001], 1001),  # one byte past it: dropped, and the bytes said
    ([400, 601], 1001),  # counted across chunks
    ([600, "event", 1000], None),  # an event starts the count again from nothing
    ([600, "event", 1001], 1001),
])
def test_a_connection_is_dropped_only_past_the_cap_of_bytes_without_an_event(sizes: list[Any], dropped: int | None,
                                                                            monkeypatch: Any):
    from firstlight.samplers import models_sse

    monkeypatch.setattr(models_sse, "MAX_BYTES_WITHOUT_EVENT", 1000)
    chunks = [(EVENTS[0] + "\n").encode() if n == "event" else _comments(n) for n in sizes]
    _, said, _ = _follow(200, chunks)
    assert said == (None if dropped is None else
                    f"/models/sse: {dropped} bytes without an event; read again after a pause")


@pytest.mark.parametrize("field", ["data: ", "data:", "data:  "])
def test_an_events_data_is_read_with_or_without_spaces_after_its_field_name(field: str):
    _, _, got = _follow(200, [f'{field}{{"model": "m", "data": {{"status": "loading"}}}}\n'.encode()])
    assert [(o.stage, o.mark) for o in got if isinstance(o, EngineClock)] == [("load", "begin")]
