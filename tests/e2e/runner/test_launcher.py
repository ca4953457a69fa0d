"""The launcher (``firstlight.runner.launcher``) in process. Its subreaper flag: prctl found in libc (and not off
Linux), and the flag held while any server of this process runs, then put back as it was, read through a
recording prctl. Its servers, real processes: how each stop went (one SIGTERM, a second, SIGKILL after the
grace, already exited), a command that cannot start, the output file of a detachable server, the environment
without systemd's notification variables, a process that left the group (stopped too, and named), a launcher
that daemonized its server (adopted, reaped, its end read), the watchdog and its release. The same through the
CLI: ``tests/e2e/api/test_subreaper.py``, ``tests/e2e/samplers/test_zombie.py``,
``tests/e2e/runner/test_backstop.py``."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from firstlight.runner import launcher
from firstlight.samplers import proctable
from tests.support.common import wait_for


def test_prctl_is_libcs_on_linux_and_none_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = launcher._prctl()
    assert fn is not None and fn.__name__ == "prctl"
    flag = ctypes.c_int(-1)
    assert fn(launcher._PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value in (0, 1)
    monkeypatch.setattr(launcher.sys, "platform", "darwin")
    assert launcher._prctl() is None


def test_no_libc_no_prctl(monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_the_flag_is_held_while_any_server_runs_and_put_back_after(monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_a_flag_that_was_on_is_left_on(monkeypatch: pytest.MonkeyPatch) -> None:
    prctl = Prctl(1)
    monkeypatch.setattr(launcher, "_PRCTL", prctl)
    held = launcher._Subreaper()
    assert held.hold()
    held.drop()
    assert prctl.flag == 1 and (launcher._PR_SET_CHILD_SUBREAPER, 0) not in prctl.calls


def test_a_flag_that_cannot_be_set_is_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "_PRCTL", Prctl(0, fail_set=True))
    held = launcher._Subreaper()
    assert held.hold() is False and held._holders == 0
    monkeypatch.setattr(launcher, "_PRCTL", None)
    assert launcher.is_subreaper() is None and launcher.become_subreaper() is False
    assert launcher._Subreaper().hold() is False


# -- real servers ----------------------------------------------------------------------------------------------

CHECK_S = 60  # deadlines far above what each wait needs
SLEEPS = "import time; time.sleep(120)"


def on_sigterm(handler: str, before: str = "") -> str:
    """A server whose SIGTERM handler is ``handler`` (an expression; ``before``: code that defines it), which says
    'trapped' once it is set (a signal before that would end it the default way) and never ends by itself."""
    return (f"import signal, subprocess, sys, time\n{before}signal.signal(signal.SIGTERM, {handler})\n"
            "print('trapped', flush=True)\nwhile True: time.sleep(0.05)\n")


TRAPS_ONE_TERM = on_sigterm("on_term", "n = []\ndef on_term(*a):\n    n.append(1)\n    if len(n) > 1: sys.exit(0)\n")
IGNORES_TERM = on_sigterm("signal.SIG_IGN")


def server(code: str, *, backstop: bool = False, output: Path | None = None,
           env: dict[str, str] | None = None) -> launcher.ServerProcess:
    s = launcher.ServerProcess([sys.executable, "-c", code], output=output, env=env, backstop=backstop)
    s.start()
    return s


def said(s: launcher.ServerProcess, text: str) -> None:
    """Wait until the server printed ``text`` (its first line) on stdout."""
    assert s.popen is not None and s.popen.stdout is not None
    line = s.popen.stdout.readline().decode().strip()
    assert line == text, line


Launch = Callable[..., launcher.ServerProcess]


@pytest.fixture
def launch() -> Iterator[Launch]:
    """``server`` whose process group is killed at the test's end, whatever the test did."""
    started: list[launcher.ServerProcess] = []

    def start(code: str, **kw: Any) -> launcher.ServerProcess:
        s = server(code, **kw)
        started.append(s)
        return s

    try:
        yield start
    finally:
        for s in started:
            if s.popen is not None and s.poll() is None:
                s.send(signal.SIGKILL)
                s.popen.wait(CHECK_S)
            s.release()  # the watchdog, if any, ends


