"""Real journal files for the tests, built at run time: Journal Export Format text piped into
``systemd-journal-remote --output=FILE.journal -`` (Debian package systemd-journal-remote), read back by the
real ``journalctl --file``. A second run on the same file appends to it, which ``journalctl -f`` sees.

Export format (systemd's JOURNAL_EXPORT_FORMATS): ``KEY=value`` lines, a blank line between entries; a value
that is not text (bytes that are not UTF-8, a newline, control characters) is written as ``KEY\\n``, its
length as a 64-bit little-endian integer, the bytes, and ``\\n``.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

JOURNAL_REMOTE_PATHS = ("/usr/lib/systemd/systemd-journal-remote", "/lib/systemd/systemd-journal-remote")
BOOT_ID = "6e3a5a0f2c4e4d4b9b1d3c2a1f0e9d8c"
MSG_STARTED = "39f53479d3a045ac8e11786248231fbf"
MSG_PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15"
MSG_FAILURE_RESULT = "d9b373ed55a64feb8242e02dbe79a49c"
MSG_RESTART_SCHEDULED = "5eb03494b6584870a536b337290809b3"


def journal_remote() -> str:
    """The systemd-journal-remote binary; fails in CI, skips elsewhere, when it is not installed."""
    found = shutil.which("systemd-journal-remote") or next(
        (p for p in JOURNAL_REMOTE_PATHS if os.access(p, os.X_OK)), None)
    if found is None:
        why = "systemd-journal-remote is not installed (apt-get install systemd-journal-remote)"
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail(f"in CI it must be there: {why}")
        pytest.skip(why)
    if shutil.which("journalctl") is None:
        why = "journalctl is not installed (it comes with systemd)"
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail(f"in CI it must be there: {why}")
        pytest.skip(why)
    return found


def _is_text(value: bytes) -> bool:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(ord(c) < 0x20 and c != "\t" for c in text)


def export_field(key: str, value: str | bytes | int) -> bytes:
    raw = value if isinstance(value, bytes) else str(value).encode()
    if _is_text(raw):
        return key.encode() + b"=" + raw + b"\n"
    return key.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"


def export_entry(fields: Iterable[tuple[str, str | bytes | int]]) -> bytes:
    return b"".join(export_field(k, v) for k, v in fields) + b"\n"


@dataclass
class UnitRun:
    """One invocation of a unit, as journald would have stored it: the engine's lines (stdout stream) and
    systemd's own messages about it."""

    unit: str
    t0: float  # Unix time of the first line
    invocation: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = 4242
    step: float = 0.01  # seconds between lines, when the lines carry no times of their own
    mono0: int = 5_000_000  # __MONOTONIC_TIMESTAMP of the first entry, microseconds
    out: bytearray = field(default_factory=bytearray)
    n: int = 0

    def _common(self, t: float) -> list[tuple[str, str | bytes | int]]:
        self.n += 1
        return [("__REALTIME_TIMESTAMP", int(t * 1e6)),
                ("__MONOTONIC_TIMESTAMP", self.mono0 + int((t - self.t0) * 1e6)), ("_BOOT_ID", BOOT_ID)]

    def line(self, message: str | bytes, t: float | None = None) -> float:
        """One line the engine wrote to stdout (journald's stdout transport)."""
        t = self.t0 + self.n * self.step if t is None else t
        name = Path(self.unit).stem
        self.out += export_entry([
            *self._common(t), ("PRIORITY", 6), ("SYSLOG_FACILITY", 3), ("SYSLOG_IDENTIFIER", name),
            ("_PID", self.pid), ("_UID", 0), ("_GID", 0), ("_COMM", name), ("_TRANSPORT", "stdout"),
            ("_STREAM_ID", self.invocation[:16] + "0" * 16), ("_SYSTEMD_CGROUP", f"/system.slice/{self.unit}"),
            ("_SYSTEMD_UNIT", self.unit), ("_SYSTEMD_SLICE", "system.slice"),
            ("_SYSTEMD_INVOCATION_ID", self.invocation), ("MESSAGE", message)])
        return t

    def lines(self, messages: Iterable[str | bytes]) -> None:
        for m in messages:
            self.line(m)

    def manager(self, message: str, message_id: str | None = None, t: float | None = None,
                **extra: str | int) -> None:
        """systemd's own message about the unit (PID 1, UNIT= and INVOCATION_ID=)."""
        t = self.t0 + self.n * self.step if t is None else t
        fields: list[tuple[str, str | bytes | int]] = [
            *self._common(t), ("PRIORITY", 6), ("SYSLOG_FACILITY", 3), ("SYSLOG_IDENTIFIER", "systemd"),
            ("_PID", 1), ("_UID", 0), ("_GID", 0), ("_COMM", "systemd"), ("_TRANSPORT", "journal"),
            ("_SYSTEMD_CGROUP", "/init.scope"), ("_SYSTEMD_UNIT", "init.scope"), ("_SYSTEMD_SLICE", "-.slice"),
            ("UNIT", self.unit), ("INVOCATION_ID", self.invocation), ("MESSAGE", message)]
        if message_id:
            fields.append(("MESSAGE_ID", message_id))
        fields += [(k, v) for k, v in extra.items()]
        self.out += export_entry(fields)

    def started(self) -> None:
        self.manager(f"Started {self.unit}.", MSG_STARTED, JOB_RESULT="done")

    def main_exited(self, status: int, restart: int | None = None) -> None:
        """``Main process exited, code=exited, status=N/...``, ``Failed with result``, and, for
        Restart=on-failure, ``Scheduled restart job``."""
        name = {1: "FAILURE"}.get(status, str(status))
        self.manager(f"{self.unit}: Main process exited, code=exited, status={status}/{name}", MSG_PROCESS_EXIT,
                     EXIT_CODE="exited", EXIT_STATUS=status, COMMAND="ExecStart")
        self.manager(f"{self.unit}: Failed with result 'exit-code'.", MSG_FAILURE_RESULT, UNIT_RESULT="exit-code")
        if restart is not None:
            self.manager(f"{self.unit}: Scheduled restart job, restart counter is at {restart}.",
                         MSG_RESTART_SCHEDULED, N_RESTARTS=restart)


def write_journal(path: Path, export: bytes) -> None:
    """Append entries to a journal file (created on the first call): a real systemd-journal-remote run."""
    p = subprocess.run([journal_remote(), f"--output={path}", "-"], input=bytes(export), capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
