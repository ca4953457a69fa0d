"""What a reporter is told. Reporters only render: they decide nothing. The verdict and the final summary come as
the typed ``RunResult`` (``to_dict()`` is the JSON summary)."""

from __future__ import annotations

from typing import Any, Protocol

from firstlight.judge import Assessment, Event
from firstlight.result import RunResult


class Reporter(Protocol):
    def started(self, info: dict[str, Any]) -> None: ...
    def event(self, ev: Event, a: Assessment) -> None: ...
    def status(self, a: Assessment) -> None: ...
    def server_line(self, stream: str, text: str) -> None: ...
    def message(self, text: str) -> None: ...
    def verdict(self, result: RunResult) -> None: ...
    def summary(self, result: RunResult) -> None: ...
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

    def verdict(self, result: RunResult) -> None:
        for r in self.reporters:
            r.verdict(result)

    def summary(self, result: RunResult) -> None:
        for r in self.reporters:
            r.summary(result)

    def close(self) -> None:
        for r in self.reporters:
            r.close()
