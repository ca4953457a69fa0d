"""The backstop (firstlight/runner/watchdog.py) when firstlight itself is SIGKILLed: the launcher's real
watchdog process, a real server group, real signals. A worker that ignores SIGTERM gets SIGKILL after the
grace period; a worker that left the group with setsid (and that firstlight told the watchdog about) is
stopped too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.common import REPO, pids_in_group, wait_for

# The server: its root, a worker in its group that ignores SIGTERM, and (with "escape") a worker that left the
# group with setsid. Each worker writes its pid to PIDFILE.NAME.
SERVER = """
import os, signal, sys, time
pidfile = sys.argv[1]
def worker(name, escape):
    if os.fork() == 0:
        if escape:
            os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(f"{pidfile}.{name}.tmp", "w").write(str(os.getpid()))
        os.rename(f"{pidfile}.{name}.tmp", f"{pidfile}.{name}")
        while True:
            time.sleep(1)
worker("stubborn", False)
if "escape" in sys.argv:
    worker("escaped", True)
while True:
    time.sleep(1)
"""

# firstlight's part: the real launcher with its backstop; told about the escaped worker as the run loop does.
PARENT = """
import os, sys, time
from firstlight.runner.launcher import ServerProcess
server, pidfile, *extra = sys.argv[1:]
sp = ServerProcess([sys.executable, server, pidfile, *extra])
sp.start()
if extra:
    escaped = pidfile + ".escaped"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (os.path.exists(escaped) and sp.note_left_group()):
        time.sleep(0.05)
print(sp.pid, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture
def killed(tmp_path: Path) -> Iterator[list[int]]:
    """Pids to SIGKILL at the end, whatever happened (the test's own clean-up, never by name)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _firstlight_with_server(tmp_path: Path, killed: list[int], *extra: str) -> tuple[subprocess.Popen[str], int]:
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    fl = subprocess.Popen([sys.executable, "-c", PARENT, str(server), str(tmp_path / "pid"), *extra],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    killed.append(fl.pid)
    assert fl.stdout is not None
    root = int(fl.stdout.readline())
    killed.append(root)
    return fl, root


def _worker(tmp_path: Path, name: str, killed: list[int]) -> int:
    f = tmp_path / f"pid.{name}"
    wait_for(f.exists, 60, f"the {name} worker")
    pid = int(f.read_text())
    killed.append(pid)
    return pid


def test_when_firstlight_is_sigkilled_the_backstop_sigkills_a_worker_that_ignores_sigterm(
        tmp_path: Path, killed: list[int]):
    fl, root = _firstlight_with_server(tmp_path, killed)
    stubborn = _worker(tmp_path, "stubborn", killed)
    assert _alive(stubborn) and os.getpgid(stubborn) == root
    fl.kill()
    fl.wait(timeout=30)
    # SIGTERM first (ignored), then SIGKILL after the launcher's 10 s grace period
    wait_for(lambda: not _alive(stubborn), 90, "the backstop's SIGKILL to the worker that ignores SIGTERM")
    wait_for(lambda: not pids_in_group(root), 30, "the whole server group gone")


def test_a_worker_that_left_the_group_with_setsid_does_not_outlive_firstlights_sigkill(
        tmp_path: Path, killed: list[int]):
    fl, root = _firstlight_with_server(tmp_path, killed, "escape")
    escaped = _worker(tmp_path, "escaped", killed)
    assert _alive(escaped) and os.getpgid(escaped) != root  # outside the group: killpg cannot reach it
    fl.kill()
    fl.wait(timeout=30)
    wait_for(lambda: not _alive(escaped), 90, "the backstop to stop the worker that left the group")
    wait_for(lambda: not pids_in_group(root), 30, "the whole server group gone")
