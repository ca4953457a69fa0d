"""The fast lane's promise: a test under tests/unit/ starts no process. While one runs (its fixtures included),
every way Python starts a process (subprocess, multiprocessing, os.fork, posix_spawn) fails the test, whoever
calls it: the test, a fixture, or firstlight's own code under test. A test that needs a process belongs in the
mirror folder under tests/e2e/."""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

UNIT = Path(__file__).resolve().parent
# (owner, attribute): subprocess binds fork_exec at its import; multiprocessing calls _posixsubprocess's own
_STARTERS: list[tuple[Any, str]] = [(subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec")]
_STARTERS += [(os, name) for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp") if hasattr(os, name)]


class ProcessStarted(AssertionError):
    """A unit test started a process."""


def _refuse(what: str, started: list[str]) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        started.append(what)
        raise ProcessStarted(f"a test under tests/unit/ started a process ({what}): move it to tests/e2e/")
    return refuse


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each unit test runs with the starters refused. Code under test may catch the refusal (an ``OSError``
    handler would not, a broad ``except Exception`` would), so a refusal is also reported after the test. (pytest
    calls this hook for every test of the session, wherever its conftest is: the e2e tests are let through.)"""
    if not Path(item.path).resolve().is_relative_to(UNIT):
        yield
        return
    started: list[str] = []
    saved = [(owner, name, getattr(owner, name)) for owner, name in _STARTERS]
    for owner, name, _ in saved:
        setattr(owner, name, _refuse(f"{owner.__name__}.{name}", started))
    item.stash[_STARTED] = started
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


_STARTED = pytest.StashKey[list[str]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    started = item.stash.get(_STARTED, [])
    if started and report.when == "call" and report.passed:  # the refusal was swallowed by the code under test
        report.outcome = "failed"
        report.longrepr = f"a test under tests/unit/ started a process ({', '.join(started)}): move it to tests/e2e/"