def test_a_server_that_ends_on_sigterm_is_stopped_with_sigterm_and_a_second_stop_says_the_same(launch: Launch) -> None:
    before = time.time()
    s = launch(SLEEPS)
    assert before <= s.launched_at <= time.time() and s.how_to_stop == f"kill -TERM -- -{s.pid}"
    assert os.getpgid(s.pid) == s.pid  # a session and group of its own: stopped as a group
    assert s.stop(5.0) == "stopped with SIGTERM"
    assert s.poll() == -signal.SIGTERM
    assert s.stop(5.0) == "stopped with SIGTERM"  # the first stop's answer


def test_a_server_that_ignores_its_first_sigterm_gets_a_second_at_half_the_grace(launch: Launch) -> None:
    s = launch(TRAPS_ONE_TERM)
    said(s, "trapped")
    assert s.stop(2.0) == "stopped by a second SIGTERM" and s.poll() == 0


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace(launch: Launch) -> None:
    s = launch(IGNORES_TERM)
    said(s, "trapped")
    assert s.stop(1.0) == "SIGKILL after 1s grace (SIGTERM was not enough)" and s.poll() == -signal.SIGKILL


def test_a_server_that_already_exited_says_its_code(launch: Launch) -> None:
    s = launch("import sys; sys.exit(3)")
    assert s.popen is not None
    s.popen.wait(CHECK_S)
    assert s.stop(5.0) == "already exited (code 3)"


def test_a_server_never_started_is_not_stopped() -> None:
    s = launcher.ServerProcess(["x"])
    assert s.stop(1.0) == "not started" and s.poll() is None and s.adopted() == []


def test_a_command_that_cannot_start_is_a_launch_error_and_holds_no_subreaper_flag(
        monkeypatch: pytest.MonkeyPatch) -> None:
    prctl = Prctl(0)
    monkeypatch.setattr(launcher, "_PRCTL", prctl)
    monkeypatch.setattr(launcher, "_SUBREAPER", launcher._Subreaper())
    s = launcher.ServerProcess(["/nonexistent/llama-server", "-m", "x.gguf"])
    with pytest.raises(launcher.LaunchError, match=r"^cannot start '/nonexistent/llama-server': No such file"):
        s.start()
    assert prctl.flag == 0 and launcher._SUBREAPER._holders == 0 and s.watchdog is None


def test_a_detachable_servers_output_goes_to_its_file(tmp_path: Path, launch: Launch) -> None:
    out = tmp_path / "server.log"
    s = launch("import sys; print('out'); print('err', file=sys.stderr)", output=out)
    assert s.detachable is True and launcher.ServerProcess(["x"]).detachable is False
    assert s.popen is not None and s.popen.wait(CHECK_S) == 0
    assert sorted(out.read_text().split()) == ["err", "out"]  # stdout and stderr, both in the file
    assert s.popen.stdout is None


def test_the_server_gets_the_environment_without_systemds_notification_variables(launch: Launch) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": "5000000",
           "WATCHDOG_PID": "1", "NOTIFY_OTHER": "x", "HF_TOKEN_PATH": "/t", "WATCHDOG": "kept"}
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    s = launch(code, env=env)
    assert s.popen is not None and s.popen.stdout is not None
    seen = json.loads(s.popen.stdout.read())
    s.popen.wait(CHECK_S)
    assert {k: seen[k] for k in ("HF_TOKEN_PATH", "WATCHDOG")} == {"HF_TOKEN_PATH": "/t", "WATCHDOG": "kept"}
    assert not {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "NOTIFY_OTHER"} & set(seen)
    assert launcher.server_environment({"A": "1", "NOTIFY_SOCKET": "x"}) == {"A": "1"}


# a worker that leaves the server's process group (setsid) and says its pid
LEAVES_GROUP = ("import os, subprocess, sys, time\n"
                "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
                "print(w.pid, flush=True)\n"
                "time.sleep(120)\n")


