"""How a server's death is named (firstlight/deaths.py): each signal a process gets from its own fault is a
native crash, before READY (the judge) and while serving (the result after READY); SIGKILL and SIGTERM are
not."""

from __future__ import annotations

import signal

import pytest

from firstlight.deaths import (
    CRASH_HINT,
    CRASH_HINTS,
    CRASH_SIGNALS,
    crash_hint,
    describe_exit,
    exit_signal,
    wait_status_code,
)
from firstlight.result import RunResult
from tests.support.judge import proc, run

# README, "A crash, a kill, the OOM killer": SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT are crashes.
README_CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT")


@pytest.mark.parametrize("name", README_CRASH_SIGNALS)
def test_a_crash_signal_before_ready_is_failed_crashed_with_its_hint(name: str):
    num = signal.Signals[name].value
    a = run([proc(1.0), proc(2.0, alive=False, exit_code=-num)], 3.0)
    assert (a.verdict, a.failure, a.hint) == ("failed", "crashed", crash_hint(name)), a
    assert any(f"died of {name} (signal {num})" in e.value for e in a.evidence)


def test_sigbus_is_a_crash_with_the_mapped_file_hint():
    assert "SIGBUS" in CRASH_SIGNALS
    a = run([proc(1.0), proc(2.0, alive=False, exit_code=-signal.SIGBUS)], 3.0)
    assert (a.verdict, a.failure) == ("failed", "crashed")
    assert a.hint == CRASH_HINTS["SIGBUS"] and "a file mapped into memory that was truncated" in a.hint


@pytest.mark.parametrize("name", README_CRASH_SIGNALS)
def test_a_crash_signal_while_serving_is_failed_crashed(name: str):
    ready = RunResult("ready", "ready", 0.0, 10.0, "generic", "http://127.0.0.1:1", ready_at=10.0)
    r = ready.died_serving(-signal.Signals[name].value, 70.0)
    assert (r.verdict, r.phase, r.failure, r.hint) == ("failed", "serving", "crashed", crash_hint(name))
    assert r.evidence[0]["value"] == f"server {describe_exit(-signal.Signals[name].value)} after serving for 60s"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_signal_from_outside_is_not_a_crash(sig: signal.Signals):
    assert sig.name not in CRASH_SIGNALS
    ready = RunResult("ready", "ready", 0.0, 10.0, "generic", "http://127.0.0.1:1", ready_at=10.0)
    assert ready.died_serving(-sig.value, 70.0).failure != "crashed"


def test_exit_code_zero_is_an_exit_not_a_signal():
    # Popen's -N is a signal; 0 (a clean exit) and a positive code are exits, never "died of signal 0"
    assert exit_signal(0) is None and exit_signal(1) is None and exit_signal(None) is None
    assert exit_signal(-11) == "SIGSEGV"
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(1) == "exited with code 1"


def test_a_crash_signal_without_a_hint_of_its_own_gets_the_native_crash_hint():
    assert "SIGSEGV" not in CRASH_HINTS
    assert crash_hint("SIGSEGV") == CRASH_HINT


@pytest.mark.parametrize(("status", "code"), [
    (0, 0),                      # exited 0
    (1 << 8, 1),                 # exited 1
    (255 << 8, 255),             # exited 255 (the high byte only)
    (signal.SIGKILL, -9),        # killed by SIGKILL
    (signal.SIGSEGV | 0x80, -11),  # SIGSEGV with a core dumped: the core flag is not the signal
    ((signal.SIGSTOP << 8) | 0x7F, None),  # stopped: neither an exit nor a death
])
def test_a_raw_wait_status_is_a_popen_style_code(status: int, code: int | None):
    assert wait_status_code(status) == code
