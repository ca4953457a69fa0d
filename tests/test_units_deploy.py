"""The example units in deploy/systemd/ pass ``systemd-analyze verify`` and name firstlight options that exist.

verify also checks that each ExecStart executable exists; the engines are not installed here, so each copy
points its executable at a stub and everything else is verified as written. systemd-analyze comes with the
systemd package, which scripts/test.sh installs (with systemd-journal-remote) when missing: in CI it must run.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import click
import pytest

from firstlight.cli import cli
from tests.support.common import REPO as _REPO

DEPLOY = _REPO / "deploy" / "systemd"
UNITS = sorted(DEPLOY.glob("*.service"))


def _analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        why = "systemd-analyze is not installed (package systemd)"
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail(f"in CI it must be there: {why}")
        pytest.skip(why)
    return found


def _exec_start(text: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line.partition("=")[2])


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


def test_both_kinds_for_both_engines():
    names = {u.name for u in UNITS}
    assert {"sglang-firstlight.service", "vllm-firstlight.service", "sglang.service", "vllm.service"} <= names


@pytest.mark.parametrize("unit", [u for u in UNITS if "firstlight" in u.name],
                         ids=[u.name for u in UNITS if "firstlight" in u.name])
def test_notify_wrappers_run_firstlight_up_with_valid_options(unit: Path):
    text = unit.read_text()
    assert "Type=notify" in text and "NotifyAccess=main" in text
    argv = _exec_start(text)
    assert Path(argv[0]).name == "firstlight" and argv[1] == "up"
    up = cli.commands["up"]
    ctx = up.make_context("up", argv[2:])  # raises on an unknown option or a bad value
    assert ctx.params["command"][0].endswith(("python", "vllm"))
    with pytest.raises(click.UsageError):
        up.make_context("up", ["--no-such-option", *argv[2:]])
