"""Running ``journalctl``: its command line, finding it, and reading a unit's entries from it with every line
and its error output bounded."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from firstlight.files import open_regular

from .entries import JournalEntry, JournalError, parse_line

JOURNAL_MAGIC = b"LPKSHHRH"  # the first bytes of a journal file (systemd's journal-def.h)
MAX_ENTRY_BYTES = 16 << 20  # one JSON entry; a longer one is skipped (with a note), memory stays bounded
STDERR_KEEP = 4096


def is_journal_file(path: Path) -> bool:
    """A binary journal file (else: a saved ``journalctl -o json`` dump)."""
    with open_regular(path) as f:  # a FIFO or a device is refused, never waited on in open()
        return f.read(len(JOURNAL_MAGIC)) == JOURNAL_MAGIC


def journalctl_argv(unit: str, journal_file: Path | None = None, *, follow: bool = False,
                    since: float | None = None, after_cursor: str | None = None,
                    output_fields: Iterable[str] = (), journalctl: str = "journalctl") -> list[str]:
    """``journalctl [--file F] --unit=UNIT -o json --all ...``. ``--file`` gets an absolute path: journalctl 252
    cannot follow (``-f``) a bare file name ("Failed to get journal fd: Destination address required")."""
    argv = [journalctl]
    if journal_file is not None:
        argv += ["--file", str(Path(journal_file).resolve())]
    argv += [f"--unit={unit}", "-o", "json", "--all", "--no-pager", "-q"]  # one word: never read as an option
    if follow:
        argv += ["-f", "--no-tail"]
    if after_cursor:
        argv += ["--after-cursor", after_cursor]
    elif since is not None:
        argv += ["--since", f"@{since:.6f}"]
    fields = list(output_fields)
    if fields:
        argv += ["--output-fields", ",".join(fields)]
    return argv


def find_journalctl(journalctl: str = "journalctl") -> str:
    found = shutil.which(journalctl)
    if found is None:
        raise JournalError(f"{journalctl} not found (it comes with systemd: apt-get install systemd)")
    return found


def bounded_lines(stream: IO[bytes], on_long: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """Lines of a pipe, each at most MAX_ENTRY_BYTES (a longer one is skipped whole): memory stays bounded."""
    fd = stream.fileno()
    buf = bytearray()
    skipping = 0
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            return
        if not data:
            return
        buf += data
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            if skipping:
                if on_long is not None:
                    on_long(skipping + nl - start)
                skipping = 0
            else:
                yield bytes(buf[start:nl])
            start = nl + 1
        del buf[:start]
        if len(buf) > MAX_ENTRY_BYTES:
            skipping += len(buf)
            buf.clear()


def stderr_tail(f: IO[bytes]) -> str:
    f.seek(0)
    text = f.read()[-STDERR_KEEP:].decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else ""


def read_entries(journal_file: Path | None, unit: str, *, since: float | None = None,
                 output_fields: Iterable[str] = (), journalctl: str = "journalctl") -> Iterator[JournalEntry]:
    """The unit's entries now in the journal (or in a file: a journal file, or a ``journalctl -o json``
    dump), in journal order, streamed."""
    if journal_file is not None and not is_journal_file(journal_file):
        with open_regular(journal_file) as f:
            for raw in bounded_lines(f):
                e = parse_line(raw)
                if e is not None and e.invocation_for(unit) is not None and (since is None or e.t >= since):
                    yield e
        return
    argv = journalctl_argv(unit, journal_file, since=since, output_fields=output_fields,
                           journalctl=find_journalctl(journalctl))
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            for raw in bounded_lines(proc.stdout):
                e = parse_line(raw)
                if e is not None:
                    yield e
        finally:
            proc.stdout.close()
            if proc.poll() is None:
                proc.terminate()
            rc = proc.wait(timeout=10)
        if rc != 0:
            raise JournalError(f"journalctl could not read the journal: {stderr_tail(err) or f'exit {rc}'}")
