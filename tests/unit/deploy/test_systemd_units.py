"""The example units in deploy/systemd/ pass ``systemd-analyze verify`` and name firstlight options that exist.

verify also checks that each ExecStart executable exists; the engines are not installed here, so each copy
points its executable at a stub and everything else is verified as written. systemd-analyze comes with the
systemd package, which scripts/test.sh installs (with systemd-journal-remote) when missing: in CI it must run.

The in-process tests of this subject; the others: ``tests/e2e/deploy/test_systemd_units.py``.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from firstlight.cli import cli
from tests.support.units_deploy import UNITS, _exec_start


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