def test_a_worker_that_left_the_group_is_named_once_and_stopped_with_the_server(launch: Launch) -> None:
    s = launch(LEAVES_GROUP)
    assert s.popen is not None and s.popen.stdout is not None
    worker = int(s.popen.stdout.readline())
    wait_for(lambda: worker in [p.pid for p in s.descendants()], CHECK_S, "the worker in the tree")
    name = psutil.Process(worker).name()
    assert s.note_left_group() == [(worker, name)]
    assert s.note_left_group() == []  # told once
    assert worker in [p.pid for p in s.tree()] and s.pid in [p.pid for p in s.tree()]
    how = s.stop(5.0)
    assert how == f"stopped with SIGTERM; also stopped processes that had left the group: {worker} ({name})"
    wait_for(lambda: not psutil.pid_exists(worker) or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE,
             CHECK_S, "the worker to be gone")


# a launcher that starts the real server in its own session and exits 0 (a double fork): the server is orphaned
DAEMONIZES = ("import subprocess, sys\n"
              "d = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
              "print(d.pid, flush=True)\n")


def test_a_launcher_that_daemonized_its_server_leaves_it_adopted_and_its_end_is_read(launch: Launch) -> None:
    """As the subreaper, this process adopts the orphaned server: it is the server's, served on after the
    launcher's exit 0, and how it ended (SIGSEGV) is read from its reaped status."""
    s = launch(DAEMONIZES, backstop=True)
    try:
        assert s.popen is not None and s.popen.stdout is not None
        daemon = int(s.popen.stdout.readline())
        assert s.popen.wait(CHECK_S) == 0
        wait_for(lambda: [p.pid for p in s.adopted()] == [daemon], CHECK_S, "the orphan to be adopted")
        assert [p.pid for p in s.daemon_serving()] == [daemon]
        assert daemon in [p.pid for p in s.descendants()]
        os.kill(daemon, signal.SIGSEGV)
        assert s.exit_of([daemon]) == -signal.SIGSEGV
        assert s.reaped[daemon] == -signal.SIGSEGV and s.daemon_serving() == []
        assert s.exit_of([2_000_000_000]) is None  # never ours: nobody can tell
    finally:
        s.stop(5.0)


def test_a_server_that_did_not_exit_0_has_no_daemon_serving(launch: Launch) -> None:
    s = launch("import sys; sys.exit(1)")
    assert s.popen is not None and s.popen.wait(CHECK_S) == 1
    assert s.daemon_serving() == []


def test_the_watchdog_watches_the_server_until_it_is_released(launch: Launch) -> None:
    s = launch(SLEEPS, backstop=True)
    try:
        w = s.watchdog
        assert w is not None and w.poll() is None
        # (a process just forked shows its parent's command line, or none, until its exec: waited for)
        wait_for(lambda: psutil.Process(w.pid).cmdline()[-2:] == [str(s.pid), "10"], CHECK_S,
                 "the watchdog's command line: the server's pid and the grace")
        # whatever it might say (a traceback as firstlight dies) never reaches firstlight's own output
        assert [os.readlink(f"/proc/{w.pid}/fd/{fd}") for fd in (1, 2)] == ["/dev/null", "/dev/null"]
        s.release()
        assert w.wait(CHECK_S) is not None  # told, its stdin closed: it ends, leaving the server alone
        assert s.poll() is None  # the server serves on
    finally:
        s.send(signal.SIGKILL)
        assert s.popen is not None
        s.popen.wait(CHECK_S)


def test_without_the_backstop_there_is_no_watchdog(launch: Launch) -> None:
    s = launch(SLEEPS)
    assert s.watchdog is None
    s._tell_watchdog("release")  # nothing to tell: no error
    s.stop(5.0)


