"""Small purpose-built servers for faults: real sockets, each misbehaving in one way."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("ok", "silent", "5xx", "garbage", "not_json", "empty", "models_only", "trickle", "health_only")


class _Handler(BaseHTTPRequestHandler):
    mode = "ok"
    seen: list[dict[str, Any]]
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

    def do_GET(self) -> None:
        self._record()
        m = self.mode
        if m == "5xx":
            return self._send(500, b'{"error":"internal"}')
        if m == "not_json":
            return self._send(200, b"<html>hello</html>", "text/html")
        if self.path.startswith("/health"):
            return self._send(200, b'{"status":"ok"}')
        if self.path.startswith("/v1/models"):
            if m == "health_only":
                return self._send(503, b'{"error":"loading"}')
            return self._send(200, json.dumps({"data": [{"id": "m1"}]}).encode())
        self._send(404, b"{}")

    def do_POST(self) -> None:
        self._record()
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        self.seen[-1]["model"] = req.get("model") if isinstance(req, dict) else None
        m = self.mode
        if m in ("5xx",):
            return self._send(500, b'{"error":"internal"}')
        if m in ("models_only", "health_only"):
            return self._send(503, b'{"error":{"message":"Loading model"}}')
        if m == "not_json":
            return self._send(200, b"<html>hello</html>", "text/html")
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
        if "messages" in req:
            choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}}
        else:
            choice = {"text": text}
        self._send(200, json.dumps({"choices": [choice], "model": req.get("model")}).encode())


class FaultServer:
    def __init__(self, mode: str) -> None:
        assert mode in MODES, mode
        self.mode = mode
        self.seen: list[dict[str, Any]] = []
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
            handler = type("H", (_Handler,), {"mode": mode, "seen": self.seen})
            self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            self._http.daemon_threads = True
            self.port = self._http.server_address[1]
            threading.Thread(target=self._http.serve_forever, daemon=True).start()

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
def fault_server(mode: str) -> Iterator[FaultServer]:
    s = FaultServer(mode)
    try:
        yield s
    finally:
        s.close()
