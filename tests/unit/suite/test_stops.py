"""A stop a test's thread sends reaches that test's run only (tests/support/common.py: ``signal_self``, ``drive``):
once its test has ended, a late thread's stop is dropped, never taken by the next test's run."""

from __future__ import annotations

import signal
import threading
from typing import Any

from tests.support.common import current_epoch, drive, end_epoch, signal_self, wait_for


def test_a_signal_asked_in_a_test_that_has_ended_is_not_sent() -> None:
    got: list[int] = []
    before = signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
    try:
        asked_in = current_epoch()
        end_epoch()  # that test is over; a new one runs
        assert not signal_self(signal.SIGUSR1, epoch=asked_in)
        assert got == []
        assert signal_self(signal.SIGUSR1, epoch=current_epoch())  # this test's own: delivered before kill returns
        assert got == [signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_a_drivers_stop_after_its_test_has_ended_is_skipped() -> None:
    go, stopped = threading.Event(), threading.Event()
    drivers_before = {t for t in threading.enumerate() if t.name == "test-driver"}
    errors = drive(lambda: go.wait(30), stopped.set)
    driver = next(t for t in threading.enumerate() if t.name == "test-driver" and t not in drivers_before)
    end_epoch()  # the run ended first, and its test with it
    go.set()
    driver.join(30)
    assert not driver.is_alive() and not errors
    assert not stopped.is_set()


def test_a_drivers_stop_within_its_test_is_sent() -> None:
    stopped = threading.Event()
    errors: Any = drive(lambda: None, stopped.set)
    wait_for(stopped.is_set, 30, "the driver's stop")
    assert not errors
