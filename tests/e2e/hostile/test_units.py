"""Unit names that would be options (issue 20): ``--unit=-Hevil`` never reaches systemctl or journalctl as
``-H evil`` (systemctl's ssh to a host), and every name is passed after ``--`` (or as ``--unit=NAME``).

The process-starting tests of this subject; the others: ``tests/unit/units/test_systemctl.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from firstlight.units.systemctl import SYSTEMCTL_ENV, Systemctl
from tests.support.common import run_firstlight


def _stub(directory: Path, name: str) -> Path:
    """A ``name`` on PATH that records its argv (one JSON list a line) and says the unit is active."""
    log = directory / f"{name}.argv"
    script = directory / name
    script.write_text(f"""#!{sys.executable}
import json, sys
with open({str(log)!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if "show" in sys.argv:
    print("Id=x.service\\nLoadState=loaded\\nActiveState=active\\nSubState=running")
""")
    script.chmod(0o755)
    return log


@pytest.mark.parametrize("unit", ["-Hevil", "--host=evil", "-Mevil", "--user", "-H", "--", "-"])
@pytest.mark.parametrize("command", ["up", "watch"])
def test_a_unit_name_starting_with_a_dash_is_a_usage_error_and_runs_nothing(tmp_path: Path, unit: str,
                                                                            command: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    logs = [_stub(bin_dir, "systemctl"), _stub(bin_dir, "journalctl")]
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    os.environ.pop(SYSTEMCTL_ENV, None)
    r = run_firstlight(command, f"--unit={unit}", "--url", "http://127.0.0.1:9", "--timeout", "5", env=env,
                       timeout=60)
    assert r.rc == 64 and "never starts with '-'" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert not any(log.exists() for log in logs), [log.read_text() for log in logs if log.exists()]


def test_systemctl_gets_every_unit_name_after_a_double_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    log = _stub(tmp_path, "systemctl")
    monkeypatch.delenv(SYSTEMCTL_ENV, raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    ctl = Systemctl()
    ctl.show("-Hevil.service")
    ctl.restart("-Hevil.service")
    ctl.start("-Hevil.service")
    ctl.stop("-Hevil.service", timeout=5)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls and all(c[c.index("--") + 1] == "-Hevil.service" for c in calls), calls
    assert all("-Hevil.service" not in c[:c.index("--")] for c in calls), calls


@pytest.mark.parametrize("command", ["watch", "replay"])
def test_a_fifo_as_the_journal_file_is_refused_not_waited_on(tmp_path: Path, command: str):
    fifo = tmp_path / "u.journal"
    os.mkfifo(fifo)
    extra = ["--url", "http://127.0.0.1:9"] if command == "watch" else []
    r = run_firstlight(command, "--unit", "llm", "--journal-file", str(fifo), *extra, timeout=60)
    assert r.rc == 64 and "Traceback" not in r.stderr, r.stderr
    assert "is a FIFO, not a regular file" in r.stderr or "not a readable file" in r.stderr, r.stderr
