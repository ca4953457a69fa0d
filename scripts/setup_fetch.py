"""What the two set-up scripts fetch and how they keep it: a pinned file downloaded with pip and checked by its
sha256, a source archive unpacked without escaping its folder, and the lock that serialises set-up runs sharing
one cache.

Standard library only: it runs before any venv of the project exists."""

from __future__ import annotations

import os
import sys
import tarfile
from pathlib import Path

from setup_common import SetupError, sha256_file
from setup_procs import Log, run_checked

PIP_DOWNLOAD_TIMEOUT_S = 1800.0


def pip_download(args: list[str], dest: Path, what: str) -> None:
    run_checked([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--no-input",
                 "-d", str(dest), *args], f"download of {what}", PIP_DOWNLOAD_TIMEOUT_S)


def fetch_pinned(args: list[str], filename: str, sha: str, what: str, dest: Path, log: Log) -> Path:
    """``pip download ARGS`` into dest, and the file it saved, trusted only with the pinned sha256."""
    log(f"downloading {what} with pip ...")
    pip_download(args, dest, what)
    path = dest / filename
    if not path.is_file():
        got = ", ".join(sorted(p.name for p in dest.iterdir())) or "nothing"
        raise SetupError(f"download of {what} failed: expected {filename}, pip saved {got}")
    actual = sha256_file(path)
    if actual != sha:
        raise SetupError(f"sha256 mismatch for {filename}: expected {sha}, got {actual}")
    log(f"verified {filename} sha256={sha[:16]}...")
    return path


def safe_extract(tar: tarfile.TarFile, dest: Path, name: str) -> None:
    """Unpack ``tar`` (the archive ``name``) into dest; a member or link that points outside it is refused."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = dest.resolve()
    for m in tar.getmembers():
        target = (dest / m.name).resolve()
        if not str(target).startswith(str(root) + os.sep) and target != root:
            raise SetupError(f"refusing to unpack {name}: unsafe member {m.name}")
        if m.issym() or m.islnk():
            link = (target.parent / m.linkname).resolve()
            if not str(link).startswith(str(root) + os.sep):
                raise SetupError(f"refusing to unpack {name}: unsafe link {m.name}")
    tar.extractall(dest)


class CacheLock:
    """An exclusive flock on ``path`` for the set-up's run: a second run waits (and says so) until the first one
    is done with the cache."""

    def __init__(self, path: Path, log: Log):
        self.path = path
        self.log = log
        self.fd: int | None = None

    def __enter__(self) -> CacheLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl
        except ImportError:  # not POSIX: no locking
            return self
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.log(f"waiting for another setup run holding {self.path} ...")
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
            self.fd = None
