"""The launcher's subreaper flag (``firstlight.runner.launcher``), in process: prctl found in libc (and not off
Linux), and the flag held while any server of this process runs, then put back as it was. Read through a
recording prctl: setting the real flag on the test process would make it every orphan's reaper. The launched
servers themselves: ``tests/e2e/test_api_subreaper.py``, ``tests/e2e/test_zombie.py``."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from firstlight.runner import launcher


def test_prctl_is_libcs_on_linux_and_none_elsewhere(monkeypatch: pytest.MonkeyPatch):
    fn = launcher._prctl()
    assert fn is not None and fn.__name__ == "prctl"
    flag = ctypes.c_int(-1)
    assert fn(launcher._PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value in (0, 1)
    monkeypatch.setattr(launcher.ctypes.util, "find_library", lambda name: None)
    assert launcher._prctl() is not None  # libc.so.6 by name
    monkeypatch.setattr(launcher.sys, "platform", "darwin")
    assert launcher._prctl() is None


def test_no_libc_no_prctl(monkeypatch: pytest.MonkeyPatch):
    def no_libc(*a: Any, **kw: Any) -> Any:
        raise OSError("libc.so.6: cannot open shared object file")

    monkeypatch.setattr(launcher.ctypes, "CDLL", no_libc)
    assert launcher._prctl() is None


class Prctl:
    """prctl as the kernel answers it for one process: the subreaper flag, and each call made."""

    def __init__(self, flag: int, fail_set: bool = False) -> None:
        self.flag, self.fail_set, self.calls = flag, fail_set, []  # type: ignore[var-annotated]

    def __call__(self, option: int, arg: Any, *rest: int) -> int:
        self.calls.append((option, arg if isinstance(arg, int) else "ptr"))
        if option == launcher._PR_GET_CHILD_SUBREAPER:
            ctypes.cast(arg, ctypes.POINTER(ctypes.c_int)).contents.value = self.flag
            return 0
        if self.fail_set:
            return -1
        self.flag = arg
        return 0


def test_the_flag_is_held_while_any_server_runs_and_put_back_after(monkeypatch: pytest.MonkeyPatch):
    prctl = Prctl(0)
    monkeypatch.setattr(launcher, "_PRCTL", prctl)
    held = launcher._Subreaper()
    assert launcher.is_subreaper() is False
    assert held.hold() and held.hold() and prctl.flag == 1
    held.drop()
    assert prctl.flag == 1  # one server still runs
    held.drop()
    assert prctl.flag == 0  # put back: it was off
    assert prctl.calls.count((launcher._PR_SET_CHILD_SUBREAPER, 1)) == 1  # set once for both


def test_a_flag_that_was_on_is_left_on(monkeypatch: pytest.MonkeyPatch):
    prctl = Prctl(1)
    monkeypatch.setattr(launcher, "_PRCTL", prctl)
    held = launcher._Subreaper()
    assert held.hold()
    held.drop()
    assert prctl.flag == 1 and (launcher._PR_SET_CHILD_SUBREAPER, 0) not in prctl.calls


def test_a_flag_that_cannot_be_set_is_not_held(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(launcher, "_PRCTL", Prctl(0, fail_set=True))
    held = launcher._Subreaper()
    assert held.hold() is False and held._holders == 0
    monkeypatch.setattr(launcher, "_PRCTL", None)
    assert launcher.is_subreaper() is None and launcher.become_subreaper() is False
    assert launcher._Subreaper().hold() is False
