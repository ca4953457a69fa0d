"""Helpers shared by tests/unit/wire/test_deadline.py."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


# -- wire/deadline.py: the deadline shortens every single read -----------------------------------------------
@contextmanager
def _silent_mid_read() -> Iterator[str]:
    """A real server that answers a status line, headers and 5 of 100 body bytes, then says nothing more
    while it keeps the connection open."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except OSError:
                continue
            conns.append(conn)
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                             b'{"ok"')
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{lsock.getsockname()[1]}"
    finally:
        stop.set()
        lsock.close()
        for c in conns:
            c.close()
