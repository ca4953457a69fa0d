"""Small purpose-built servers for faults: real sockets, each misbehaving in one way."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("ok", "silent", "5xx", "garbage", "not_json", "empty", "models_only", "trickle", "health_only",
         "header_trickle", "endless_headers", "sse_no_newline", "nested_json", "models_key", "slow", "escapes",
         "identify_hangs", "sglang")
# A JSON document nested deeper than Python's recursion limit: json.loads raises RecursionError on it.
POLL_S = 0.05  # how long a stop waits for serve_forever to look up (the library's default is half a second)
NESTED_JSON = b"[" * 200_000 + b"]" * 200_000
ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31m"  # set the terminal title, clear the screen, turn red


IDENTIFY_PATHS = ("/server_info", "/get_server_info", "/props", "/info", "/api/version", "/version", "/metrics")


class _Handler(BaseHTTPRequestHandler):
    mode = "ok"
    seen: list[dict[str, Any]]
    counts: dict[str, int]
    lock: threading.Lock
    stop: threading.Event
    trickle_first = 10**9
    delay = 0.0
    fail_first = 0  # generations answered 503 before the server "recovers"
    protocol_version = "HTTP/1.1"

    def log_message(self, *a: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self) -> None:
        self.seen.append({"method": self.command, "path": self.path, "auth": self.headers.get("Authorization")})

    def _header_trickle(self) -> bool:
        """Status line, then one header byte a second, for as long as the client listens (``header_trickle``:
        the first ``trickle_first`` requests; then it answers normally, like a server that recovered)."""
        with self.lock:
            self.counts["trickled"] = self.counts.get("trickled", 0) + 1
            if self.counts["trickled"] > self.trickle_first:
                return False
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        self.wfile.flush()
        while not self.stop.wait(1.0):
            try:
                self.wfile.write(b"X")
                self.wfile.flush()
            except OSError:
                break
        self.close_connection = True
        return True

    def _endless_headers(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for i in range(200_000):  # about 5 MB of headers, as fast as the client reads
            try:
                self.wfile.write(b"X-Filler-%06d: %s\r\n" % (i, b"y" * 8))
            except OSError:
                break
        self.close_connection = True

    def _pause(self) -> None:
        if self.delay:  # "slow", or any other mode that answers late
            time.sleep(self.delay)

    def do_GET(self) -> None:
        self._record()
        m = self.mode
        if m == "header_trickle" and self._header_trickle():
            return None
        if m == "endless_headers":
            return self._endless_headers()
        self._pause()
        if m == "5xx":
            return self._send(500, b'{"error":"internal"}')
        if m == "not_json":
            return self._send(200, b"<html>hello</html>", "text/html")
        if m == "escapes" and self.path.startswith("/health"):
            return self._send(503, f'{{"status": "{ESC}loading"}}'.encode())
        if m in ("identify_hangs", "sglang") and self.path.split("?")[0] in IDENTIFY_PATHS:
            if m == "sglang" and self.path.startswith("/server_info"):
                return self._send(200, json.dumps({"tp_size": 1, "mem_fraction_static": 0.8}).encode())
            if m == "identify_hangs":
                self.stop.wait(600)  # never answers within any probe's deadline
                return None
            return self._send(404, b"{}")
        if self.path.startswith("/health"):
            return self._send(200, b'{"status":"ok"}')
        if self.path.startswith("/v1/models"):
            if m == "health_only":
                return self._send(503, b'{"error":"loading"}')
            if m == "nested_json":
                return self._send(200, NESTED_JSON)
            if m == "models_key":
                return self._send(200, json.dumps({"models": [{"name": "m1", "model": "m1"}]}).encode())
            if m == "escapes":
                return self._send(200, json.dumps({"data": [{"id": f"m1{ESC}" + "z" * 300}]}).encode())
            return self._send(200, json.dumps({"data": [{"id": "m1"}]}).encode())
        self._send(404, b"{}")

    def do_POST(self) -> None:
        self._record()
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        self.seen[-1]["model"] = req.get("model") if isinstance(req, dict) else None
        m = self.mode
        if m == "header_trickle" and self._header_trickle():
            return None
        self._pause()
        with self.lock:
            self.counts["generations"] = self.counts.get("generations", 0) + 1
            loading = self.counts["generations"] <= self.fail_first
        if m in ("5xx",):
            return self._send(500, b'{"error":"internal"}')
        if m in ("models_only", "health_only") or loading:
            return self._send(503, b'{"error":{"message":"Loading model"}}')
        if m == "not_json":
            return self._send(200, b"<html>hello</html>", "text/html")
        if m == "nested_json":
            return self._send(200, NESTED_JSON)
        if m == "sse_no_newline":
            return self._sse_no_newline()
        if m == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _ in range(10_000):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.2)
            return None
        text = "" if m == "empty" else " Paris"
        if m == "escapes":
            text = f" Paris{ESC}" + "!" * 5000
        if req.get("stream"):
            return self._sse(req, text)
        if "messages" in req:
            choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}}
        else:
            choice = {"text": text}
        self._send(200, json.dumps({"choices": [choice], "model": req.get("model")}).encode())

    def _sse_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, req: dict[str, Any], text: str) -> None:
        """A streamed completion: a few text chunks, the last with finish_reason, usage, [DONE]."""
        self._sse_head()
        chat = "messages" in req
        pieces = [text[:3], text[3:]] if text else [""]
        for i, piece in enumerate(pieces):
            choice: dict[str, Any] = {"index": 0, "finish_reason": "stop" if i == len(pieces) - 1 else None}
            choice.update({"delta": {"content": piece}} if chat else {"text": piece})
            self.wfile.write(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")
        usage = {"prompt_tokens": 5, "completion_tokens": len(pieces), "total_tokens": 5 + len(pieces)}
        self.wfile.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")

    def _sse_no_newline(self) -> None:
        """An event stream whose first line never ends: 64 KiB chunks as fast as the client reads, up to 512 MiB."""
        self._sse_head()
        chunk = b"data: " + b"x" * 65536
        for _ in range(8192):
            if self.stop.is_set():
                return
            try:
                self.wfile.write(chunk)
            except OSError:
                return


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (a deadline passed) is what these servers are for


class FaultServer:
    """``mode`` picks the misbehaviour; ``trickle_first`` (header_trickle: how many requests trickle before it
    recovers), ``delay`` (seconds before each answer, in any mode: slow's misbehaviour) and ``fail_first``
    (generations answered 503 first) tune it."""

    def __init__(self, mode: str, *, trickle_first: int = 10**9, delay: float = 0.0, fail_first: int = 0) -> None:
        assert mode in MODES, mode
        self.mode = mode
        self.seen: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self._sock: socket.socket | None = None
        self._http: ThreadingHTTPServer | None = None
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        if mode in ("silent", "garbage"):
            self._sock = socket.socket()
            self._sock.bind(("127.0.0.1", 0))
            self._sock.listen(64)
            self.port = self._sock.getsockname()[1]
            threading.Thread(target=self._raw, daemon=True).start()
        else:
            handler = type("H", (_Handler,), {"mode": mode, "seen": self.seen, "counts": self.counts,
                                              "lock": threading.Lock(), "stop": self._stop,
                                              "trickle_first": trickle_first, "delay": delay,
                                              "fail_first": fail_first})
            self._http = _QuietServer(("127.0.0.1", 0), handler)
            self._http.daemon_threads = True
            self.port = self._http.server_address[1]
            threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _raw(self) -> None:
        assert self._sock is not None
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self._conns.append(conn)  # silent: hold it open, never answer
            if self.mode == "garbage":
                try:
                    conn.recv(65536)
                    conn.sendall(b"\x00\x01\x02 this is not HTTP \xff\xfe\r\n\r\n")
                except OSError:
                    pass
                conn.close()

    def close(self) -> None:
        self._stop.set()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._sock is not None:
            self._sock.close()
        for c in self._conns:
            c.close()


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on a real loopback port, on a thread of its own: its base URL; stopped on the way out."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True  # a handler the test keeps hanging must not hold up the shutdown
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def fault_server(mode: str, **options: Any) -> Iterator[FaultServer]:
    s = FaultServer(mode, **options)
    try:
        yield s
    finally:
        s.close()


@contextmanager
def full_accept_queue(host: str = "127.0.0.1") -> Iterator[int]:
    """A listener on ``host`` whose accept queue is full and nobody accepts (a wedged engine): the kernel drops
    each new SYN, so a connect to the port waits. Its port."""
    with socket.socket() as s:
        s.bind((host, 0))
        s.listen(0)
        port = s.getsockname()[1]
        waiting = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            with suppress(BlockingIOError):
                c.connect((host, port))
            waiting.append(c)
        try:
            yield port
        finally:
            for c in waiting:
                c.close()
