"""The local spool: a run the shared database did not take waits here, one JSON file per run named by its unique
id, until a later start of this node reaches the database and sends it (``INSERT ... ON CONFLICT DO NOTHING`` on
the id: a run sent, then sent again because its file outlived the send, is stored once).

A spooled run arrives whole: what the run adds after its record (its timeline, its serving changes) is added to
its file while it waits, and sent with it in the same transaction. The folder's lock (``.lock``) is held by a send
and by each addition, so that nothing is added to a file another process of the node is sending.

A file is written whole or not at all (a temporary file renamed into place), readable by its owner only. A
file that cannot be read is moved aside (``.bad``) with a warning and never blocks the others.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

MAX_SPOOLED = 10_000  # the oldest beyond this are dropped with a warning: a node cut off for months fills no disk


class Spool:
    """The runs waiting in ``folder`` for the database."""

    def __init__(self, folder: Path, warn: Callable[[str], None]) -> None:
        self.folder = folder
        self.warn = warn

    def keep(self, record: dict[str, Any]) -> Path:
        """Write one run (its ``uid`` names the file); OSError when the folder cannot be written."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        dest = self.folder / f"{record['uid']}.json"
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._trim()
        return dest

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The folder's lock, held by one process of the node at a time (OSError when it cannot be made)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.folder / ".lock", "a") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)

    def add(self, uid: str, change: Callable[[dict[str, Any]], None]) -> bool:
        """Under :meth:`locked`: ``change`` the waiting run ``uid`` and write it back whole; False when no run of
        that id waits here (sent already, or never spooled)."""
        path = self.folder / f"{uid}.json"
        try:
            was = path.stat()
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return False
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            return False  # damaged: the next send moves it aside
        if not isinstance(record, dict) or record.get("uid") != uid:
            return False
        change(record)
        self.keep(record)
        with contextlib.suppress(OSError):  # its place in the order it is sent in (the oldest first) is kept
            os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
        return True

    def waiting(self) -> list[tuple[Path, dict[str, Any]]]:
        """The spooled runs, oldest first; a damaged file is moved aside."""
        out = []
        try:
            files = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        except OSError:
            return []
        for path in files:
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(record, dict) or not isinstance(record.get("uid"), str):
                    raise ValueError("not a spooled run")
            except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
                self.warn(f"spooled run {path} cannot be read ({type(e).__name__}); moved to {path.name}.bad")
                with contextlib.suppress(OSError):
                    os.replace(path, path.with_name(path.name + ".bad"))
                continue
            out.append((path, record))
        return out

    def sent(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def _trim(self) -> None:
        with contextlib.suppress(OSError):
            files = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
            for old in files[: max(len(files) - MAX_SPOOLED, 0)]:
                self.warn(f"spool {self.folder} holds more than {MAX_SPOOLED} runs; dropped the oldest, {old.name}")
                old.unlink()


__all__ = ["MAX_SPOOLED", "Spool"]
