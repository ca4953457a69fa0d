"""The device's sequential read rate, measured once per filesystem, and what a start's weights sit on.

``measure`` reads at most MAX_BYTES for at most MAX_S seconds of files under a path that are not in the page cache
(so the figure is the device's), reads the same bytes again (now cached: the page cache's rate), then evicts what it
read with ``posix_fadvise(DONTNEED)`` so the measurement leaves the cache as it found it. The anatomy compares a
start's read rate with this figure (``disk`` vs ``loader_cpu``), and the history keeps it per filesystem.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from firstlight.preflight.pagecache import READ_AHEAD, cached_bytes

MAX_BYTES = 2 << 30  # at most 2 GiB
MAX_S = 5.0  # and at most 5 s of reading
MIN_BYTES = 32 << 20  # less than this measures the syscall, not the device
_CHUNK = 8 << 20
EVICT_WAIT_S = 3.0  # read-ahead still in flight is not dropped until it lands: waited for this long at most


def device_id(path: str | Path) -> str:
    """``major:minor`` of the filesystem holding ``path`` (the history's key)."""
    st = os.stat(path)
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


def mount_of(path: str | Path, mountinfo: str = "/proc/self/mountinfo") -> tuple[str, str]:
    """(mount point, filesystem type) of ``path``, from ``mountinfo`` (proc(5)'s format; the longest matching
    mount)."""
    target = os.path.realpath(path)
    best, fstype = "/", ""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                pre, _, post = line.partition(" - ")
                fields = pre.split()
                if len(fields) < 5 or not post:
                    continue
                mnt = fields[4].replace("\\040", " ")
                inside = target == mnt or target.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best):
                    best, fstype = mnt, post.split()[0]
    except OSError:
        return best, ""
    return best, fstype


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    out = []
    for root, _, names in os.walk(path):
        for n in sorted(names):
            p = Path(root) / n
            if p.is_file() and not p.is_symlink():
                out.append(p)
    return sorted(out, key=lambda p: -p.stat().st_size)


def _read(fd: int, length: int, deadline: float, buf: bytearray) -> int:
    done = 0
    while done < length and time.monotonic() < deadline:
        n = os.preadv(fd, [memoryview(buf)[: min(_CHUNK, length - done)]], done)
        if n <= 0:
            break
        done += n
    return done


def _evict(read: list[tuple[Path, int, int]], until: float) -> None:
    """Leave the page cache as the measurement found it: drop what it read and the kernel's read-ahead past that,
    until each file holds no more than before (pages still being read in are not dropped until they land)."""
    left = read
    while left:
        for f, n, _ in left:
            fd = os.open(f, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, n + READ_AHEAD, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        left = [(f, n, before) for f, n, before in left if (cached_bytes(f) or 0) > before]
        if not left or time.monotonic() >= until:
            return
        time.sleep(0.05)


def measure(path: str | Path, max_bytes: int = MAX_BYTES, max_s: float = MAX_S) -> dict[str, Any]:
    """The filesystem's sequential read rate from uncached files under ``path`` (and the page cache's, re-reading
    them); raises ValueError when there is too little uncached data to measure."""
    path = Path(path)
    buf = bytearray(_CHUNK)
    read: list[tuple[Path, int, int]] = []  # (file, bytes read, bytes it had cached before)
    total, seconds = 0, 0.0
    deadline = time.monotonic() + max_s
    for f in _files(path):
        if total >= max_bytes or time.monotonic() >= deadline:
            break
        size = f.stat().st_size
        cached = cached_bytes(f)
        if size < (1 << 20) or cached is None or cached > size // 10:
            continue  # cached files measure memory; unknown residency could too
        fd = os.open(f, os.O_RDONLY)
        try:
            t0 = time.monotonic()
            n = _read(fd, min(size, max_bytes - total), deadline, buf)
            seconds += time.monotonic() - t0
        finally:
            os.close(fd)
        read.append((f, n, cached))
        total += n
    try:
        if total < MIN_BYTES or seconds <= 0:
            raise ValueError(f"too little uncached data under {path} to measure ({total / 1e6:.0f} MB); "
                             "evict it first or point at a larger directory")
        t0 = time.monotonic()
        again = 0
        for f, n, _ in read:  # the same bytes, now from the page cache
            fd = os.open(f, os.O_RDONLY)
            try:
                again += _read(fd, n, time.monotonic() + max_s, buf)
            finally:
                os.close(fd)
        cache_s = time.monotonic() - t0
    finally:
        _evict(read, time.monotonic() + EVICT_WAIT_S)
    mount, fstype = mount_of(path)
    return {"device": device_id(path), "mount": mount, "fstype": fstype, "rate": round(total / seconds),
            "cache_rate": round(again / cache_s) if cache_s > 0 else None, "bytes": total,
            "seconds": round(seconds, 3), "measured_at": time.time()}
