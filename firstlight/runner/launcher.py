"""Launch a server in its own process group and stop it so that nothing of it survives.

Engines fork tensor-parallel workers that hold GPU memory; a stale one breaks the next start. ``stop``
signals the whole group and every descendant seen (some leave the group), waits a grace period, then
SIGKILLs what is left and reaps the child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import psutil


class LaunchError(Exception):
    pass


class ServerProcess:
    def __init__(self, argv: Sequence[str], output: Path | None = None, env: dict[str, str] | None = None) -> None:
        """``output``: write the server's stdout and stderr to this file instead of pipes (for ``--detach``,
        where nobody will read a pipe once firstlight has exited)."""
        self.argv = list(argv)
        self.output = output
        self.env = env
        self.popen: subprocess.Popen[bytes] | None = None
        self._out_file: IO[bytes] | None = None

    def start(self) -> None:
        if self.output is not None:
            self._out_file = open(self.output, "ab")  # noqa: SIM115 - the child keeps it
            out: int | IO[bytes] = self._out_file
            err: int | IO[bytes] = subprocess.STDOUT
        else:
            out = err = subprocess.PIPE
        try:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          start_new_session=True, env=self.env)
        except OSError as e:
            raise LaunchError(f"cannot start {self.argv[0]!r}: {e.strerror or e}") from None
        finally:
            if self._out_file is not None:
                self._out_file.close()

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def poll(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []

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
        Returns what it took, for the report."""
        if self.popen is None:
            return "not started"
        procs = [psutil.Process(self.pid)] if self.poll() is None else []
        procs += self.descendants()
        in_group = _group_members(self.pid)
        if self.poll() is not None and not procs and not in_group:
            return f"already exited (code {self.popen.returncode})"
        self.send(signal.SIGTERM)
        start = time.monotonic()
        deadline, second = start + grace, start + grace / 2
        how = "stopped with SIGTERM"
        while time.monotonic() < deadline:
            self.poll()
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
        return how


def _any_alive(procs: list[psutil.Process]) -> bool:
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


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
