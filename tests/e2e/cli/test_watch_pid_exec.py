"""The command line `watch --pid` reads (settings.watched_command), on real processes: a pid given before its
exec (``server & firstlight watch --pid $!``) is read once the process shows its own command line, not its
parent's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from firstlight import settings

# A parent that forks a child which waits before its exec: the child's pid is printed at once, and for that time
# the child shows the parent's command line. The child then becomes `sleep 30`.
FORK_THEN_EXEC = """
import os, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(float(sys.argv[1]))
    os.execvp("sleep", ["sleep", "30"])
print(pid, flush=True)
os.waitpid(pid, 0)
"""


@pytest.fixture
def forked() -> Iterator[Callable[[float], int]]:
    procs: list[subprocess.Popen[str]] = []

    def start(delay_s: float) -> int:
        p = subprocess.Popen([sys.executable, "-c", FORK_THEN_EXEC, str(delay_s)], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
        procs.append(p)
        assert p.stdout is not None
        return int(p.stdout.readline())

    yield start
    for p in procs:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)


def test_a_pid_taken_before_its_exec_is_read_as_the_command_it_execs(forked: Callable[[float], int]) -> None:
    child = forked(0.5)
    assert settings.watched_command(child) == ["sleep", "30"]


def test_a_process_that_never_execs_is_read_as_it_is_after_the_settle_time(forked: Callable[[float], int]) -> None:
    child = forked(60.0)
    t0 = time.monotonic()
    argv = settings.watched_command(child, settle_s=0.3)
    assert argv[:2] == [sys.executable, "-c"] and 0.3 <= time.monotonic() - t0 < 5.0


def test_a_gone_pid_has_no_command():
    p = subprocess.Popen(["true"])
    p.wait(10)
    assert settings.watched_command(p.pid, settle_s=0.1) == []
