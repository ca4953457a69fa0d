"""What the judge says, as values: an assessment (verdict, phase, level, evidence, progress), the events worth a
line of output, the phases with their spans. Reporters, results and renderers read these and nothing of the
judge's workings (``firstlight.judge`` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from firstlight.timeline import EngineClock, Level, WeightsTotal
from firstlight.vocab import FINAL_VERDICTS


@dataclass(frozen=True)
class Evidence:
    signal: str  # log | process | probe:<level> | disk | memory | cpu | gpu | watch
    value: str  # what was seen, as a person would check it
    since: float | None = None  # epoch seconds

    def to_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "value": self.value, "since": self.since}


@dataclass
class PhaseSpan:
    name: str
    start: float
    end: float | None = None
    source: str = "log"  # log | probe | start
    line: int | None = None  # the log line that began it

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "start": self.start, "end": self.end, "source": self.source, "line": self.line}


@dataclass(frozen=True)
class Event:
    """Something worth a line of output."""

    t: float
    type: str  # phase | level | lost | failure_line | warning | note | engine_ready
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Progress:
    weights_fraction: float | None = None
    weights_source: str | None = None  # disk | log
    read_bytes: int = 0
    weights_bytes: int | None = None
    read_rate: float | None = None  # bytes/s over the last window
    eta_weights_s: float | None = None
    eta_total_s: float | None = None
    cpu_cores: float | None = None  # CPU use of the tree, in cores, over the last window
    cpu_seconds: float = 0.0
    rss_bytes: int = 0
    procs: int = 0
    gpu_memory_bytes: int | None = None
    gpu_util: float | None = None
    since_last_log_s: float | None = None
    shard: tuple[int, int] | None = None
    progress_line: str | None = None
    # the download (the model's hub cache growing): bytes arrived since the watch began, their rate over the last
    # window, the fraction when the engine's own bar gives it, the file still arriving
    download_bytes: int | None = None
    download_rate: float | None = None
    download_fraction: float | None = None
    download_file: str | None = None
    # the current phase against its budget learned from this deployment's history (PhaseTracker.budget_use in
    # firstlight.phases); None: no history was read
    phase_budget: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class Assessment:
    verdict: str
    phase: str
    level: Level
    elapsed_s: float
    evidence: list[Evidence]
    progress: Progress
    failure: str | None = None
    hint: str | None = None
    detail: str | None = None  # e.g. "busy-wait suspected"
    engine_ready: bool = False
    # When it was judged (epoch seconds), and the facts of the start that the rest of a run needs, as they stand
    # at that moment; a final verdict's facts follow what arrives after it (the engine's figures read once it
    # serves), its verdict does not.
    t: float = 0.0
    ready_at: float | None = None  # when READY held (a generation answered, or replay's ready line)
    weights: WeightsTotal | None = None  # the weights' size, residency at start and filesystem, once measured
    clocks: tuple[EngineClock, ...] = ()  # the engine's own figures so far (its log, stream and endpoints)

    @property
    def final(self) -> bool:
        return self.verdict in FINAL_VERDICTS


__all__ = ["Assessment", "Event", "Evidence", "PhaseSpan", "Progress"]
