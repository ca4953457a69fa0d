"""The judge's progress thresholds at their defaults (firstlight/trackers.py, JudgeConfig()): CPU at 10 % of a
core or more is weak progress (hung only after --spin-timeout, 900 s), under it no progress (hung after
--stall-timeout, 120 s)."""

from __future__ import annotations

from firstlight.config import JudgeConfig
from firstlight.drive import judge_timeline
from firstlight.engines import get_profile
from firstlight.timeline import Observation, Started
from tests.support.judge import T0, proc

DEFAULTS = JudgeConfig()


def _busy(cpu_per_10s: float, until: float) -> str:
    """A silent process using ``cpu_per_10s`` CPU seconds every 10 s; the verdict at ``until``."""
    obs: list[Observation] = [Started(T0, 100, "http://x", "generic", True)]
    obs += [proc(float(t), cpu=t / 10 * cpu_per_10s) for t in range(0, int(until) + 1, 10)]
    return judge_timeline(obs, DEFAULTS, get_profile("generic"), T0 + until).verdict


def test_cpu_at_0_10_cores_is_weak_progress_hung_only_after_the_900s_spin_timeout():
    assert _busy(1.0, 890) == "starting"  # 0.10 cores: weak progress holds off the 120 s stall rule
    assert _busy(1.0, 910) == "hung"


def test_cpu_under_0_10_cores_is_no_progress_hung_after_the_120s_stall_timeout():
    assert _busy(0.9, 110) == "starting"
    assert _busy(0.9, 130) == "hung"  # 0.09 cores


def test_the_default_thresholds():
    assert (DEFAULTS.cpu_busy_cores, DEFAULTS.stall_timeout, DEFAULTS.spin_timeout) == (0.10, 120.0, 900.0)
