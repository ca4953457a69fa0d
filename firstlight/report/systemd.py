"""systemd integration: sd_notify(3) over $NOTIFY_SOCKET, for a unit with ``Type=notify``.

- ``READY=1`` only when the verdict is ready (a real generation returned), never when the port opens;
- ``STATUS=`` the live status line, so ``systemctl status`` shows phase, progress and ETA;
- ``EXTEND_TIMEOUT_USEC=`` while the judge sees progress: a slow start is not killed by TimeoutStartSec,
  a hung one is (the extension stops as soon as the verdict is hung, failed or timeout).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from firstlight.judge import Assessment, Event
from firstlight.report.format import status_line
from firstlight.result import RunResult


class SystemdNotifier:
    def __init__(self, address: str | None = None, extend_s: float = 60.0, interval: float = 5.0) -> None:
        self.address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        self.extend_s, self.interval = extend_s, interval
        self._last = 0.0
        self._sock: socket.socket | None = None
        if self.address:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def notify(self, *fields: str) -> None:
        if self._sock is None:
            return
        addr = self.address
        if addr.startswith("@"):  # abstract namespace
            addr = "\0" + addr[1:]
        try:
            self._sock.sendto("\n".join(fields).encode(), addr)
        except OSError:
            pass  # systemd went away: never let that take the watch down

    def started(self, info: dict[str, Any]) -> None:
        self.notify(f"MAINPID={os.getpid()}", "STATUS=starting the server")

    def event(self, ev: Event, a: Assessment) -> None:
        pass

    def status(self, a: Assessment) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        fields = [f"STATUS={status_line(a)}"]
        if a.verdict == "starting":
            fields.append(f"EXTEND_TIMEOUT_USEC={int(self.extend_s * 1e6)}")
        self.notify(*fields)

    def server_line(self, stream: str, text: str) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def verdict(self, result: RunResult) -> None:
        if result.serving:
            g = result.first_generation or {}
            self.notify("READY=1", f"STATUS=serving: first generation in {g.get('latency_s') or 0:.2f}s")
        else:
            self.notify(f"STATUS={result.verdict} in phase {result.phase}: {result.failure or ''}")

    def summary(self, result: RunResult) -> None:
        # A regression is a finding about a server that serves: systemd must not be told it stops.
        if result.serving:
            if result.regression:
                self.notify(f"STATUS=serving; regression: {result.regression[0].get('message', '')}")
            return
        self.notify("STOPPING=1", f"STATUS={result.verdict}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
