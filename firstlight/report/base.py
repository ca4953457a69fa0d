"""What a reporter is told, defined once. Reporters only render: they decide nothing. The verdict and the final
summary come as the typed ``RunResult`` (``to_dict()`` is the JSON summary).

- ``Reporter``: the protocol, every method a reporter is called with;
- ``QuietReporter``: renders nothing; a reporter that renders only part of what it is told subclasses it and
  overrides that part (so a method added to the protocol is a no-op for it, never an AttributeError);
- ``ForwardingReporter``: passes every call on through one ``forward``; a wrapper (the fan-out below, the
  guard of a broken output, the unit watch that holds back the verdict) subclasses it, so it cannot miss a
  method: a wrapper that lacked ``observe`` once left the live dashboard blank under ``--unit``.

``REPORTER_METHODS`` names the protocol's methods; tests/unit/report/test_base.py checks that both bases define
each of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from firstlight.assessment import Assessment, Event
from firstlight.result import RunResult
from firstlight.serving import ServingStatus
from firstlight.timeline import CollectorStat, Observation

# How a reporter reads the watch's collectors (its samplers and readiness rungs) when it wants to: at a scrape.
ReadCollectors = Callable[[], list[CollectorStat]]


class Reporter(Protocol):
    def started(self, info: dict[str, Any]) -> None: ...
    def event(self, ev: Event, a: Assessment) -> None: ...
    def status(self, a: Assessment) -> None: ...
    def observe(self, obs: Observation) -> None: ...
    def server_line(self, stream: str, text: str) -> None: ...
    def message(self, text: str) -> None: ...
    def verdict(self, result: RunResult) -> None: ...
    def summary(self, result: RunResult) -> None: ...
    def serving(self, status: ServingStatus, changed: bool) -> None: ...
    def heartbeat(self) -> None: ...
    def collectors(self, read: ReadCollectors) -> None: ...
    def close(self) -> None: ...


REPORTER_METHODS = ("started", "event", "status", "observe", "server_line", "message", "verdict", "summary",
                    "serving", "heartbeat", "collectors", "close")


class QuietReporter:
    """A reporter that renders nothing; the ones that render only part of what they are told (systemd,
    Prometheus, the readiness endpoints, the JSON lines) override just that part."""

    def started(self, info: dict[str, Any]) -> None:
        pass

    def event(self, ev: Event, a: Assessment) -> None:
        pass

    def status(self, a: Assessment) -> None:
        pass

    def observe(self, obs: Observation) -> None:
        """Raw observations, for the reporters that draw them (the dashboard)."""

    def server_line(self, stream: str, text: str) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def verdict(self, result: RunResult) -> None:
        pass

    def summary(self, result: RunResult) -> None:
        pass

    def serving(self, status: ServingStatus, changed: bool) -> None:
        """After READY, at every step of the serving checks (``changed``: the state just changed)."""

    def heartbeat(self) -> None:
        """After READY=1 and before the serving checks start (warm-up, benchmark, the history), at least every
        0.1 s while the server's process lives: it still serves (systemd's watchdog is fed from it)."""

    def collectors(self, read: ReadCollectors) -> None:
        """How to read the watch's collectors, once per watch (the exporter reads them at each scrape)."""

    def close(self) -> None:
        pass


class ForwardingReporter:
    """Every call goes through ``forward(name, *args)``, by default to ``inner``. A subclass overrides
    ``forward`` (fan-out, guard) or a method it treats differently (holds back), and inherits the rest."""

    def __init__(self, inner: Reporter) -> None:
        self.inner = inner

    def forward(self, name: str, *args: Any) -> None:
        getattr(self.inner, name)(*args)

    def started(self, info: dict[str, Any]) -> None:
        self.forward("started", info)

    def event(self, ev: Event, a: Assessment) -> None:
        self.forward("event", ev, a)

    def status(self, a: Assessment) -> None:
        self.forward("status", a)

    def observe(self, obs: Observation) -> None:
        self.forward("observe", obs)

    def server_line(self, stream: str, text: str) -> None:
        self.forward("server_line", stream, text)

    def message(self, text: str) -> None:
        self.forward("message", text)

    def verdict(self, result: RunResult) -> None:
        self.forward("verdict", result)

    def summary(self, result: RunResult) -> None:
        self.forward("summary", result)

    def serving(self, status: ServingStatus, changed: bool) -> None:
        self.forward("serving", status, changed)

    def heartbeat(self) -> None:
        self.forward("heartbeat")

    def collectors(self, read: ReadCollectors) -> None:
        self.forward("collectors", read)

    def close(self) -> None:
        self.forward("close")


class Reporters(ForwardingReporter):
    """Fan-out to several reporters (human lines on stderr, JSON Lines on stdout), in order."""

    def __init__(self, *reporters: Reporter) -> None:
        super().__init__(QuietReporter())
        self.reporters = reporters

    def forward(self, name: str, *args: Any) -> None:
        for r in self.reporters:
            getattr(r, name)(*args)
