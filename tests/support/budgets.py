"""Synthetic starts for the learned phase budgets: an SGLang-like start, phase by phase, with its log lines and a
process sample a second, as the judge is fed live; good ones to learn from and ones that hang in a phase.

Shared by tests/unit/test_budgets.py, tests/unit/judge/test_budgets.py, tests/unit/test_phases.py and
bench/bench_budgets.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from firstlight.analysis import analyse
from firstlight.assessment import Assessment
from firstlight.budgets import Budgets, learn
from firstlight.config import JudgeConfig
from firstlight.drive import Driver
from firstlight.engines import get_profile
from firstlight.timeline import Level, LogLine, Observation, Probe, ProcessSample, ProcInfo, Started

SGLANG = get_profile("sglang")
RULES = JudgeConfig(timeout=7200, stall_timeout=120, spin_timeout=900)
T0 = 1_700_000_000.0

# The line that begins each phase, and what moves in it: "reads" (the weights: strong), "log" (a progress line
# every LOG_EVERY s and the CPU busy), "cpu" (the CPU busy, a line only at its start: graphs, compiles).
PHASES: tuple[tuple[str, str, str], ...] = (
    ("distributed_init", "Init torch distributed begin.", "cpu"),
    ("weights_loading", "Load weight begin. avail mem=78.50 GB", "reads"),
    ("weights_loaded", "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=62.10 GB", "log"),
    ("kv_cache", "KV Cache is allocated. #tokens: 411510, K size: 25.12 GB, V size: 25.12 GB", "log"),
    ("cuda_graph", "Capture cuda graph begin. This can take up to several minutes. avail mem=11.20 GB", "log"),
    ("http_listening", "Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)", "log"),
)
NAMES = tuple(p[0] for p in PHASES)
LOG_EVERY = 3.0
USUAL = {"distributed_init": 20.0, "weights_loading": 40.0, "weights_loaded": 4.0, "kv_cache": 6.0,
         "cuda_graph": 45.0, "http_listening": 3.0}
HANGS = ("frozen", "spinning", "silent")


class _Tree:
    """The process tree's counters, advanced a sample at a time."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.read = 0

    def sample(self, t: float) -> ProcessSample:
        return ProcessSample(t, alive=True, exit_code=None, cpu_seconds=self.cpu, rss_bytes=100 << 20,
                             read_bytes=self.read, procs=(ProcInfo(100, "server", "running", self.cpu, 100 << 20, T0),))


def start(durations: dict[str, float] | None = None, *, t0: float = T0, hang: tuple[str, str] | None = None,
          hang_for: float = 2000.0) -> list[Observation]:
    """A start's observations: each phase of ``durations`` (default :data:`USUAL`) for its seconds, then READY
    (a generation answered). ``hang``: (phase, kind) stops the start there for ``hang_for`` seconds: ``frozen``
    (nothing moves), ``spinning`` (one core busy, nothing else: a deadlocked collective), ``silent`` (no line, a
    trickle of CPU and reads below the progress thresholds: a process asleep in a poll)."""
    d = {**USUAL, **(durations or {})}
    tree = _Tree()
    obs: list[Observation] = [Started(t0, 100, "http://127.0.0.1:30000", "sglang", True),
                              LogLine(t0 + 0.5, "server_args=ServerArgs(model_path='m')", "stderr", 1)]
    t, line = t0 + 1.0, 2
    obs.append(tree.sample(t))
    for name, text, moves in PHASES:
        obs.append(LogLine(t, text, "stderr", line))
        line += 1
        hung = hang is not None and hang[0] == name
        seconds = hang_for if hung else d[name]
        kind = hang[1] if hung and hang is not None else None
        steps = max(int(seconds), 1)
        step = seconds / steps
        next_log = t + LOG_EVERY
        for i in range(1, steps + 1):
            now = t + i * step
            if kind == "spinning":
                tree.cpu += step
            elif kind == "silent":
                tree.cpu += 0.01 * step
                tree.read += 4096
            elif kind is None:
                if moves == "reads":
                    tree.read += int(200e6 * step)
                tree.cpu += step
                if moves == "log" and now >= next_log:
                    obs.append(LogLine(now, f"{name}: progress {i}/{steps}", "stderr", line))
                    line += 1
                    next_log = now + LOG_EVERY
            obs.append(tree.sample(now))
        t += seconds
        if hung:
            return obs
    obs += [Probe(t + 0.1, lv, True, "ok", latency_s=0.05) for lv in (Level.PORT, Level.HTTP, Level.HEALTH,
                                                                      Level.MODELS)]
    obs.append(Probe(t + 0.5, Level.GENERATION, True, "ok", text=" Paris", latency_s=0.2))
    return obs


def judged(obs: Sequence[Observation], rules: JudgeConfig = RULES, budgets: Budgets | None = None,
           every: float = 1.0) -> tuple[Driver, Assessment]:
    """Feed ``obs`` to a driver (with ``budgets``), assessing every ``every`` s between observations as the
    live session does; stops at the first final verdict."""
    driver = Driver(rules, SGLANG, obs[0].t)
    driver.use_budgets(budgets)
    a = driver.assess(obs[0].t)
    clock = obs[0].t
    for o in obs:
        while clock + every < o.t:
            clock += every
            a = driver.assess(clock)
            if a.final:
                return driver, a
        clock = max(clock, o.t)
        a = driver.feed(o).assessment
        if a.final:
            return driver, a
    end = obs[-1].t
    while not a.final and clock < end + 1:
        clock += every
        a = driver.assess(clock)
    return driver, a


def anatomy_of(obs: Sequence[Observation], rules: JudgeConfig = RULES) -> tuple[str | None, dict[str, Any]]:
    """A good start's (start type, anatomy), as its summary stores them."""
    driver, a = judged(obs, rules)
    assert a.verdict == "ready", a
    found = analyse(driver.judge, a)
    return found.start_type["type"], found.summary_anatomy


def history_of(n: int, jitter: float = 0.15, scale: dict[str, float] | None = None
               ) -> list[tuple[str | None, dict[str, Any]]]:
    """``n`` good starts, newest first, each phase ``(1 +/- jitter)`` times its usual seconds (deterministic)."""
    out = []
    for i in range(n):
        f = 1 + jitter * ((i % 3) - 1)
        out.append(anatomy_of(start({k: v * f * (scale or {}).get(k, 1.0) for k, v in USUAL.items()},
                                    t0=T0 + 10_000 * i)))
    return out[::-1]


def learned(n: int = 3) -> Budgets:
    starts = history_of(n)
    return learn(starts, starts[0][0])
