"""The sources of one attempt at a unit: the runner's sources (GPUs, weights, the readiness ladder), with the
unit's cgroup as the process sampler and one invocation's journal as the log.

A session is composed with them (``Session(..., sources=partial(UnitSources, journal=..., ...))``): the pump, the
judge, the result and the reporters are the same as for ``watch --pid --log``.
"""

from __future__ import annotations

from collections.abc import Callable

from firstlight.config import Config
from firstlight.engines.command import ServerCommand
from firstlight.runner.sources import Echo, Sink, Sources
from firstlight.samplers.base import Sampler
from firstlight.timeline import SourceNote
from firstlight.units.journal.follow import JournalSource


class UnitSources(Sources):
    def __init__(self, cfg: Config, sink: Sink, echo: Echo, identify: bool, clock: Callable[[], float],
                 backlog: Callable[[], int] | None, command: ServerCommand | None, *, journal: JournalSource,
                 processes: Sampler | None, notes: list[str]) -> None:
        super().__init__(cfg, sink, echo, identify, clock, backlog, command)
        self.journal, self.processes, self.notes = journal, processes, notes

    def process_sampler(self) -> Sampler | None:
        return self.processes

    def start(self) -> str | None:
        for text in self.notes:
            self.sink(SourceNote(self.clock(), "systemd", text))
        self.journal.echo = self.echo if self.cfg.echo_server_output else None
        self._start(self.journal)
        return super().start()

    def settle_logs(self, timeout: float = 2.0) -> None:
        super().settle_logs(timeout)
        self.journal.sync(timeout)
