"""Helpers shared by tests/e2e/samplers/test_oom.py, tests/unit/samplers/test_oom.py."""

from __future__ import annotations

from pathlib import Path

from firstlight.config import JudgeConfig
from firstlight.engines import get_profile
from firstlight.judge import Judge
from firstlight.timeline import Started


def _cgroup(tmp_path: Path, name: str, **files: str) -> Path:
    d = tmp_path / name
    d.mkdir(parents=True)
    for file, text in files.items():
        (d / file.replace("_", ".", 1)).write_text(text)
    return d


def _judge() -> Judge:
    j = Judge(JudgeConfig(timeout=600), get_profile("llamacpp"), 0.0)
    j.feed(Started(0.0, pid=4242, launched=True))
    return j
