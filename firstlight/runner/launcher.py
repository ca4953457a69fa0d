"""Launch a server in its own process group and stop it so that nothing of it survives, whatever ends firstlight.

Engines fork tensor-parallel workers that hold GPU memory; a stale one breaks the next start. ``stop``
signals the whole group and every descendant seen (some leave the group), waits a grace period, then
SIGKILLs what is left and reaps the child. It is idempotent and safe to call from a ``finally`` or ``atexit``.

Backstops for the ways firstlight can die without running its own code:
- the server's root gets a parent-death signal (``PR_SET_PDEATHSIG``, SIGKILL): the kernel kills it when the
  thread that launched it exits, so the launch must happen on the main thread (it is skipped elsewhere);
- a watchdog process (``firstlight.runner.watchdog``) holds the read end of a pipe whose write end only
  firstlight holds: at end of file it stops the whole process group and every process that left it;
- firstlight becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): a worker that double-forks and calls
  ``setsid`` is reparented to firstlight instead of init, so it stays in the tree, is stopped with the rest,
  and a launcher script that daemonizes the real server and exits 0 leaves a daemon that is still watched.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import psutil

from firstlight.errors import FirstlightError
from firstlight.runner.watchdog import start_ticks
from firstlight.samplers import proctable

# Signals that end a run the way SIGTERM does: the server is stopped (an ssh session that drops sends SIGHUP).
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


class LaunchError(FirstlightError):
    """The server's command could not be started (not found, not executable, a bad working directory)."""


def _prctl() -> Callable[..., int] | None:
    """libc's prctl(2), found among this process's own symbols (Python links libc dynamically): no library search,
    which would run ``ldconfig -p`` at import."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None
    return fn


_PRCTL = _prctl()


def _prctl_one_arg(prctl: Callable[..., int], option: int, arg: Any) -> int:
    """One prctl(2) with its one argument: each option used here reads only arg2 (kernel/sys.c), the rest are 0."""
    return prctl(option, arg, 0, 0, 0)  # pragma: no mutate - arg3..arg5 are never read for these options


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux). True when it worked."""
    return _PRCTL is not None and _prctl_one_arg(_PRCTL, _PR_SET_CHILD_SUBREAPER, 1) == 0


def is_subreaper() -> bool | None:
    """Whether this process is a child subreaper now; None where that cannot be read."""
    flag = ctypes.c_int(0)
    if _PRCTL is None or _prctl_one_arg(_PRCTL, _PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) != 0:
        return None
    return bool(flag.value)


