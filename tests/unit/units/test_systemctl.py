"""The systemctl interface: ``systemctl show`` outputs of units in each state a watch meets (fixtures written
from systemd 252's documented format: tests/fixtures/systemctl/README.md), the verbs and their timeouts.

The in-process tests of this subject; the others: ``tests/e2e/units/test_systemctl.py``.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_units.py``.
"""

from __future__ import annotations

import pytest

from firstlight.units.journal.journalctl import journalctl_argv
from firstlight.units.systemctl import (
    UnitState,
    parse_exec_start,
    parse_timespan,
)
from tests.support.common import FIXTURES as _FIXTURES

FIXTURES = _FIXTURES / "systemctl"


def state(name: str) -> UnitState:
    return UnitState.parse((FIXTURES / name).read_text())


def test_running_unit():
    s = state("sglang-running.txt")
    assert (s.id, s.load_state, s.active_state, s.sub_state, s.result) == (
        "sglang.service", "loaded", "active", "running", "success")
    assert s.main_pid == 81234 and s.n_restarts == 0
    assert s.control_group == "/system.slice/sglang.service"
    assert s.invocation_id == "5d8a2f4c3b1e4a6f9c0d7e8b2a1f3c4d"
    assert s.exec_start == ["/opt/sglang/bin/python", "-m", "sglang.launch_server", "--model-path",
                            "/models/Kimi-K2", "--tp", "8", "--host", "0.0.0.0", "--port", "30001"]
    assert s.timeout_start_s == 90.0 and s.restart == "on-failure" and s.restart_s == 10.0
    assert s.exists and s.starting_or_up and not s.restarting
    assert s.main_started_mono == pytest.approx(1204518.833412)
    assert s.activating_mono == pytest.approx(1204518.801187)
    # CLOCK_MONOTONIC to wall time: the offset is this machine's, the difference is the unit's own
    assert s.wall_time(s.main_started_mono) - s.started_at == pytest.approx(0.032225, abs=1e-3)


def test_notify_wrapper_mid_start():
    s = state("firstlight-notify-activating.txt")
    assert s.type == "notify" and s.active_state == "activating" and s.sub_state == "start"
    assert s.timeout_start_s == 300.0
    assert s.status_text.startswith("[412.3s] weights_loading")
    assert s.exec_start[:3] == ["/usr/local/bin/firstlight", "up", "--stall-timeout"]


def test_restart_scheduled_after_a_failure():
    s = state("sglang-auto-restart.txt")
    assert s.restarting and s.starting_or_up
    assert s.main_pid is None and s.exec_main_pid == 82950
    assert s.result == "exit-code" and s.exit_code == 1 and s.n_restarts == 2
    assert s.control_group == ""
    assert "result exit-code" in s.describe() and "2 restarts" in s.describe()


def test_failed_for_good():
    s = state("llama-failed.txt")
    assert (s.active_state, s.sub_state, s.result, s.exit_code) == ("failed", "failed", "exit-code", 1)
    assert not s.restarting and not s.starting_or_up
    assert s.restart_s == pytest.approx(0.1)


def test_killed_by_a_signal_and_no_start_timeout():
    s = state("vllm-killed.txt")
    assert s.result == "signal" and s.exec_main_code == "killed" and s.exit_code == -9
    assert s.timeout_start_s is None  # infinity
    assert s.exec_start[-4:] == ["--host", "::", "--port", "8001"]


def test_missing_unit():
    s = state("missing.txt")
    assert not s.exists and s.invocation_id == "" and s.exec_start == [] and s.main_pid is None


@pytest.mark.parametrize("text, seconds", [
    ("1min 30s", 90.0), ("5min", 300.0), ("90s", 90.0), ("100ms", 0.1), ("1h 2min 3.5s", 3723.5),
    ("2d", 172800.0), ("infinity", None), ("90000000", 90.0), ("250us", 0.00025)])
def test_time_spans(text: str, seconds: float | None):
    value = parse_timespan(text, 1e-6 if text.isdigit() else 1.0)
    assert value == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize("bad", ["soon", "5 parsecs", "1min and 3s"])
def test_bad_time_spans_raise(bad: str):
    with pytest.raises(ValueError):
        parse_timespan(bad)


def test_exec_start_forms():
    assert parse_exec_start("") == []
    assert parse_exec_start("{ path=/bin/x ; argv[]=/bin/x -a b ; flags= ; start_time=[n/a] ; stop_time=[n/a] ; "
                            "pid=0 ; code=(null) ; status=0/0 }") == ["/bin/x", "-a", "b"]
    assert parse_exec_start("{ path=/bin/y ; argv[]=n/a ; ignore_errors=no }") == ["/bin/y"]


def test_journalctl_gets_the_unit_as_one_word():
    argv = journalctl_argv("-Hevil.service")
    assert "--unit=-Hevil.service" in argv and "-Hevil.service" not in argv
