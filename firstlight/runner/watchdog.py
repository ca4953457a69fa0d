"""The backstop that stops a launched server when firstlight itself dies without a chance to (SIGKILL, OOM).

firstlight starts this small process next to the server and holds the write end of its stdin. While firstlight
lives, it reads lines from that pipe: ``track PID START`` adds a process that left the server's process group
(``setsid``), ``container RUNTIME ID`` a container the server's CLI started (``docker run``), ``release`` means
"the server is handed over (``--detach``), leave it". When the pipe reaches end of file without a ``release``
(firstlight exited, whatever the way), it stops the containers (``RUNTIME stop -t GRACE ID``, bounded),
then signals the server's process group and every tracked process: SIGTERM, then SIGKILL after the grace
period. It ignores the terminal's signals, so a Ctrl-C or a hang-up of the shell reaches firstlight (which
stops the server itself) and not the backstop.

Standard library only and no firstlight imports, so that it starts fast and cannot fail on a broken install.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks (/proc/PID/stat field 22): with the pid, a unique identity."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _alive(pgid: int, tracked: dict[int, str]) -> list[int]:
    """Members of the group, and tracked processes that are still the same process."""
    out = []
    try:
        os.killpg(pgid, 0)
        out.append(-pgid)
    except OSError:
        pass
    for pid, ticks in tracked.items():
        if start_ticks(pid) == ticks and _state(pid) not in ("Z", "X", None):
            out.append(pid)
    return out


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().decode("ascii", "replace").rpartition(")")[2].split()[0]
    except OSError:
        return None


def _signal_all(targets: list[int], sig: int) -> None:
    for t in targets:
        try:
            if t < 0:
                os.killpg(-t, sig)
            else:
                os.kill(t, sig)
        except OSError:
            pass


def stop(pgid: int, tracked: dict[int, str], grace: float) -> None:
    targets = _alive(pgid, tracked)
    if not targets:
        return
    _signal_all(targets, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(0.1)
        targets = _alive(pgid, tracked)
        if not targets:
            return
    _signal_all(targets, signal.SIGKILL)


def stop_containers(containers: list[tuple[str, str]], grace: float) -> None:
    """``RUNTIME stop``: the runtime's own stop (its processes are not the server's group); each bounded."""
    for runtime, ref in containers:
        try:
            subprocess.run([runtime, "stop", "-t", str(round(grace)), ref], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=grace + 30, check=False)
        except (OSError, subprocess.SubprocessError):
            continue


def main(argv: list[str]) -> int:
    pgid, grace = int(argv[0]), float(argv[1])
    if pgid <= 1 or pgid == os.getpgid(0) or pgid == os.getpid():
        return 2  # never our own group, init's, or "every process" (killpg(0) and killpg(-1) semantics)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    tracked: dict[int, str] = {}
    containers: list[tuple[str, str]] = []
    for raw in sys.stdin.buffer:
        words = raw.decode("utf-8", "replace").split()
        if words[:1] == ["release"]:
            return 0
        if words[:1] == ["track"] and len(words) == 3 and words[1].isdigit():
            tracked[int(words[1])] = words[2]
        if words[:1] == ["container"] and len(words) == 3 and words[2].isalnum():
            containers.append((words[1], words[2]))
    stop_containers(containers, grace)
    stop(pgid, tracked, grace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
