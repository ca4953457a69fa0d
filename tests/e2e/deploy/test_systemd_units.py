"""The example units in deploy/systemd/ pass ``systemd-analyze verify`` and name firstlight options that exist.

verify also checks that each ExecStart executable exists; the engines are not installed here, so each copy
points its executable at a stub and everything else is verified as written. systemd-analyze comes with the
systemd package, which scripts/test.sh installs (with systemd-journal-remote) when missing: in CI it must run.

The process-starting tests of this subject; the others: ``tests/unit/deploy/test_systemd_units.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.units_deploy import DEPLOY, UNITS, _exec_start


def _analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        why = "systemd-analyze is not installed (package systemd)"
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail(f"in CI it must be there: {why}")
        pytest.skip(why)
    return found


def _verify(unit_text: str, name: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "bin" / "stub"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    exe = _exec_start(unit_text)[0]
    copy = tmp_path / name
    copy.write_text(unit_text.replace(f"ExecStart={exe} ", f"ExecStart={stub} "))
    return subprocess.run([_analyze(), "verify", "--man=no", str(copy)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_example_unit_verifies_cleanly(unit: Path, tmp_path: Path):
    p = _verify(unit.read_text(), unit.name, tmp_path)
    assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p.stdout + p.stderr


def test_verify_catches_a_mistake(tmp_path: Path):
    """The check can fail: a misspelt key is only a warning for systemd (it ignores the line), an error here."""
    text = (DEPLOY / "sglang.service").read_text().replace("[Service]\n", "[Service]\nTimeoutStartSecs=600\n", 1)
    p = _verify(text, "sglang.service", tmp_path)
    assert "Unknown key 'TimeoutStartSecs' in section [Service]" in p.stdout + p.stderr
