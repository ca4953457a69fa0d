"""What a reporter is told. Reporters only render: they decide nothing. The verdict and the final summary come as
the typed ``RunResult`` (``to_dict()`` is the JSON summary)."""

from __future__ import annotations

from typing import Any, Protocol

from firstlight.judge import Assessment, Event
from firstlight.result import RunResult
from firstlight.serving import ServingStatus
from firstlight.timeline import Observation


class Reporter(Protocol):
    def started(self, info: dict[str, Any]) -> None: ...
    def event(self, ev: Event, a: Assessment) -> None: ...
    def status(self, a: Assessment) -> None: ...
    def server_line(self, stream: str, text: str) -> None: ...
    def message(self, text: str) -> None: ...
    def verdict(self, result: RunResult) -> None: ...
    def summary(self, result: RunResult) -> None: ...
    def close(self) -> None: ...


class QuietReporter:
    """A reporter that renders nothing; the ones that render only part of what they are told (systemd,
    Prometheus, the readiness endpoints) override just that part."""

    def started(self, info: dict[str, Any]) -> None:
        pass

    def event(self, ev: Event, a: Assessment) -> None:
        pass

    def status(self, a: Assessment) -> None:
        pass

    def server_line(self, stream: str, text: str) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def verdict(self, result: RunResult) -> None:
        pass

    def summary(self, result: RunResult) -> None:
        pass

    def serving(self, status: ServingStatus, changed: bool) -> None:
        pass

    def close(self) -> None:
        pass


class Reporters:
    """Fan-out to several reporters (human lines on stderr, JSON Lines on stdout)."""

    def __init__(self, *reporters: Reporter) -> None:
        self.reporters = reporters

    def started(self, info: dict[str, Any]) -> None:
        for r in self.reporters:
            r.started(info)

    def event(self, ev: Event, a: Assessment) -> None:
        for r in self.reporters:
            r.event(ev, a)

    def status(self, a: Assessment) -> None:
        for r in self.reporters:
            r.status(a)

    def server_line(self, stream: str, text: str) -> None:
        for r in self.reporters:
            r.server_line(stream, text)

    def message(self, text: str) -> None:
        for r in self.reporters:
            r.message(text)

    def verdict(self, result: RunResult) -> None:
        for r in self.reporters:
            r.verdict(result)

    def summary(self, result: RunResult) -> None:
        for r in self.reporters:
            r.summary(result)

    def serving(self, status: ServingStatus, changed: bool) -> None:
        """After READY, at every step of the serving checks (``changed``: the state just changed)."""
        for r in self.reporters:
            serving = getattr(r, "serving", None)
            if serving is not None:
                serving(status, changed)

    def observe(self, obs: Observation) -> None:
        """Raw observations, for the reporters that draw them (the dashboard)."""
        for r in self.reporters:
            observe = getattr(r, "observe", None)
            if observe is not None:
                observe(obs)

    def close(self) -> None:
        for r in self.reporters:
            r.close()
