"""Helpers shared by tests/unit/judge/test_edges.py, tests/unit/judge/test_rules.py."""

from __future__ import annotations

from firstlight.config import JudgeConfig
from firstlight.judge import Judge
from firstlight.timeline import Started
from tests.support.judge import GENERIC, T0

STALL = JudgeConfig(timeout=600, stall_timeout=10, spin_timeout=900)


def _judge(profile=GENERIC, rules: JudgeConfig = STALL) -> Judge:
    j = Judge(rules, profile, T0)
    j.feed(Started(T0, 100, "http://x", profile.name, True))
    return j