class _Subreaper:
    """The subreaper flag, held while any server of this process runs, then put back as it was: the Python API's
    caller lives on after its servers, and a subreaper that never reaps leaves every unrelated orphan of its
    other children a zombie."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was: bool | None = None

    def hold(self) -> bool:
        with self._lock:
            if self._holders == 0:
                self._was = is_subreaper()
                if not become_subreaper():
                    return False
            self._holders += 1
            return True

    def drop(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._was is False and _PRCTL is not None:
                _prctl_one_arg(_PRCTL, _PR_SET_CHILD_SUBREAPER, 0)


_SUBREAPER = _Subreaper()


def _die_with(parent: int) -> Callable[[], None]:
    """preexec_fn: SIGKILL this child when its parent thread exits; if the parent is already gone, die now."""
    prctl = _PRCTL

    def preexec() -> None:
        if prctl is not None:
            _prctl_one_arg(prctl, _PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:
            os._exit(1)

    return preexec


# firstlight is the unit's notifier (READY=1 after a real generation, the watchdog): a server or its wrapper that
# inherited these would talk to systemd itself, and under NotifyAccess=all its `systemd-notify --ready` is READY
# before firstlight's (sd_notify(3): NOTIFY_SOCKET; sd_watchdog_enabled(3): WATCHDOG_USEC, WATCHDOG_PID).
_SYSTEMD_NOTIFY_VARS = ("WATCHDOG_USEC", "WATCHDOG_PID")


def server_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ``env`` (default: firstlight's own) without systemd's notification variables."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if not k.startswith("NOTIFY_") and k not in _SYSTEMD_NOTIFY_VARS}


# Popen's argument for a child that leads a process group of its own (``process_group`` is Python 3.11's)
_OWN_GROUP: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
EXIT_WAIT_S = 2.0  # how long a server seen gone is given to become a zombie whose wait status can be read


class ServerProcess:
    def __init__(self, argv: Sequence[str], output: Path | None = None, env: dict[str, str] | None = None,
                 *, detachable: bool | None = None, backstop: bool = True) -> None:
        """``output``: write the server's stdout and stderr to this file instead of pipes (for ``--detach``,
        where nobody will read a pipe once firstlight has exited). ``detachable`` (default: when ``output``
        is given): the server may outlive firstlight after :meth:`release`, so no parent-death signal.
        ``backstop``: start the watchdog and the parent-death signal (tests of the bare mechanics turn it off)."""
        self.argv = list(argv)
        self.output = output
        self.env = env
        self.detachable = output is not None if detachable is None else detachable
        self.backstop = backstop
        self.popen: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.left_group: dict[int, str] = {}  # pid -> name of processes that left the server's process group
        self.reaped: dict[int, int] = {}  # pid -> exit code (Popen's convention) of the adopted ones reaped here
        # A reap and its record are one step: the sampler's thread reaps too, and a daemon's SIGSEGV read between
        # its waitpid and its record was "no exit known" (failure `other`, once in a full test run)
        self._reap_lock = threading.RLock()
        self._known: dict[int, tuple[int, psutil.Process]] = {}  # pid -> (start ticks, process): made once
        self._tree = proctable.TreeReader()  # the server's tree
        self._children = proctable.TreeReader()  # firstlight's own children (the adopted among them)
        self._out_file: IO[bytes] | None = None
        self._stop_lock = threading.Lock()
        self._stopped: str | None = None
        self._subreaper = False  # this server holds the subreaper flag (see _Subreaper)
        self._launched_at = 0.0

    def start(self) -> None:
        if self.output is not None:
            self._out_file = open(self.output, "ab")  # noqa: SIM115 - the child keeps it
            out: int | IO[bytes] = self._out_file
            err: int | IO[bytes] = subprocess.STDOUT
        else:
            out = err = subprocess.PIPE
        tie = (self.backstop and not self.detachable and _PRCTL is not None
               and threading.current_thread() is threading.main_thread())
        if self.backstop:
            self._subreaper = _SUBREAPER.hold()
        self._launched_at = time.time()
        try:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          start_new_session=True, env=server_environment(self.env),
                                          preexec_fn=_die_with(os.getpid()) if tie else None)
        except OSError as e:
            self._drop_subreaper()
            raise LaunchError(f"cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        finally:
            if self._out_file is not None:
                self._out_file.close()
        if self.backstop:
            self._start_watchdog()

    def _start_watchdog(self, grace: float = 10.0) -> None:
        # A process group of its own (still in firstlight's session): `kill -9 -PGID` of firstlight's group, as a
        # cancelled CI job does, must not take the backstop with it.
        with contextlib.suppress(OSError):
            self.watchdog = subprocess.Popen(
                [sys.executable, "-m", "firstlight.runner.watchdog", str(self.pid), f"{grace:g}"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **_OWN_GROUP)

    def _tell_watchdog(self, line: str) -> None:
        w = self.watchdog
        if w is None or w.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):  # it died (a broken pipe), or its pipe is closed already
            w.stdin.write(line.encode() + b"\n")
            w.stdin.flush()

    def _close_watchdog(self) -> None:
        w = self.watchdog
        if w is None:
            return
        with contextlib.suppress(OSError):  # what a write left in the buffer, flushed to a watchdog that died
            if w.stdin is not None:
                w.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            w.wait(timeout=5)

    def release(self) -> None:
        """The server is handed over (``--detach``): the watchdog leaves it alone when firstlight exits."""
        self._tell_watchdog("release")
        self._close_watchdog()
        self._drop_subreaper()

    def _drop_subreaper(self) -> None:
        """This server no longer needs its orphans adopted (stopped, or handed over)."""
        if self._subreaper:
            self._subreaper = False
            _SUBREAPER.drop()

    @property
    def launched_at(self) -> float:
        """When the server was launched (epoch seconds)."""
        return self._launched_at

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    @property
    def how_to_stop(self) -> str:
        """The command that stops the server once firstlight has handed it over."""
        return f"kill -TERM -- -{self.pid}"

    def poll(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def descendants(self) -> list[psutil.Process]:
        """The root's descendants and the processes firstlight adopted as the subreaper (with theirs), read the
        cheaper way (:class:`firstlight.samplers.proctable.TreeReader`): this runs every sample."""
        pids, table = self._tree.below([self.pid])
        for p in self.adopted():
            pids += [p.pid, *self._tree.below([p.pid])[0]]
        stat = table.get if table is not None else proctable.read_stat
        out = [self._process(stat(pid)) for pid in dict.fromkeys(pids)]
        return [p for p in out if p is not None]

    def _process(self, st: proctable.Stat | None) -> psutil.Process | None:
        """psutil's process for ``st``, made once per process (its creation reads /proc again)."""
        if st is None:
            return None
        known = self._known.get(st.pid)
        if known is not None and known[0] == st.start_ticks:
            return known[1]
        try:
            p = psutil.Process(st.pid)
        except psutil.Error:
            return None
        if len(self._known) > 4096:  # a long-lived server's short-lived children: forget the old ones
            self._known.clear()
        self._known[st.pid] = (st.start_ticks, p)
        return p

    def adopted(self) -> list[psutil.Process]:
        """firstlight's children that are the server's orphans, adopted as the subreaper (a daemon whose
        launcher exited, a double-forked worker): not the root, and outside firstlight's own session (the server
        runs in a session of its own, and its orphans stay there or ``setsid`` away; whatever else firstlight runs,
        the watchdog included, stays in firstlight's session)."""
        if self.popen is None:
            return []
        try:
            my_session = os.getsid(0)
        except OSError:
            return []
        out = []
        for pid in self._children.below([os.getpid()], recursive=False)[0]:
            st = proctable.read_stat(pid)
            if st is None or st.pid == self.pid:
                continue  # the root, in a session of its own: its Popen reaps it
            try:
                if os.getsid(st.pid) == my_session:
                    continue  # one of firstlight's own helpers: its own code waits for it
                if st.state == "Z":
                    with self._reap_lock, contextlib.suppress(ChildProcessError):
                        pid, status = os.waitpid(st.pid, os.WNOHANG)  # reap what we adopted, or it stays a zombie
                        if pid:  # kept: a daemon's SIGSEGV after READY must not read as its launcher's exit 0
                            self.reaped[pid] = os.waitstatus_to_exitcode(status)
                    continue
                p = self._process(st)
                if p is None or p.create_time() + 1 < self._launched_at:
                    continue  # gone, or older than the server: not one of its processes
            except (psutil.Error, OSError):
                continue
            out.append(p)
        return out

    def tree(self) -> list[psutil.Process]:
        """Every live process of the server: the root while it lives, its descendants, the adopted."""
        procs = []
        if self.poll() is None:
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(self.pid))
        return procs + [p for p in self.descendants() if _alive_one(p)]

    def note_left_group(self, procs: list[psutil.Process] | None = None) -> list[tuple[int, str]]:
        """Processes of the tree (``procs``: the descendants just read) that left the server's process group
        (``setsid``) since the last call: the watchdog learns them, so it stops them too; the caller reports
        them."""
        new = []
        for p in self.descendants() if procs is None else procs:
            try:
                if os.getpgid(p.pid) == self.pid or p.pid in self.left_group:
                    continue
                name = p.name()
            except (OSError, psutil.Error):
                continue
            ticks = start_ticks(p.pid)
            self.left_group[p.pid] = name
            if ticks is not None:
                self._tell_watchdog(f"track {p.pid} {ticks}")
            new.append((p.pid, name))
        return new

    def exit_of(self, pids: list[int]) -> int | None:
        """How the first of ``pids`` that firstlight reaped ended (Popen's convention), a signal before an exit
        code; None when none was reaped here (not firstlight's child: nobody can tell)."""
        deadline = time.monotonic() + EXIT_WAIT_S
        while True:
            with self._reap_lock:  # after any reap under way on the sampler's thread has been recorded
                self.adopted()  # reaps the ones that died since the last sample
                codes = [self.reaped[p] for p in pids if p in self.reaped]
            # a process seen gone may still be exiting (not yet a zombie to reap): wait for it, bounded
            if codes or time.monotonic() >= deadline or not any(os.path.exists(f"/proc/{p}") for p in pids):
                break
            time.sleep(0.02)
        signalled = [c for c in codes if c < 0]
        return signalled[0] if signalled else (codes[0] if codes else None)

    def daemon_serving(self) -> list[psutil.Process]:
        """When the root exited 0 and left processes behind (a launcher that daemonized the real server):
        those processes. Empty otherwise."""
        if self.poll() != 0:
            return []
        return [p for p in self.descendants() if _alive_one(p)]

    def send(self, sig: int) -> None:
        """Signal the server's whole process group (and its descendants that left it)."""
        procs = self.descendants()
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass

    def stop(self, grace: float) -> str:
        """TERM; a second TERM at half the grace (llama.cpp and uvicorn take a second interrupt as "now": a
        llama-server with a completion in flight ignores the first); KILL after ``grace``; reap.
        Returns what it took, for the report. A second call returns the first one's answer."""
        with self._stop_lock:
            if self._stopped is None:
                self._stopped = self._stop(grace)
            return self._stopped

    def _stop(self, grace: float) -> str:
        if self.popen is None:
            return "not started"
        try:
            return self._terminate(grace)
        finally:
            self._close_watchdog()  # a no-op once released: the watchdog is told and gone
            self._drop_subreaper()  # every process of the server is reaped: orphans go to init again

    def _terminate(self, grace: float) -> str:
        assert self.popen is not None
        self.note_left_group()
        procs = self.tree()
        in_group = _group_members(self.pid)
        if self.poll() is not None and not procs and not in_group:
            return f"already exited (code {self.popen.returncode})"
        self.send(signal.SIGTERM)
        start = time.monotonic()
        deadline, second = start + grace, start + grace / 2
        how = "stopped with SIGTERM"
        while time.monotonic() < deadline:
            self.poll()
            procs += [p for p in self.descendants() if p not in procs]
            if not _any_alive(procs) and not _group_members(self.pid):
                break
            if second and time.monotonic() >= second:
                second = 0.0
                how = "stopped by a second SIGTERM"
                self.send(signal.SIGTERM)
            time.sleep(0.05)
        else:
            how = f"SIGKILL after {grace:g}s grace (SIGTERM was not enough)"
            self.send(signal.SIGKILL)
            for p in procs:
                try:
                    p.kill()
                except psutil.Error:
                    pass
        try:
            self.popen.wait(timeout=max(1.0, grace))
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=5)
        # Pick up anything of the group that the SIGKILL found only now.
        deadline = time.monotonic() + 5
        while _group_members(self.pid) and time.monotonic() < deadline:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                break
            time.sleep(0.05)
        self.adopted()  # reaps the adopted ones that just died
        if self.left_group:
            names = ", ".join(f"{pid} ({name})" for pid, name in sorted(self.left_group.items()))
            how += f"; also stopped processes that had left the group: {names}"
        return how


def _alive_one(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _any_alive(procs: list[psutil.Process]) -> bool:
    return any(_alive_one(p) for p in procs)


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                out.append(p.pid)
        except (OSError, psutil.Error):
            continue
    return out