def ended(pid: int) -> bool:
    """The process is a zombie or gone (never raises: a condition polled by wait_for)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# a launcher that leaves two servers behind: one that ends by itself (exit 0), one that lives on
DAEMONIZES_TWO = ("import subprocess, sys\n"
                  "a = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],\n"
                  "                     stdin=subprocess.PIPE, start_new_session=True)\n"
                  "b = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
                  "                     start_new_session=True)\n"
                  "print(a.pid, b.pid, flush=True)\n")


def test_of_several_ends_a_death_by_signal_is_the_one_told(launch: Launch) -> None:
    """``exit_of`` reads how the adopted processes ended: a signal before an exit code, whichever came first
    (the daemon that crashed is the news, not its helper that exited 0)."""
    s = launch(DAEMONIZES_TWO, backstop=True)
    try:
        assert s.popen is not None and s.popen.stdout is not None
        clean, crashed = map(int, s.popen.stdout.readline().split())
        assert s.popen.wait(CHECK_S) == 0
        wait_for(lambda: crashed in {p.pid for p in s.adopted()}, CHECK_S, "the server adopted")
        # its stdin's writer, the launcher, is gone: it reads the end and exits 0 by itself
        wait_for(lambda: s.exit_of([clean]) == 0, CHECK_S, "the helper's exit 0")
        os.kill(crashed, signal.SIGSEGV)
        wait_for(lambda: ended(crashed), CHECK_S, "the server's end (the supervisor asks once none of them lives)")
        assert s.exit_of([clean, crashed]) == -signal.SIGSEGV
        assert s.exit_of([clean]) == 0
    finally:
        s.stop(5.0)


# -- the backstops, as the kernel and the watchdog carry them out --------------------------------------------------

def test_the_server_is_sigkilled_when_the_thread_that_launched_it_exits() -> None:
    """PR_SET_PDEATHSIG: the kernel's own backstop, tied to the launching thread (why the launch is on the main
    thread): a thread that launches and ends takes the server with it."""
    box: dict[str, subprocess.Popen[bytes]] = {}

    def launch_and_end() -> None:
        box["p"] = subprocess.Popen([sys.executable, "-c", SLEEPS], preexec_fn=launcher._die_with(os.getpid()))

    t = threading.Thread(target=launch_and_end)
    t.start()
    t.join(CHECK_S)
    p = box["p"]
    try:
        assert p.wait(CHECK_S) == -signal.SIGKILL
    finally:
        p.kill()
        p.wait(CHECK_S)


def test_a_server_whose_launcher_is_already_gone_dies_before_it_runs() -> None:
    """The launcher died between fork and prctl: the parent-death signal would never come, so the child ends."""
    p = subprocess.Popen([sys.executable, "-c", SLEEPS], preexec_fn=launcher._die_with(1))
    try:
        assert p.wait(CHECK_S) == 1
    finally:
        p.kill()
        p.wait(CHECK_S)


def test_the_subreaper_flag_is_set_and_put_back_in_the_kernel() -> None:
    """The real prctl, read with a libc handle of the test's own."""
    libc = ctypes.CDLL(None, use_errno=True)

    def flag() -> int:
        f = ctypes.c_int(-1)
        assert libc.prctl(launcher._PR_GET_CHILD_SUBREAPER, ctypes.byref(f), 0, 0, 0) == 0
        return f.value

    was = flag()
    try:
        assert libc.prctl(launcher._PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) == 0
        assert launcher.is_subreaper() is False
        held = launcher._Subreaper()
        assert held.hold() and flag() == 1 and launcher.is_subreaper() is True
        held.drop()
        assert flag() == 0 and launcher.is_subreaper() is False
    finally:
        libc.prctl(launcher._PR_SET_CHILD_SUBREAPER, was, 0, 0, 0)


def watchdog_ready(s: launcher.ServerProcess) -> None:
    w = s.watchdog
    assert w is not None
    wait_for(lambda: psutil.Process(w.pid).cmdline()[-2:] == [str(s.pid), "10"], CHECK_S,
             "the watchdog's command line")


def test_when_firstlight_dies_its_watchdog_stops_the_server_and_the_workers_that_left_the_group(
        launch: Launch) -> None:
    """firstlight's death is the end of the watchdog's pipe (the kernel closes it whatever killed firstlight):
    here the pipe is closed without a release, and the watchdog stops the group and the tracked worker."""
    s = launch(LEAVES_GROUP, backstop=True)
    assert s.popen is not None and s.popen.stdout is not None and s.watchdog is not None
    worker = int(s.popen.stdout.readline())
    wait_for(lambda: worker in [p.pid for p in s.descendants()], CHECK_S, "the worker in the tree")
    assert [pid for pid, _ in s.note_left_group()] == [worker]  # the watchdog is told: track PID TICKS
    watchdog_ready(s)
    assert s.watchdog.stdin is not None
    s.watchdog.stdin.close()
    assert s.popen.wait(CHECK_S) == -signal.SIGTERM
    wait_for(lambda: ended(worker), CHECK_S, "the worker that left the group, stopped by the watchdog")
    assert s.watchdog.wait(CHECK_S) == 0
    s.stop(5.0)  # reaps the worker, adopted as the subreaper


