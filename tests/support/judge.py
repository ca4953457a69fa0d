"""Helpers shared by tests/e2e/judge/test_judge.py, tests/support/judge_rules.py, tests/unit/judge/test_edges.py,
tests/unit/judge/test_rules.py, tests/unit/judge/test_judge.py."""

from __future__ import annotations

from firstlight.config import JudgeConfig
from firstlight.drive import judge_timeline
from firstlight.engines import get_profile
from firstlight.timeline import (
    Level,
    Observation,
    Probe,
    ProcessSample,
    ProcInfo,
    Started,
)

T0 = 1_700_000_000.0


GENERIC = get_profile("generic")


RULES = JudgeConfig(timeout=600, stall_timeout=120, spin_timeout=900)


def proc(t: float, cpu: float = 0.0, read: int = 0, rss: int = 100 << 20, alive: bool = True,
         exit_code: int | None = None, procs: tuple[ProcInfo, ...] = (),
         died: tuple[ProcInfo, ...] = ()) -> ProcessSample:
    return ProcessSample(T0 + t, alive=alive, exit_code=exit_code, cpu_seconds=cpu, rss_bytes=rss, read_bytes=read,
                         procs=procs or (ProcInfo(100, "server", "sleeping", cpu, rss, T0),), died=died)


def probe(t: float, level: Level, ok: bool, detail: str = "", text: str | None = None,
          transient: bool = True) -> Probe:
    return Probe(T0 + t, level, ok, detail, text=text, latency_s=0.1 if ok else None, transient=transient)


def ladder_up_to_models(t: float) -> list[Observation]:
    return [probe(t, Level.PORT, True), probe(t, Level.HTTP, True), probe(t, Level.HEALTH, True),
            probe(t, Level.MODELS, True)]


def run(obs: list[Observation], now: float, profile=GENERIC, rules: JudgeConfig = RULES):
    return judge_timeline([Started(T0, 100, "http://x", profile.name, True), *obs], rules, profile, T0 + now)
