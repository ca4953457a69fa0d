"""Bad numbers and an unknown port are usage errors (issue 15, item 12 and low items): exit 64, one line, no
traceback, and nothing launched."""

from __future__ import annotations

import pytest

from tests.support.common import run_firstlight

BAD = [
    ("--timeout", "nan"), ("--timeout", "-1"), ("--timeout", "inf"), ("--timeout", "0"),
    ("--stall-timeout", "-1"), ("--stall-timeout", "nan"), ("--spin-timeout", "0"),
    ("--sample-interval", "0"), ("--sample-interval", "nan"),
    ("--poll-min", "0"), ("--poll-min", "-0.5"), ("--poll-max", "nan"), ("--poll-max", "1e400"),
    ("--grace", "-1"), ("--grace", "nan"),
]


@pytest.mark.parametrize(("option", "value"), BAD)
def test_a_bad_number_is_a_usage_error_before_anything_starts(option: str, value: str, tmp_path):
    marker = tmp_path / "launched"
    r = run_firstlight("up", "--url", "http://127.0.0.1:9", option, value, "--", "touch", str(marker))
    assert r.rc == 64, r.stderr
    assert "Traceback" not in r.stderr and option in r.stderr
    assert len([line for line in r.stderr.splitlines() if line.strip() and not line.startswith(("Usage:", "Try"))]) == 1
    assert not marker.exists()


def test_poll_min_above_poll_max_is_a_usage_error():
    r = run_firstlight("up", "--url", "http://127.0.0.1:9", "--poll-min", "5", "--poll-max", "1", "--", "true")
    assert r.rc == 64 and "--poll-min" in r.stderr


@pytest.mark.parametrize("value", ["nan", "-3", "0"])
def test_probe_timeout_must_be_a_positive_number(value: str):
    r = run_firstlight("probe", "http://127.0.0.1:9", "--timeout", value)
    assert r.rc == 64 and "Traceback" not in r.stderr


def test_no_port_known_is_a_usage_error_not_port_80(tmp_path):
    script = tmp_path / "start.sh"
    script.write_text("#!/bin/sh\nexec sleep 60\n")
    script.chmod(0o755)
    r = run_firstlight("up", "--", str(script))
    assert r.rc == 64, r.stderr
    assert "cannot tell the server's port" in r.stderr and "--url" in r.stderr


def test_port_0_in_a_url_is_rejected():
    r = run_firstlight("probe", "http://127.0.0.1:0")
    assert r.rc == 64 and "port" in r.stderr