def test_a_stopped_server_ends_its_watchdog(launch: Launch) -> None:
    s = launch(SLEEPS, backstop=True)
    w = s.watchdog
    assert w is not None
    watchdog_ready(s)
    assert s.stop(5.0) == "stopped with SIGTERM"
    assert w.returncode == 0  # its pipe closed and waited for: not left to outlive the stop


COUNTS_TERMS = on_sigterm("lambda *a: print(time.monotonic(), flush=True)")  # the time of each SIGTERM


def test_two_sigterms_half_the_grace_apart_then_sigkill(launch: Launch) -> None:
    s = launch(COUNTS_TERMS)
    said(s, "trapped")
    before = time.monotonic()
    assert s.stop(3.0) == "SIGKILL after 3s grace (SIGTERM was not enough)"
    assert s.popen is not None and s.popen.stdout is not None
    terms = [float(t) for t in s.popen.stdout.read().split()]
    assert len(terms) == 2, terms  # exactly two: the second is not repeated
    assert before <= terms[0] and terms[1] >= before + 1.5  # not before half the grace (later only under load)


# a root that starts a helper in its own process group and exits at once: the helper, orphaned, is no longer
# below the root, only in its group; on SIGTERM it writes "term", takes 0.3 s, writes "exit" and exits
LEAVES_A_HELPER = ("import subprocess, sys\n"
                   "code = ('import pathlib, signal, sys, time\\n'\n"
                   "        'f = pathlib.Path(sys.argv[1])\\n'\n"
                   "        'def on_term(*a):\\n'\n"
                   "        '    f.write_text(\"term\\\\n\"); time.sleep(0.3)\\n'\n"
                   "        '    f.write_text(\"term\\\\nexit\\\\n\"); sys.exit(0)\\n'\n"
                   "        'signal.signal(signal.SIGTERM, on_term)\\n'\n"
                   "        'f.write_text(\"ready\\\\n\")\\n'\n"
                   "        'time.sleep(120)\\n')\n"
                   "h = subprocess.Popen([sys.executable, '-c', code, sys.argv[1]])\n"
                   "print(h.pid, flush=True)\n")


def test_a_root_that_exited_is_stopped_while_its_group_lives_and_the_stop_waits_for_it(
        tmp_path: Path) -> None:
    said_file = tmp_path / "helper"
    s = launcher.ServerProcess([sys.executable, "-c", LEAVES_A_HELPER, str(said_file)], backstop=False)
    s.start()
    assert s.popen is not None and s.popen.stdout is not None
    helper = int(s.popen.stdout.readline())
    try:
        assert s.popen.wait(CHECK_S) == 0
        wait_for(lambda: said_file.exists() and said_file.read_text() == "ready\n", CHECK_S, "the helper's trap")
        assert s.stop(CHECK_S) == "stopped with SIGTERM"  # not "already exited": its group still ran
        assert said_file.read_text() == "term\nexit\n"  # waited for, not SIGKILLed half way
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)
        s.adopted()  # reaps it if this process is a subreaper now


# a root with a worker in its group, then two that leave it (setsid), their pids on one line
LEAVES_GROUP_TWO = ("import subprocess, sys, time\n"
                    "cmd = [sys.executable, '-c', 'import time; time.sleep(120)']\n"
                    "stays = subprocess.Popen(cmd)\n"
                    "a = subprocess.Popen(cmd, start_new_session=True)\n"
                    "b = subprocess.Popen(cmd, start_new_session=True)\n"
                    "print(stays.pid, a.pid, b.pid, flush=True)\n"
                    "time.sleep(120)\n")


