"""No orphan on any exit: whatever ends firstlight, the server it launched is stopped (issue 15, item 1 and 11).

Real processes and real signals: firstlight is SIGKILLed, hung up, its stderr closed, its --record disk full;
the server double-forks out of its process group or daemonizes and lets its launcher exit 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import psutil
import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, pids_in_group, run_firstlight, sim_cmd, wait_for

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2", "--no-history"]

# A server that never serves: a root and one worker in its process group, printing a line now and then.
NEVER_SERVES = [sys.executable, "-c", "import os, time\nos.fork()\nwhile True:\n    print('loading', flush=True)\n"
                "    time.sleep(0.05)"]

DOUBLE_FORK = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        while True:
            time.sleep(1)
    os._exit(0)
while True:
    print("loading", flush=True)
    time.sleep(0.5)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _started_pid(stream: IO[str]) -> int:
    """Read firstlight's JSON events until the 'started' one, and return the server's pid."""
    for line in stream:
        if line.startswith("{"):
            ev: dict[str, Any] = json.loads(line)
            if ev.get("event") == "started":
                return int(ev["pid"])
    raise AssertionError("firstlight ended without a 'started' event")


def _launch(*args: str, stderr: int | IO[Any] = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen(firstlight_cmd("up", "--json", *FAST, *args), stdout=subprocess.PIPE, stderr=stderr,
                            text=True, stdin=subprocess.DEVNULL)


def test_sigkill_of_firstlight_still_stops_the_whole_server_group(reap: list[int]):
    fl = _launch("--url", f"http://127.0.0.1:{free_port()}", "--", *NEVER_SERVES)
    try:
        assert fl.stdout is not None
        pid = _started_pid(fl.stdout)
        reap.append(pid)
        wait_for(lambda: len(pids_in_group(pid)) >= 2, 20, "the server and its worker")
        fl.kill()
        fl.wait(timeout=10)
        wait_for(lambda: not pids_in_group(pid), 30, "the server group to be stopped after firstlight's SIGKILL")
    finally:
        if fl.poll() is None:
            fl.kill()


def test_sigkill_of_firstlights_whole_process_group_still_stops_the_server_group(reap: list[int]):
    """A cancelled CI job kills the job's process group: firstlight and whatever shares its group. The watchdog
    leads a group of its own, so it outlives that and stops the server and its worker (the parent-death signal
    alone reaches only the server's root process)."""
    fl = subprocess.Popen(firstlight_cmd("up", "--json", *FAST, "--url", f"http://127.0.0.1:{free_port()}", "--",
                                         *NEVER_SERVES), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        assert fl.stdout is not None
        pid = _started_pid(fl.stdout)
        reap.append(pid)
        wait_for(lambda: len(pids_in_group(pid)) >= 2, 20, "the server and its worker")
        watchdogs = [c for c in psutil.Process(fl.pid).children() if "firstlight.runner.watchdog" in c.cmdline()]
        assert len(watchdogs) == 1 and os.getpgid(watchdogs[0].pid) != fl.pid
        os.killpg(fl.pid, signal.SIGKILL)
        fl.wait(timeout=10)
        wait_for(lambda: not pids_in_group(pid), 30, "the server group to be stopped after its group's SIGKILL")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(fl.pid, signal.SIGKILL)
        fl.wait(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT])
def test_sighup_and_sigquit_stop_the_server_like_sigterm(sig: signal.Signals, reap: list[int]):
    fl = _launch("--url", f"http://127.0.0.1:{free_port()}", "--grace", "2", "--", *NEVER_SERVES)
    try:
        assert fl.stdout is not None
        pid = _started_pid(fl.stdout)
        reap.append(pid)
        wait_for(lambda: len(pids_in_group(pid)) >= 2, 20, "the server and its worker")
        fl.send_signal(sig)
        out, err = fl.communicate(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
    assert fl.returncode == 130, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["verdict"] == "interrupted" and sig.name in json.dumps(summary["evidence"])
    assert summary["server_stopped"].startswith("stopped")
    assert not pids_in_group(pid)


def test_closed_stderr_does_not_stop_the_run_nor_orphan_the_server(reap: list[int]):
    """`firstlight up ... 2>&1 | head -n 3`: the console loses its reader; the run goes on to its verdict."""
    r, w = os.pipe()
    fl = _launch("--url", f"http://127.0.0.1:{free_port()}", "--timeout", "4", "--grace", "2", "--",
                 *NEVER_SERVES, stderr=w)
    os.close(w)
    try:
        with os.fdopen(r, "rb") as err:  # read a little, then close: the next writes get EPIPE
            err.read(200)
        out, _ = fl.communicate(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    pid = next(e for e in events if e["event"] == "started")["pid"]  # (preflight's event comes first)
    reap.append(pid)
    assert events[-1]["event"] == "summary" and events[-1]["verdict"] == "timeout", events[-1]
    assert fl.returncode == 3
    assert not pids_in_group(pid)


def test_record_to_a_full_disk_is_a_warning_not_a_crash(weights: Path):
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--record", "/dev/full", *FAST, "--",
                       *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0.5"))
    assert r.rc == 0, r.stderr[-3000:]
    assert "--record" in r.stderr and "warning" in r.stderr.lower()
    assert r.summary["verdict"] == "ready" and r.summary["server_stopped"].startswith("stopped")
    assert not pids_in_group(r.summary["pid"])


def test_a_worker_that_double_forks_out_of_the_group_is_stopped_and_reported(tmp_path: Path, reap: list[int]):
    pidfile = tmp_path / "escaped.pid"
    script = tmp_path / "server.py"
    script.write_text(DOUBLE_FORK)
    r = run_firstlight("up", "--json", "--timeout", "4", "--grace", "2", "--url",
                       f"http://127.0.0.1:{free_port()}", *FAST, "--", sys.executable, str(script), str(pidfile))
    escaped = int(pidfile.read_text())
    try:
        assert r.rc == 3, r.stderr[-3000:]
        assert not _alive(escaped), "the double-forked worker survived firstlight"
        assert "left the" in r.stderr and str(escaped) in r.stderr
    finally:
        if _alive(escaped):
            os.kill(escaped, signal.SIGKILL)


def test_a_launcher_that_daemonizes_the_server_and_exits_0_is_not_a_failure(weights: Path):
    port = free_port()
    server = " ".join(sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0.5"))
    r = run_firstlight("up", "--json", "--stop-when-ready", "--url", f"http://127.0.0.1:{port}", *FAST, "--",
                       "sh", "-c", f"setsid {server} >/dev/null 2>&1 </dev/null & exit 0")
    assert r.rc == 0, r.stderr[-3000:]
    assert r.summary["verdict"] == "ready"
    assert any("daemonized" in n for n in r.summary["notes"]), r.summary["notes"]
    with socket.socket() as s:  # stopped with the rest: nothing answers on the port any more
        assert s.connect_ex(("127.0.0.1", port)) != 0


PDEATH = """
import os, signal, sys
from firstlight.runner.launcher import ServerProcess
sp = ServerProcess([sys.executable, "-c", "import time; time.sleep(600)"])
sp.start()
sp.watchdog.kill()  # leave only the parent-death signal
sp.watchdog.wait()
print(sp.pid, flush=True)
sys.stdin.read()
"""


def test_the_parent_death_signal_alone_kills_the_direct_child(reap: list[int]):
    parent = subprocess.Popen([sys.executable, "-c", PDEATH], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        reap.append(child)
        assert _alive(child)
        parent.kill()
        parent.wait(timeout=10)
        wait_for(lambda: not _alive(child), 20, "the kernel's SIGKILL to the orphaned child")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_stop_is_idempotent_and_reports_processes_that_left_the_group(tmp_path: Path):
    from firstlight.runner.launcher import ServerProcess

    pidfile = tmp_path / "escaped.pid"
    script = tmp_path / "server.py"
    script.write_text(DOUBLE_FORK)
    sp = ServerProcess([sys.executable, str(script), str(pidfile)], backstop=True)
    sp.start()
    try:
        wait_for(pidfile.exists, 20, "the double-forked worker")
        escaped = int(pidfile.read_text())
        wait_for(lambda: escaped in {p.pid for p in sp.descendants()}, 20, "the adopted worker in the tree")
        assert escaped in dict(sp.note_left_group())
        how = sp.stop(2)
        assert f"{escaped}" in how and sp.stop(2) == how  # a second stop (atexit, finally) changes nothing
        assert not _alive(escaped) and not pids_in_group(sp.pid)
    finally:
        sp.stop(1)


def test_the_watchdog_refuses_to_signal_its_own_or_init_s_group():
    for pgid in ("0", "1", str(os.getpgid(0))):
        p = subprocess.run([sys.executable, "-m", "firstlight.runner.watchdog", pgid, "1"], input=b"",
                           capture_output=True, timeout=30)
        assert p.returncode == 2
