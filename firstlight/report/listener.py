"""Stopping a listening HTTP server at once. ``socketserver``'s ``shutdown()`` waits for ``serve_forever``'s next
look at its flag, which comes when its select wakes: at the next connection, or at the end of its poll interval
(half a second in prometheus_client's server). A run's end should not wait on that, so the stop also wakes the
select with a connection of its own to the listening socket."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time

STOP_S = 2.0  # a serve_forever busy in a handler that long is left to die with the process (a daemon thread)
_WAKE_EVERY_S = 0.02


def stop(server: socketserver.TCPServer, within_s: float = STOP_S) -> bool:
    """Stop ``server``'s ``serve_forever`` and close its socket; True when the loop ended within ``within_s``."""
    stopper = threading.Thread(target=server.shutdown, name="firstlight-listener-stop", daemon=True)
    stopper.start()
    host, port = server.server_address[:2]  # as bound; a connection to 0.0.0.0 or :: reaches loopback (Linux)
    deadline = time.monotonic() + within_s
    while stopper.is_alive() and time.monotonic() < deadline:
        # a connection wakes the select; until shutdown() has set its flag, the loop serves it and selects again
        with contextlib.suppress(OSError), socket.create_connection((str(host), int(port)), timeout=_WAKE_EVERY_S):
            pass
        stopper.join(_WAKE_EVERY_S)
    with contextlib.suppress(OSError):
        server.server_close()
    return not stopper.is_alive()