def test_every_worker_that_left_the_group_is_named_whatever_the_order_of_the_tree(launch: Launch) -> None:
    s = launch(LEAVES_GROUP_TWO)
    assert s.popen is not None and s.popen.stdout is not None
    stays, a, b = map(int, s.popen.stdout.readline().split())
    wait_for(lambda: {stays, a, b} <= {p.pid for p in s.descendants()}, CHECK_S, "the three workers in the tree")
    names = {pid: psutil.Process(pid).name() for pid in (a, b)}
    assert sorted(s.note_left_group()) == sorted(names.items())  # the one in the group is not a reason to stop
    how = s.stop(5.0)
    assert how == ("stopped with SIGTERM; also stopped processes that had left the group: "
                   + ", ".join(f"{pid} ({names[pid]})" for pid in sorted(names)))


# a root that keeps a worker in its group and double-forks a daemon into a session of its own (orphaned: adopted
# by the nearest subreaper), then says both pids and lives on
KEEPS_ONE_DAEMONIZES_ONE = ("import os, subprocess, sys, time\n"
                            "cmd = [sys.executable, '-c', 'import time; time.sleep(120)']\n"
                            "kept = subprocess.Popen(cmd)\n"
                            "r, w = os.pipe()\n"
                            "if os.fork() == 0:\n"
                            "    os.setsid()\n"
                            "    pid = os.fork()\n"
                            "    if pid:\n"
                            "        os.write(w, str(pid).encode()); os._exit(0)\n"
                            "    os.execv(sys.executable, cmd)\n"
                            "os.wait()\n"
                            "print(kept.pid, os.read(r, 32).decode(), flush=True)\n"
                            "time.sleep(120)\n")


def test_the_tree_is_the_roots_descendants_and_the_adopted_together(launch: Launch) -> None:
    s = launch(KEEPS_ONE_DAEMONIZES_ONE, backstop=True)
    try:
        assert s.popen is not None and s.popen.stdout is not None
        kept, daemon = map(int, s.popen.stdout.readline().split())
        wait_for(lambda: [p.pid for p in s.adopted()] == [daemon], CHECK_S, "the daemon adopted")
        assert {kept, daemon} <= {p.pid for p in s.descendants()}
    finally:
        s.stop(5.0)


def test_a_process_is_made_once_and_a_reused_pid_is_made_again(launch: Launch) -> None:
    s = launch(LEAVES_GROUP)
    assert s.popen is not None and s.popen.stdout is not None
    worker = int(s.popen.stdout.readline())
    wait_for(lambda: worker in [p.pid for p in s.descendants()], CHECK_S, "the worker in the tree")
    first = {p.pid: p for p in s.descendants()}
    assert all(p is first[p.pid] for p in s.descendants())  # psutil's Process, made once (it reads /proc)
    st = proctable.read_stat(worker)
    assert st is not None
    s._known[worker] = (st.start_ticks - 1, psutil.Process(os.getpid()))  # the same pid, an older process
    made = s._process(st)
    assert made is not None and made.pid == worker and s._known[worker] == (st.start_ticks, made)
    s.stop(5.0)


def test_the_processes_known_are_forgotten_past_4096() -> None:
    s = launcher.ServerProcess(["x"])
    me = proctable.read_stat(os.getpid())
    assert me is not None
    s._known = {-n: (0, psutil.Process(os.getpid())) for n in range(1, 4097)}  # 4096 known
    s._process(me)
    assert len(s._known) == 4097  # at the bound: kept
    del s._known[os.getpid()]
    s._known[-4097] = (0, psutil.Process(os.getpid()))
    s._process(me)
    assert list(s._known) == [os.getpid()]  # past it: forgotten, then this one known


def test_a_server_is_launched_with_its_backstops_unless_told_and_detachable_as_told(tmp_path: Path) -> None:
    assert launcher.ServerProcess(["x"]).backstop is True
    kept = launcher.ServerProcess(["x"], output=tmp_path / "log", detachable=False)  # --keep-on-failure's output
    assert kept.detachable is False
    assert launcher.ServerProcess(["x"], detachable=True).detachable is True


