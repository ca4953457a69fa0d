"""Helpers shared by the tests: running the real CLI in a subprocess, the processes a test started, and waiting
on conditions with deadlines (never sleeping to let things settle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
FIXTURES = REPO / "tests" / "fixtures"


def wait_for(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Poll ``cond`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]

    @property
    def summary(self) -> dict[str, Any]:
        events = self.events
        assert events, f"no JSON output; stderr:\n{self.stderr[-3000:]}"
        assert events[-1]["event"] == "summary", events[-1]
        return events[-1]


def firstlight_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "firstlight", *args]


def sim_cmd(scenario: str = "normal", port: int | None = None, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "firstlight.sim", "--scenario", scenario]
    if port is not None:
        cmd += ["--port", str(port)]
    return [*cmd, *extra]


def run_firstlight(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
                   preexec_fn: Callable[[], None] | None = None) -> Run:
    p = subprocess.run(firstlight_cmd(*args), capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
    return Run(p.returncode, p.stdout, p.stderr)


def children(pid: int) -> list[psutil.Process]:
    """The children of ``pid``; none once it is gone (a condition polled by wait_for must not raise)."""
    try:
        return psutil.Process(pid).children()
    except psutil.Error:
        return []


def pids_in_group(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                out.append(p.pid)
        except (OSError, psutil.Error):
            continue
    return out


IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1")


def require(present: bool, what: str) -> None:
    """A real part the test needs (a binary, ../shared/logs, a package). Under CI (``CI`` is true or 1) its
    absence fails the run; elsewhere the test is skipped with the reason."""
    if present:
        return
    if IN_CI:
        pytest.fail(f"CI: {what} is missing (the setup must provide it)", pytrace=False)
    pytest.skip(f"{what} is missing")


# The CLI's own peak memory, read from /proc/self/status (VmHWM) as it exits. Not rusage: a child's ru_maxrss keeps
# the high-water mark of the process it was forked or vforked from (Linux carries it across exec), and a pytest
# worker late in a run is hundreds of MB (a 300 MB bound read 474 MiB).
_PEAK = """import atexit, sys
PEAK = sys.argv.pop(1)
def _peak():
    with open("/proc/self/status") as f, open(PEAK, "w") as out:
        out.write(next(line.split()[1] for line in f if line.startswith("VmHWM:")))
atexit.register(_peak)
sys.argv[0] = "firstlight"
from firstlight.cli import main
main()
"""


def firstlight_peak_cmd(peak: Path, *args: str) -> list[str]:
    """``firstlight ARGS`` that writes its own peak RSS (KiB) to ``peak`` as it exits."""
    return [sys.executable, "-c", _PEAK, str(peak), *args]
