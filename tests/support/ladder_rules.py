"""Helpers shared by tests/unit/probes/ladder/test_rules.py, tests/unit/probes/ladder/test_ladder.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.faults import serving

BIG = 64 << 20  # a body far over the cap


@contextmanager
def server(routes: dict[tuple[str, str], tuple[int, Any]]) -> Iterator[tuple[str, dict[str, int]]]:
    sent = {"bytes": 0}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _answer(self, method: str) -> None:
            if method == "POST":
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, body = routes.get((method, self.path.split("?")[0]), (404, {}))
            self.send_response(status)
            if body == "BIG":
                self.send_header("Content-Length", str(BIG))
                self.end_headers()
                chunk = b" " * (1 << 16)
                try:
                    for _ in range(BIG // len(chunk)):
                        self.wfile.write(chunk)
                        sent["bytes"] += len(chunk)
                except OSError:
                    pass  # the client hung up: what we wanted to see
                return
            data = json.dumps(body).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    with serving(H) as url:
        yield url, sent
