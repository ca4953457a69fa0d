"""Helpers shared by tests/e2e/samplers/test_process.py, tests/e2e/samplers/test_process_edges.py."""

from __future__ import annotations

import subprocess
import sys

from firstlight.timeline import ProcessSample

PY = sys.executable


def popen(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def end(p: subprocess.Popen[str]) -> None:
    p.kill()
    p.wait()


def samples(out: list[object]) -> list[ProcessSample]:
    return [o for o in out if isinstance(o, ProcessSample)]
