"""Open only regular files: ``open()`` of a FIFO blocks until a writer comes, a device can block or never end.

A checkpoint shard, an index or a journal export named by a user may be any of these (or a hung NFS or FUSE
mount, which no check can see: the callers bound that with a deadline). ``stat`` first, refuse what is not a
regular file, then open with O_NONBLOCK so a file swapped for a FIFO between the two does not block either.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from firstlight.errors import FirstlightError

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class NotRegularFile(FirstlightError, OSError):
    """The path exists but is not a regular file (the message says what it is)."""


def kind(mode: int) -> str:
    """What a ``st_mode`` is, in words."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def regular_size(path: str | os.PathLike[str]) -> int:
    """The size of a regular file (following links); NotRegularFile for anything else."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(f"{Path(path).name} is {kind(st.st_mode)}, not a regular file")
    return st.st_size


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only; never blocks in ``open()`` on a FIFO or device."""
    regular_size(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # swapped after the stat
            raise NotRegularFile(f"{Path(path).name} is {kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def bounded_lines(f: BinaryIO, cap: int) -> Iterator[bytes]:
    """The lines of ``f`` (newline kept), each of at most ``cap`` bytes before its newline: a longer one is skipped
    whole, so a file
    without a newline (a sparse file, a hostile record) never becomes one huge line in memory."""
    skipping = False
    while True:
        line = f.readline(cap + 1)
        if not line:
            return
        complete = line.endswith(b"\n")
        if skipping:
            skipping = not complete
        elif not complete and len(line) > cap:
            skipping = True
        else:
            yield line
