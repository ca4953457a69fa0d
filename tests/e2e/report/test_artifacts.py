"""A run's private copy of its record (for ``--report``, ``--trace`` and the history's timeline): read back whole at
the end, and never a file left behind, even when firstlight is killed by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from firstlight.config import Config, HistoryConfig
from firstlight.report.artifacts import RunArtifacts
from firstlight.timeline import Level, LogLine, Probe, Started

T0 = 1_000.0
LINES = [Started(T0, 4242, "http://127.0.0.1:8000"), LogLine(T0 + 1, "Loading model weights"),
         Probe(T0 + 2, Level.GENERATION, True, "POST /v1/completions -> 200", 200, 0.4, "Hello")]


def test_the_private_copy_has_no_name_and_is_read_back_whole_for_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    report = tmp_path / "run.html"
    art = RunArtifacts(Config(history=HistoryConfig(enabled=False)), report=report)
    try:
        stream = art.stream()
        assert stream is not None
        for obs in LINES:
            stream.write(obs.to_line())
        assert list(temp.iterdir()) == []  # nothing with a name while the run goes on
        assert art.finish(None) == [report] and "Loading model weights" in report.read_text()
    finally:
        art.close()
    assert list(temp.iterdir()) == []


KILLED = """
import os, signal, sys
from firstlight.config import Config
from firstlight.report.artifacts import RunArtifacts
art = RunArtifacts(Config(), report=None)  # the history is on: a private copy is kept
art.stream().write('{"kind": "log", "t": 1.0, "text": "x"}\\n')
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_firstlight_killed_by_sigkill_leaves_no_copy_behind(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", KILLED], env=env, timeout=60, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert list(temp.iterdir()) == []
