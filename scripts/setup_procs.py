"""The processes of the two set-up scripts (setup_llama_server.py, setup_vllm.py): a command run to its end with a
deadline and a one-line error, a long build run with its output in a log and its progress said every 30 s, the
stop of a process group (and of every compiler a build started), and the smoke check's one question to a server
it started: a completion at temperature 0, within a deadline.

Standard library only: it runs before any venv of the project exists."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

from setup_common import SetupError, exit_text

Log = Callable[[str], None]
PROGRESS_EVERY_S = 30.0


def run_checked(cmd: list[str], what: str, timeout: float, env: dict[str, str] | None = None) -> str:
    """Run a command to its end (no input; pip never prompts) within ``timeout``; its stdout. On failure one line:
    ``WHAT failed: ...`` with its last error line."""
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                              timeout=timeout, env={**os.environ, "PIP_NO_INPUT": "1", **(env or {})})
    except subprocess.TimeoutExpired:
        raise SetupError(f"{what} failed: timed out after {timeout:.0f} s") from None
    except OSError as e:
        raise SetupError(f"{what} failed: {e}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stdout + "\n" + proc.stderr).splitlines() if ln.strip()]
        errs = [ln for ln in lines if ln.startswith(("ERROR", "error:"))] or lines[-1:] or ["(no output)"]
        raise SetupError(f"{what} failed: exit {proc.returncode}: {errs[-1][:300]}")
    return proc.stdout


def run_logged(cmd: list[str], cwd: Path, logf: IO[str], env: dict[str, str], label: str, log: Log) -> int:
    """Run cmd with its output appended to logf; say its progress every 30 s. Interrupted (Ctrl-C, SIGTERM): the
    whole build goes down with it."""
    logf.write(f"\n$ {' '.join(cmd)}\n")
    logf.flush()
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    t0 = last = time.monotonic()
    try:
        while True:
            try:
                return proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_S:
                last = now
                log(f"{label}: {now - t0:.0f} s elapsed; {last_progress(Path(logf.name))}")
    except BaseException:
        kill_tree(proc)
        raise


def descendants(pid: int) -> list[int]:
    """All descendant pids of pid (Linux /proc walk; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill cmake, ninja/make and every compiler they started.

    Ninja runs each compiler in its own process group, so killing cmake's group is not enough: freeze the group
    first so nothing new is spawned, then kill every descendant."""
    try:
        os.killpg(proc.pid, signal.SIGSTOP)
    except OSError:
        pass
    pids = descendants(proc.pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()
    deadline = time.monotonic() + 5.0  # let the kernel finish them off
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if alive(p)]
        if pids:
            time.sleep(0.05)


def stop_group(proc: subprocess.Popen[bytes], grace: float = 0.0) -> None:
    """Stop a checked server's process group (it was started in its own session): SIGTERM and up to ``grace``
    seconds to exit (none: SIGKILL at once), then SIGKILL, reaped; then SIGKILL to the group once more, for a
    child that outlived its parent (vLLM's EngineCore worker)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        if proc.poll() is not None:
            break
        if wait <= 0:
            continue
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def last_progress(path: Path) -> str:
    """The last ``[N/M]`` mark of a build log (ninja's and make's progress)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4096))
            tail = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in reversed(tail):
        s = line.strip()
        if s.startswith("[") and "]" in s:
            return s[: s.index("]") + 1]
    return ""


def tail_lines(path: Path, n: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def first_completion(proc: subprocess.Popen[bytes], url: str, body: dict[str, object], name: str, log_path: Path,
                     deadline_s: float, request_cap_s: float, retry_s: float) -> tuple[str | None, str | None]:
    """Ask a server just started (``proc``) for one completion at ``url`` until it answers, it dies or
    ``deadline_s`` passes: (its text, None) when it answered one, else (None, one line saying what went wrong:
    the signal it died of, no answer in time, an empty answer). Never through $http_proxy."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    data = json.dumps(body).encode()
    deadline = time.monotonic() + deadline_s
    while True:
        rc = proc.poll()
        if rc is not None:
            return None, f"{name} {exit_text(rc)} before it served (its output: {log_path})"
        left = deadline - time.monotonic()
        if left <= 0:
            return None, f"{name} did not serve a completion within {deadline_s:.0f} s ({log_path})"
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        try:
            with direct.open(req, timeout=max(0.5, min(request_cap_s, left))) as resp:
                text = json.loads(resp.read(1 << 20))["choices"][0]["text"]
            if isinstance(text, str) and text.strip():
                return text, None
            return None, f"{name} answered an empty completion ({log_path})"
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            # not listening yet, 503 while loading, or died mid-request (the poll above says which)
            time.sleep(retry_s)