def test_a_watchdog_that_died_is_no_error_to_tell(launch: Launch) -> None:
    """The OOM killer may take the watchdog first: firstlight goes on (its pipe is broken, not its run)."""
    s = launch(LEAVES_GROUP, backstop=True)
    assert s.popen is not None and s.popen.stdout is not None and s.watchdog is not None
    worker = int(s.popen.stdout.readline())
    s.watchdog.kill()
    s.watchdog.wait(CHECK_S)
    wait_for(lambda: worker in [p.pid for p in s.descendants()], CHECK_S, "the worker in the tree")
    assert [pid for pid, _ in s.note_left_group()] == [worker]  # told to a dead watchdog: EPIPE, swallowed
    assert s.stop(5.0).startswith("stopped with SIGTERM")


def test_a_watchdog_that_does_not_end_does_not_hold_the_stop(launch: Launch) -> None:
    s = launch(SLEEPS, backstop=True)
    w = s.watchdog
    assert w is not None
    watchdog_ready(s)
    os.kill(w.pid, signal.SIGSTOP)
    try:
        assert s.stop(5.0) == "stopped with SIGTERM"  # its pipe closed, 5 s waited for it, then on
        assert w.poll() is None
    finally:
        os.kill(w.pid, signal.SIGCONT)
        assert w.wait(CHECK_S) == 0  # it reads the end of its pipe, finds nothing left to stop


# the server's own parent-death signal, as the kernel has it for it (PR_GET_PDEATHSIG = 2)
SAYS_PDEATHSIG = ("import ctypes\n"
                  "s = ctypes.c_int(-1)\n"
                  "ctypes.CDLL(None).prctl(2, ctypes.byref(s), 0, 0, 0)\n"
                  "print(s.value, flush=True)\n")


def pdeathsig(s: launcher.ServerProcess) -> int:
    assert s.popen is not None and s.popen.stdout is not None
    value = int(s.popen.stdout.readline())
    s.popen.wait(CHECK_S)
    return value


def test_only_a_server_launched_from_the_main_thread_with_its_backstop_and_not_to_be_handed_over_is_tied(
        launch: Launch, tmp_path: Path) -> None:
    tied = launch(SAYS_PDEATHSIG, backstop=True)
    assert pdeathsig(tied) == signal.SIGKILL
    assert pdeathsig(launch(SAYS_PDEATHSIG)) == 0  # no backstop
    handed = launcher.ServerProcess([sys.executable, "-c", SAYS_PDEATHSIG], detachable=True)
    handed.start()
    try:
        assert pdeathsig(handed) == 0  # --detach / --keep-on-failure: it may outlive firstlight
    finally:
        handed.stop(5.0)
    box: list[launcher.ServerProcess] = []
    t = threading.Thread(target=lambda: box.append(launch(SAYS_PDEATHSIG, backstop=True)))
    t.start()
    t.join(CHECK_S)
    assert pdeathsig(box[0]) == 0  # from another thread: the signal would come when that thread ends


def test_only_the_servers_orphans_are_adopted_never_firstlights_own_helpers_or_older_processes(
        launch: Launch) -> None:
    older = subprocess.Popen([sys.executable, "-c", SLEEPS], start_new_session=True)  # there before the launch
    helpers = [older]
    try:
        wait_for(lambda: time.time() - psutil.Process(older.pid).create_time() > 1.5, CHECK_S,
                 "the older process to be more than a second older than the launch")
        s = launch(DAEMONIZES, backstop=True)
        helpers.append(subprocess.Popen([sys.executable, "-c", SLEEPS]))  # firstlight's own, in its session
        try:
            assert s.popen is not None and s.popen.stdout is not None
            daemon = int(s.popen.stdout.readline())
            wait_for(lambda: daemon in [p.pid for p in s.adopted()], CHECK_S, "the daemon adopted")
            assert [p.pid for p in s.adopted()] == [daemon]
        finally:
            s.stop(5.0)
    finally:
        for p in helpers:
            p.kill()
            p.wait(CHECK_S)


