"""`firstlight replay LOGFILE`: the post-mortem command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.sim.server import REAL_LOG
from tests.support.common import SHARED, run_firstlight

LOGS = SHARED / "logs"


def test_ready_log_exits_0_with_phases_and_timestamps():
    r = run_firstlight("replay", str(REAL_LOG), "--json")
    assert r.rc == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["engine"] == "sglang" and report["outcome"] == "ready" and report["failure"] == "none"
    assert any(p["timestamp"] for p in report["phases"])
    human = run_firstlight("replay", str(REAL_LOG))
    assert human.rc == 0 and "ready" in human.stdout


@pytest.mark.usefixtures("shared_logs")
def test_failed_log_exits_1_with_category_line_and_hint():
    r = run_firstlight("replay", str(LOGS / "sglang-cuda-graph-no-kernel-image.log"), "--json")
    assert r.rc == 1
    report = json.loads(r.stdout)
    assert report["failure"] == "kernel_image" and report["hint"]
    assert any(e["what"] == "failure" and e["line"] > 0 for e in report["evidence"])


def test_incomplete_log_exits_3(tmp_path: Path):
    log = tmp_path / "partial.log"
    log.write_bytes(b"[2025-01-01 00:00:00] Load weight begin. avail mem=78.50 GB\n\xff\xfe garbage \x1b[31mred\r\n")
    r = run_firstlight("replay", str(log), "--engine", "sglang", "--json")
    assert r.rc == 3, r.stderr
    assert json.loads(r.stdout)["outcome"] == "incomplete"


def test_log_on_standard_input():
    import subprocess

    from tests.support.common import firstlight_cmd

    p = subprocess.run(firstlight_cmd("replay", "-", "--json"), input=REAL_LOG.read_bytes(), capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["outcome"] == "ready"


def test_bad_input_is_a_one_line_usage_error(tmp_path: Path):
    r = run_firstlight("replay", str(tmp_path / "absent.log"))
    assert r.rc == 64 and "Traceback" not in r.stderr and "not a readable log file" in r.stderr
    r = run_firstlight("replay", str(REAL_LOG), "--engine", "nonsense")
    assert r.rc == 64 and "Traceback" not in r.stderr
