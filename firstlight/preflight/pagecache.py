"""How much of a file already sits in the page cache, and how fast the rest reads.

Residency: ``cachestat(2)`` (Linux 6.5+) counts cached pages of a range in one call, however big the file;
older kernels fall back to ``mmap`` + ``mincore(2)`` over bounded windows. mincore reports every page as
resident for a file the caller could not open for writing (a side-channel guard since Linux 5.2), so the
fallback is used only for files we own or may write; otherwise residency is unknown (None).

The read-rate sample reads at most SAMPLE_BYTES for at most SAMPLE_S seconds from a part of a shard that is
neither cached nor a hole (SEEK_DATA), so the figure is the disk's, not memory's.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path

from firstlight.samplers.weights import weight_files

SYS_CACHESTAT = 451  # the same number on every architecture (added in Linux 6.5)
PAGE = mmap.PAGESIZE
MINCORE_WINDOW = 1 << 30  # bytes mapped at once by the mincore fallback
MINCORE_MAX_PAGES = 1 << 22  # pages examined per file by the fallback (16 GiB); beyond, sampled windows
SAMPLE_BYTES = 64 << 20
SAMPLE_S = 1.0
_CHUNK = 4 << 20
READ_AHEAD = 16 << 20  # more than the kernel reads ahead of a sequential reader


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64), ("nr_writeback", ctypes.c_uint64),
                ("nr_evicted", ctypes.c_uint64), ("nr_recently_evicted", ctypes.c_uint64)]


# The process's own symbols, libc's among them (ctypes.util.find_library runs ldconfig, a process, at import)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
_libc.syscall.restype = ctypes.c_long
_MAP_FAILED = ctypes.c_void_p(-1).value
_cachestat_works: bool | None = None
_LOW_BIT = bytes(b & 1 for b in range(256))


def _cachestat(fd: int, off: int, length: int) -> int | None:
    """Cached bytes in [off, off+length), or None when the kernel has no cachestat."""
    global _cachestat_works
    if _cachestat_works is False:
        return None
    rng, st = _Range(off, length), _Stat()
    rc = _libc.syscall(ctypes.c_long(SYS_CACHESTAT), ctypes.c_uint(fd), ctypes.byref(rng), ctypes.byref(st),
                       ctypes.c_uint(0))
    if rc != 0:
        if ctypes.get_errno() in (errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP):
            _cachestat_works = False
        return None
    _cachestat_works = True
    return int(st.nr_cache) * PAGE


def _mincore_window(fd: int, off: int, length: int) -> int | None:
    addr = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, off)
    if addr in (None, _MAP_FAILED):
        return None
    try:
        vec = ctypes.create_string_buffer((length + PAGE - 1) // PAGE)
        if _libc.mincore(addr, length, vec) != 0:
            return None
        resident = vec.raw.translate(_LOW_BIT).count(1)  # bit 0: resident; the others are reserved
    finally:
        _libc.munmap(addr, length)
    return resident * PAGE


def _mincore(fd: int, size: int) -> int | None:
    windows = list(range(0, size, MINCORE_WINDOW))
    sampled = size // PAGE > MINCORE_MAX_PAGES
    if sampled:  # evenly spaced windows of 64 MiB, scaled up
        step = max(1, len(windows) * MINCORE_WINDOW // (MINCORE_MAX_PAGES * PAGE))
        windows = windows[::step]
    seen = cached = 0
    for off in windows:
        length = min(MINCORE_WINDOW if not sampled else 64 << 20, size - off)
        got = _mincore_window(fd, off, length)
        if got is None:
            return None
        seen, cached = seen + length, cached + got
    if not sampled:
        return cached
    return int(cached * size / seen)  # sampled windows: at least one, so seen > 0


def cached_bytes(path: Path) -> int | None:
    """Bytes of ``path`` in the page cache; None when it cannot be known."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO swapped in: no block
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        got = _cachestat(fd, 0, size)
        if got is not None:
            return min(got, size)
        st = os.fstat(fd)
        if not (st.st_uid == os.geteuid() or os.geteuid() == 0 or os.access(path, os.W_OK)):
            return None  # mincore would claim every page resident
        got = _mincore(fd, size)
        return None if got is None else min(got, size)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ReadSample:
    path: Path
    offset: int
    bytes: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


def _uncached_data_offset(fd: int, size: int, window: int) -> int | None:
    """An offset where ``window`` bytes of real (not hole) data are (mostly) not in the page cache: the
    first of 16 evenly spaced candidates that qualifies."""
    last = size - window
    for k in range(16):
        start = last * k // 15
        try:
            data = os.lseek(fd, start, os.SEEK_DATA)
        except OSError:  # ENXIO: only holes from here on
            return None
        if data > last or data >= start + window:
            continue  # a hole at this candidate
        cached = _cachestat(fd, data, window)
        if cached is None or cached < window // 10:
            return data
    return None


def sample_read_rate(files: list[Path]) -> ReadSample | None:
    """Read up to SAMPLE_BYTES (a quarter of a small file; at most SAMPLE_S seconds) of uncached data from
    the first shard that has some."""
    buf = bytearray(_CHUNK)
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO swapped in: no block
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            window = min(SAMPLE_BYTES, size // 4)
            off = _uncached_data_offset(fd, size, window) if window >= 64 * PAGE else None
            if off is None:
                continue
            done, t0 = 0, time.monotonic()
            while done < window and time.monotonic() - t0 < SAMPLE_S:
                n = os.preadv(fd, [memoryview(buf)[: min(_CHUNK, window - done)]], off + done)
                if n <= 0:
                    break
                done += n
            took = time.monotonic() - t0
            # the window was uncached: evicting it (and the kernel's read-ahead past it) leaves the cache as the
            # start will find it, so the anatomy's residency at start is not this sample's
            os.posix_fadvise(fd, off, done + READ_AHEAD, os.POSIX_FADV_DONTNEED)
            return ReadSample(path, off, done, took)
        finally:
            os.close(fd)
    return None


def resident_bytes(path: Path) -> int | None:
    """Bytes of the weight files under ``path`` in the page cache (a file, or a checkpoint directory); None when
    any file's residency cannot be known."""
    total = 0
    for f in weight_files(path):  # a file is its own list
        got = cached_bytes(f)
        if got is None:
            return None
        total += got
    return total
