"""systemd integration: sd_notify(3) over $NOTIFY_SOCKET, for a unit with ``Type=notify``.

- ``READY=1`` only when the verdict is ready (a real generation returned), never when the port opens;
- ``STATUS=`` the live status line, so ``systemctl status`` shows phase, progress and ETA;
- ``EXTEND_TIMEOUT_USEC=`` while the judge sees progress: a slow start is not killed by TimeoutStartSec,
  a hung one is (the extension stops as soon as the verdict is hung, failed or timeout);
- ``WATCHDOG=1`` at half ``WATCHDOG_USEC`` (a unit with ``WatchdogSec=``) while the start progresses (the
  judge's verdict is still ``starting``), between READY=1 and the serving checks (warm-up, benchmark, the
  history) while the server's process lives, and, after that, while the serving checks say it serves (serving
  or degraded); none once it is hung or not serving, so systemd restarts the unit (``Restart=``): the restart
  policy is systemd's. Sent from the calls that carry the state (the judge's status at every assessment, the
  serving checks at every step), so a wedged firstlight stops feeding the watchdog too.
"""

from __future__ import annotations

import math
import os
import socket
import time
from typing import Any

from firstlight.assessment import Assessment
from firstlight.report.base import QuietReporter
from firstlight.report.format import status_line
from firstlight.result import RunResult
from firstlight.serving import ServingStatus


def watchdog_interval(usec: str | None, pid: str | None) -> float | None:
    """Seconds of systemd's watchdog for this process, or None: no ``WatchdogSec=``, or meant for another pid."""
    if not usec or not usec.strip().isdigit() or int(usec) <= 0:
        return None
    if pid and pid.strip() != str(os.getpid()):
        return None
    return int(usec) / 1e6


class SystemdNotifier(QuietReporter):
    def __init__(self, address: str | None = None, extend_s: float = 60.0, interval: float = 5.0,
                 watchdog_usec: str | None = None, watchdog_pid: str | None = None) -> None:
        self.address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        self.extend_s, self.interval = extend_s, interval
        self._last = 0.0
        self.watchdog_s = watchdog_interval(os.environ.get("WATCHDOG_USEC") if watchdog_usec is None
                                            else watchdog_usec,
                                            os.environ.get("WATCHDOG_PID") if watchdog_pid is None else watchdog_pid)
        self._fed = -math.inf
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

    def feed_watchdog(self) -> None:
        """WATCHDOG=1, at most every half watchdog interval (sd_watchdog_enabled(3): "half the time")."""
        if self.watchdog_s is None:
            return
        now = time.monotonic()
        if now - self._fed >= self.watchdog_s / 2:
            self._fed = now
            self.notify("WATCHDOG=1")

    def status(self, a: Assessment) -> None:
        if a.verdict == "starting":  # progressing (the judge says hung otherwise, and this stops)
            self.feed_watchdog()
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        fields = [f"STATUS={status_line(a)}"]
        if a.verdict == "starting":
            fields.append(f"EXTEND_TIMEOUT_USEC={int(self.extend_s * 1e6)}")
        self.notify(*fields)

    def verdict(self, result: RunResult) -> None:
        if result.serving:
            g = result.first_generation
            self.notify("READY=1", f"STATUS=serving: first generation in {g.get('latency_s') or 0:.2f}s"
                        if g is not None else "STATUS=serving: a worker, seen serving in /proc")
        else:
            self.notify(f"STATUS={result.verdict} in phase {result.phase}: {result.failure or ''}")

    def summary(self, result: RunResult) -> None:
        # A regression is a finding about a server that serves: systemd must not be told it stops.
        if result.serving:
            if result.regression:
                self.notify(f"STATUS=serving; regression: {result.regression[0].get('message', '')}")
            return
        self.notify("STOPPING=1", f"STATUS={result.verdict}")

    def serving(self, status: ServingStatus, changed: bool) -> None:
        if status.feeds_watchdog:
            self.feed_watchdog()
        if changed:
            self.notify(f"STATUS={status.state}: {status.reason}")

    def heartbeat(self) -> None:
        self.feed_watchdog()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
