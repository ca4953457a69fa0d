"""What the two set-up scripts (setup_llama_server.py, setup_vllm.py) share: the cache's place, this CPU's key
(where a smoke check passed), a file's hash,
the temporary entries a killed run left in it, a free port and an exit status in words for the smoke checks, the
two ways a set-up ends early (an expected failure, SIGTERM) and the one exit-status mapping of each ending.

Standard library only: it runs before any venv of the project exists."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


class SetupError(Exception):
    """An expected failure: reported as one line, exit status 1."""


class Terminated(BaseException):
    """SIGTERM: unwind (removing temporary files) and exit 143."""


def on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def default_cache() -> Path:
    """``$FIRSTLIGHT_CACHE``, else ``~/.cache/firstlight``."""
    env = os.environ.get("FIRSTLIGHT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "firstlight"


def cpu_flags() -> str:
    """This CPU's feature flags, as /proc/cpuinfo lists them."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                # x86 calls it "flags", arm64 "Features"
                if sep and key.strip() in ("flags", "Features"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor()


def cpu_key() -> str:
    """This CPU (architecture and feature flags): where a smoke check passed."""
    raw = "\n".join([platform.system(), platform.machine(), cpu_flags()])
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def clean_stale(parent: Path) -> None:
    """Remove the temporary entries (``.tmp-*``, ``.old-*``) killed runs left in ``parent`` (safe: the caller holds
    the cache's lock)."""
    if not parent.is_dir():
        return
    for p in parent.iterdir():
        if p.name.startswith((".tmp-", ".old-")):
            if p.is_dir() and not p.is_symlink():
                remove_tree(p)
            else:
                p.unlink(missing_ok=True)


def free_port() -> int:
    """A loopback port free now, for a smoke check's server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def exit_text(rc: int) -> str:
    """As firstlight names an exit: ``died of SIGSEGV (signal 11)``, ``exited with code 1``."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "an unknown signal"
        return f"died of {name} (signal {-rc})"
    return f"exited with code {rc}"


def run_main(prog: str, main: Callable[[], int], unkept: str) -> NoReturn:
    """Run a set-up's ``main`` and exit: its status; 1 for an expected failure or an OS error (an unwritable cache),
    each one line; 130 for Ctrl-C; 143 for SIGTERM, saying that nothing ``unkept`` ("half-built") was kept."""
    try:
        sys.exit(main())
    except SetupError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print(f"{prog}: error: interrupted", file=sys.stderr)
        sys.exit(130)
    except Terminated:
        print(f"{prog}: error: terminated (SIGTERM); nothing {unkept} was kept", file=sys.stderr)
        sys.exit(143)
    except OSError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(1)
