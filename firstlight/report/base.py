"""What a reporter is told. Reporters only render: they decide nothing."""

from __future__ import annotations

from typing import Any, Protocol

from firstlight.judge import Assessment, Event


class Reporter(Protocol):
    def started(self, info: dict[str, Any]) -> None: ...
    def event(self, ev: Event, a: Assessment) -> None: ...
    def status(self, a: Assessment) -> None: ...
    def server_line(self, stream: str, text: str) -> None: ...
    def message(self, text: str) -> None: ...
    def verdict(self, summary: dict[str, Any]) -> None: ...
    def summary(self, summary: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


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

    def verdict(self, summary: dict[str, Any]) -> None:
        for r in self.reporters:
            r.verdict(summary)

    def summary(self, summary: dict[str, Any]) -> None:
        for r in self.reporters:
            r.summary(summary)

    def close(self) -> None:
        for r in self.reporters:
            r.close()
