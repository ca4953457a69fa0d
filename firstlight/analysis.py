"""One analysis of a judged start: its anatomy, its start type, the engine's clock beside it and its version.

The live result, the replay of a log, the report of a record and ``explain`` all take the judge's final state
through :func:`analyse`, so a start analysed in any of them says the same. Pure: no clocks, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from firstlight.anatomy import anatomy, compare_clocks
from firstlight.starts import classify
from firstlight.vocab import SERVING_VERDICTS

if TYPE_CHECKING:
    from firstlight.assessment import Assessment
    from firstlight.judge import Judge

__all__ = ["Analysis", "analyse"]


@dataclass(frozen=True)
class Analysis:
    """What a judged start says beyond its verdict."""

    anatomy: dict[str, Any]  # firstlight.anatomy: each phase's time and bound, idle stretches, cuts
    start_type: dict[str, Any]  # firstlight.starts.classify: {"type", "labels", "evidence"}
    engine_clock: dict[str, Any] | None  # the engine's own figures beside the anatomy; None: it published none
    engine_version: str | None = None  # as the engine's log says it (what a regression after an upgrade names)

    @property
    def summary_anatomy(self) -> dict[str, Any]:
        """The anatomy as a summary holds it: with the start type, so ``explain`` of a summary or a history run
        says it too."""
        return {**self.anatomy, "start_type": self.start_type}


def analyse(judge: Judge, a: Assessment, *, cold_start_s: float | None = None, command: Sequence[str] | None = None,
            disk: dict[str, Any] | None = None) -> Analysis:
    """The analysis of ``judge`` at its assessment ``a`` (its final one, or the last). ``cold_start_s``: seconds
    from the server's start to READY, where the caller knows them (a watched process's birth is not the judge's
    start); ``command``: the server's command, masked; ``disk``: the measured read rates of the weights'
    filesystem (``preflight --disk``)."""
    phases = judge.phases.dicts()
    anat = anatomy(phases, judge.signals, a.t, first_generation_s=(judge.first_generation or {}).get("latency_s"),
                   device_rate=(disk or {}).get("rate"), cache_rate=(disk or {}).get("cache_rate"), reached=a.phase)
    kind = classify(phases=[str(p["name"]) for p in phases], signals=judge.signals, anatomy=anat,
                    log_lines=judge.log.count, cold_start_s=cold_start_s, ready=a.verdict in SERVING_VERDICTS,
                    command=command, attach=judge.profile.flags.attach)
    version = judge.signals.engine_version
    return Analysis(anat, kind, compare_clocks(anat, judge.signals.clocks), version[1] if version else None)
