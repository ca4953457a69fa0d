"""The live /models/sse source (firstlight.samplers.models_sse) against a real HTTP server on loopback in this
process: it waits for a server that is not up yet, reconnects after a cut stream and a quiet one, stops at
``loaded``, gives up on a 404, caps a line that never ends, and a stop ends it at once."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from firstlight.samplers.models_sse import PATH, ModelsSSE, is_router
from firstlight.timeline import EngineClock, Observation, SourceNote
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
    threading.Thread(target=srv.serve_forever, daemon=True).start()
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
    threading.Thread(target=srv.serve_forever, daemon=True).start()
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
