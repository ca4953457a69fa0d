"""Helpers shared by tests/e2e/hostile/test_logs.py, tests/unit/samplers/test_logs.py."""

from __future__ import annotations

from firstlight.timeline import LogLine, Observation


def _texts(obs: list[Observation]) -> list[str]:
    return [o.text for o in obs if isinstance(o, LogLine)]