def test_a_zombie_is_not_alive_and_a_live_process_is() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # never waited for here until it is a zombie
    try:
        p = psutil.Process(child.pid)
        wait_for(lambda: p.status() == psutil.STATUS_ZOMBIE, CHECK_S, "the child to become a zombie")
        assert p.is_running()  # psutil still sees it: only its state says it is gone
        assert launcher._alive_one(p) is False and launcher._any_alive([p]) is False
        assert launcher._alive_one(psutil.Process()) is True
    finally:
        child.wait(CHECK_S)


def test_a_groups_members_are_its_live_processes_by_pid_and_not_its_zombies(launch: Launch) -> None:
    s = launch("import subprocess, sys, time\n"
               "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
               "z = subprocess.Popen([sys.executable, '-c', 'pass'])\n"  # exits, never reaped: a zombie of the group
               "print(w.pid, z.pid, flush=True)\n"
               "time.sleep(120)\n")
    assert s.popen is not None and s.popen.stdout is not None
    worker, zombie = map(int, s.popen.stdout.readline().split())
    wait_for(lambda: psutil.Process(zombie).status() == psutil.STATUS_ZOMBIE, CHECK_S, "the zombie")
    assert sorted(launcher._group_members(s.pid)) == sorted([s.pid, worker])
    assert launcher._group_members(os.getpgid(0)) != [] and s.pid not in launcher._group_members(os.getpgid(0))


def test_a_watchdog_that_cannot_be_started_leaves_the_server_running_without_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(launcher.sys, "executable", str(tmp_path / "no-python"))  # the watchdog's exec fails
    s = launcher.ServerProcess(["sleep", "120"], backstop=True)
    try:
        s.start()
        assert s.watchdog is None and s.poll() is None
    finally:
        assert s.stop(5.0) == "stopped with SIGTERM"


def test_a_server_never_started_was_launched_at_no_time() -> None:
    assert launcher.ServerProcess(["true"]).launched_at == 0.0


def test_the_server_reads_nothing_of_firstlights_stdin(launch: Launch) -> None:
    r, w = os.pipe()
    saved = os.dup(0)
    os.dup2(r, 0)  # firstlight's stdin a pipe (a terminal, a script's input): never the server's
    try:
        s = launch(SLEEPS)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, r, w):
            os.close(fd)
    wait_for(lambda: psutil.Process(s.pid).cmdline()[-1:] == [SLEEPS], CHECK_S, "the server's exec")
    assert os.readlink(f"/proc/{s.pid}/fd/0") == "/dev/null"


# on its first SIGTERM, starts a helper in a session of its own that ignores SIGTERM, says its pid, and exits 1.5 s
# later (the stop's loop sees the helper while it is still the server's child)
SPAWNS_ON_TERM = on_sigterm("on_term", (
    "IGNORES = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)'\n"
    "spawned = []\n"
    "def on_term(*a):\n"
    "    if spawned: return\n"
    "    spawned.append(subprocess.Popen([sys.executable, '-c', IGNORES], start_new_session=True))\n"
    "    print(spawned[0].pid, flush=True)\n"
    "    time.sleep(1.5)\n"
    "    sys.exit(0)\n"))


def test_a_process_the_server_starts_while_it_stops_is_waited_for_and_killed_too(launch: Launch) -> None:
    s = launch(SPAWNS_ON_TERM)
    said(s, "trapped")
    helper: list[int] = []
    assert s.popen is not None and s.popen.stdout is not None
    out = s.popen.stdout
    reader = threading.Thread(target=lambda: helper.append(int(out.readline())), daemon=True)
    reader.start()
    try:
        assert s.stop(4.0) == "SIGKILL after 4s grace (SIGTERM was not enough)"
        reader.join(CHECK_S)
        wait_for(lambda: ended(helper[0]), CHECK_S, "the helper killed")
    finally:
        if helper:
            with contextlib.suppress(ProcessLookupError):
                os.kill(helper[0], signal.SIGKILL)


def test_a_watchdog_told_after_its_pipe_is_closed_is_no_error(launch: Launch) -> None:
    s = launch(SLEEPS, backstop=True)
    s._close_watchdog()  # its pipe closed: it stops the server and ends
    s._tell_watchdog("release")  # a write to a closed file: nothing to tell, no error
    assert s.watchdog is not None and s.watchdog.stdin is not None and s.watchdog.stdin.closed
