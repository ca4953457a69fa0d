"""Helpers shared by tests/e2e/deploy/test_systemd_units.py, tests/unit/deploy/test_systemd_units.py."""

from __future__ import annotations

import shlex

from tests.support.common import REPO as _REPO

DEPLOY = _REPO / "deploy" / "systemd"


UNITS = sorted(DEPLOY.glob("*.service"))


def _exec_start(text: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line.partition("=")[2])
