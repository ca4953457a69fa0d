"""Page-cache residency and the read-rate sample (``firstlight.preflight.pagecache``) at their edges, in process:
the mincore fallback's windows (all of a file up to 16 GiB of pages, evenly spaced 64 MiB windows scaled up
beyond), a residency never above the file's size, a file this user may not write (mincore would lie: unknown), a
checkpoint's total, and the sample's window and bounds. The kernel's real answers, both syscalls:
``tests/unit/preflight/test_preflight.py::test_page_cache_residency_follows_the_kernel``."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from firstlight.preflight import pagecache as pc

GiB, MiB = 1 << 30, 1 << 20


def _windows(monkeypatch: pytest.MonkeyPatch, answer: object = "half") -> list[tuple[int, int]]:
    asked: list[tuple[int, int]] = []

    def window(fd: int, off: int, length: int) -> int | None:
        asked.append((off, length))
        if answer == "half":
            return length // 2
        return answer  # type: ignore[return-value]

    monkeypatch.setattr(pc, "_mincore_window", window)
    return asked


def test_mincore_maps_a_file_of_up_to_16_gib_of_pages_whole_in_1_gib_windows(monkeypatch: pytest.MonkeyPatch):
    asked = _windows(monkeypatch)
    assert pc._mincore(7, 2 * GiB + 512 * MiB) == GiB + 256 * MiB
    assert asked == [(0, GiB), (GiB, GiB), (2 * GiB, 512 * MiB)]
    asked.clear()
    assert pc._mincore(7, pc.MINCORE_MAX_PAGES * pc.PAGE) == 8 * GiB  # exactly the bound: still whole
    assert len(asked) == 16 and asked[-1] == (15 * GiB, GiB)


def test_beyond_16_gib_evenly_spaced_64_mib_windows_are_scaled_to_the_size(monkeypatch: pytest.MonkeyPatch):
    asked = _windows(monkeypatch)
    size = 100 * GiB
    assert pc._mincore(7, size) == size // 2
    assert asked == [(k * GiB, 64 * MiB) for k in range(0, 100, 6)]  # every 6th GiB: about 16 GiB of pages
    asked.clear()
    _windows(monkeypatch, 64 * MiB)
    assert pc._mincore(7, size) == size  # every sampled page resident: the whole file


def test_a_window_that_cannot_be_mapped_makes_the_residency_unknown(monkeypatch: pytest.MonkeyPatch):
    _windows(monkeypatch, None)
    assert pc._mincore(7, 3 * GiB) is None and pc._mincore(7, 100 * GiB) is None


def test_residency_is_never_above_the_files_size(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 5000)  # a page and a bit: whole pages cached are more bytes than the file has
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 2 * pc.PAGE)
    assert pc.cached_bytes(f) == 5000
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: None)
    _windows(monkeypatch, 2 * pc.PAGE)
    assert pc.cached_bytes(f) == 5000
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert pc.cached_bytes(empty) == 0 and pc.cached_bytes(tmp_path / "absent") is None


def test_without_cachestat_a_file_this_user_may_not_write_is_unknown(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 8192)
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: None)
    asked = _windows(monkeypatch, 4096)
    monkeypatch.setattr(pc.os, "geteuid", lambda: os.stat(f).st_uid + 1)  # neither its owner nor root
    monkeypatch.setattr(pc.os, "access", lambda path, mode: False)
    assert pc.cached_bytes(f) is None and asked == []  # mincore would claim every page resident
    monkeypatch.setattr(pc.os, "access", lambda path, mode: mode == os.W_OK)
    assert pc.cached_bytes(f) == 4096  # may write it: mincore tells the truth
    monkeypatch.setattr(pc.os, "access", lambda path, mode: False)
    monkeypatch.setattr(pc.os, "geteuid", lambda: 0)
    assert pc.cached_bytes(f) == 4096  # root


def test_a_checkpoints_residency_is_its_weight_files_and_unknown_if_one_is(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path):
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (tmp_path / name).write_bytes(b"x" * 10)
    (tmp_path / "README.md").write_bytes(b"x" * 1000)
    known = {"model-00001-of-00002.safetensors": 4, "model-00002-of-00002.safetensors": 6}
    monkeypatch.setattr(pc, "cached_bytes", lambda f: known.get(f.name))
    assert pc.resident_bytes(tmp_path) == 10
    assert pc.resident_bytes(tmp_path / "model-00002-of-00002.safetensors") == 6
    known["model-00002-of-00002.safetensors"] = None  # type: ignore[assignment]
    assert pc.resident_bytes(tmp_path) is None


def test_the_sample_reads_a_quarter_of_a_small_file_and_skips_too_small_ones(monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path):
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * (64 * pc.PAGE * 4 - 1))  # a quarter under 64 pages: nothing worth timing
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(4 * MiB))
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 0)  # nothing cached
    sample = pc.sample_read_rate([tmp_path / "absent.bin", small, big])
    assert sample is not None and sample.path == big and sample.bytes == MiB and sample.offset == 0
    assert sample.seconds >= 0 and pc.ReadSample(big, 0, 10, 0.0).rate == 0.0
    assert pc.ReadSample(big, 0, 10, 2.0).rate == 5.0
    assert (64 * MiB, 1.0) == (pc.SAMPLE_BYTES, pc.SAMPLE_S)


def test_a_cached_file_is_not_sampled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    f = tmp_path / "big.bin"
    f.write_bytes(os.urandom(4 * MiB))
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: n)  # every window cached
    assert pc.sample_read_rate([f]) is None
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: n // 10)  # a tenth cached: still the disk's
    assert pc.sample_read_rate([f]) is None
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: n // 10 - 1)
    assert pc.sample_read_rate([f]) is not None


def test_the_candidates_are_16_evenly_spaced_offsets_past_holes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    f = tmp_path / "sparse.bin"
    with f.open("wb") as out:
        out.truncate(16 * MiB)
        out.seek(12 * MiB)
        out.write(os.urandom(MiB))  # the only data: 12-13 MiB
    asked: list[int] = []

    def cachestat(fd: int, off: int, n: int) -> int:
        asked.append(off)
        return 0

    monkeypatch.setattr(pc, "_cachestat", cachestat)
    fd = os.open(f, os.O_RDONLY)
    try:
        if os.lseek(fd, 0, os.SEEK_DATA) != 12 * MiB:
            pytest.skip("this filesystem does not report holes (SEEK_DATA)")
        assert pc._uncached_data_offset(fd, 16 * MiB, MiB) == 12 * MiB
    finally:
        os.close(fd)
    assert asked == [12 * MiB]


def _kernel_has_cachestat() -> bool:
    release = os.uname().release.split("-")[0].split(".")
    return tuple(int(x) for x in release[:2] if x.isdigit()) >= (6, 5)


def test_cachestat_counts_a_files_cached_pages_and_none_once_evicted(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pc, "_cachestat_works", None)
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(64 * pc.PAGE))
    fd = os.open(f, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.read(fd, 64 * pc.PAGE)
        if not _kernel_has_cachestat():  # told by the kernel's version, not by the code under test
            pytest.skip("this kernel has no cachestat(2) (Linux 6.5+)")
        got = pc._cachestat(fd, 0, 64 * pc.PAGE)
        assert got == 64 * pc.PAGE and pc._cachestat_works is True
        assert pc._cachestat(fd, 16 * pc.PAGE, 8 * pc.PAGE) == 8 * pc.PAGE  # the range asked, not the file
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert pc._cachestat(fd, 0, 64 * pc.PAGE) == 0
    finally:
        os.close(fd)


def test_a_kernel_without_cachestat_is_asked_once(monkeypatch: pytest.MonkeyPatch):
    import ctypes
    import errno

    calls: list[int] = []

    class NoCachestat:
        def syscall(self, *args: object) -> int:
            calls.append(1)
            ctypes.set_errno(errno.ENOSYS)
            return -1

    monkeypatch.setattr(pc, "_libc", NoCachestat())
    monkeypatch.setattr(pc, "_cachestat_works", None)
    assert pc._cachestat(0, 0, 4096) is None and pc._cachestat_works is False
    assert pc._cachestat(0, 0, 4096) is None and calls == [1]  # never asked again

    class Busy(NoCachestat):
        def syscall(self, *args: object) -> int:
            calls.append(2)
            ctypes.set_errno(errno.EBADF)  # this call failed, not the syscall
            return -1

    monkeypatch.setattr(pc, "_libc", Busy())
    monkeypatch.setattr(pc, "_cachestat_works", None)
    assert pc._cachestat(0, 0, 4096) is None and pc._cachestat_works is None
    assert pc._cachestat(0, 0, 4096) is None and calls == [1, 2, 2]  # asked again next time


def test_a_fifo_in_place_of_a_weight_file_never_blocks_the_check(tmp_path: Path):
    """A file swapped for a FIFO with no writer: opened without blocking, and it holds nothing in the cache."""
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    assert pc.cached_bytes(fifo) == 0
    assert pc.sample_read_rate([fifo]) is None


def _read_all(f: Path) -> None:
    with f.open("rb") as src:
        while src.read(MiB):
            pass


def _mapped(f: Path) -> bool:
    return str(f) in Path("/proc/self/maps").read_text()


def test_a_mincore_window_counts_every_resident_page_of_a_real_file_and_unmaps_it(tmp_path: Path):
    f = tmp_path / "w.bin"
    length = 10 * pc.PAGE + 1  # a last page holding one byte is a page of its own
    f.write_bytes(os.urandom(length))
    fd = os.open(f, os.O_RDONLY)
    try:
        os.fsync(fd)
        _read_all(f)
        assert pc._mincore_window(fd, 0, length) == 11 * pc.PAGE
        assert not _mapped(f)  # the window is unmapped again: a 1 GiB mapping per window would pile up
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert pc._mincore_window(fd, 0, length) == 0
    finally:
        os.close(fd)


def test_a_mincore_window_reads_only_the_resident_bit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """mincore(2): bit 0 of each byte is the page's residency, the other bits are reserved and may be set."""
    real = pc._libc

    class ReservedBitsSet:
        mmap, munmap = real.mmap, real.munmap

        def mincore(self, addr: int, length: int, vec: object) -> int:
            rc = int(real.mincore(addr, length, vec))
            buf = vec.raw  # type: ignore[attr-defined]
            vec.raw = bytes(b | 0b110 for b in buf)  # type: ignore[attr-defined]
            return rc

    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(8 * pc.PAGE))
    fd = os.open(f, os.O_RDONLY)
    try:
        os.fsync(fd)
        _read_all(f)
        monkeypatch.setattr(pc, "_libc", ReservedBitsSet())
        cached = pc._mincore_window(fd, 0, 8 * pc.PAGE)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        evicted = pc._mincore_window(fd, 0, 8 * pc.PAGE)
    finally:
        os.close(fd)
    assert (cached, evicted) == (8 * pc.PAGE, 0)


def test_one_byte_past_16_gib_of_pages_is_still_mapped_whole(monkeypatch: pytest.MonkeyPatch):
    asked = _windows(monkeypatch)
    size = pc.MINCORE_MAX_PAGES * pc.PAGE + 1  # 16 GiB and a byte: the pages counted are still the bound
    pc._mincore(7, size)
    assert asked == [(k * GiB, GiB) for k in range(16)] + [(16 * GiB, 1)]  # whole windows, not samples


def test_just_past_the_bound_every_window_is_sampled(monkeypatch: pytest.MonkeyPatch):
    asked = _windows(monkeypatch)
    assert pc._mincore(7, 17 * GiB) == 17 * GiB // 2
    assert asked == [(k * GiB, 64 * MiB) for k in range(17)]  # 17 windows of 64 MiB: about 1 GiB of pages


def test_without_cachestat_an_unmappable_file_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 8192)
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: None)
    _windows(monkeypatch, None)
    assert pc.cached_bytes(f) is None


def test_with_cachestat_mincore_is_never_mapped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 8192)
    asked = _windows(monkeypatch)
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 4096)
    assert pc.cached_bytes(f) == 4096 and asked == []


def test_a_one_byte_file_in_the_cache_is_one_byte(tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x")
    _read_all(f)
    assert pc.cached_bytes(f) == 1


def test_without_cachestat_the_owner_may_use_mincore_without_write_access(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 8192)
    if os.geteuid() == 0:  # an owner that is not root, "become" that user below
        os.chown(f, 12345, 12345)
    owner = os.stat(f).st_uid
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: None)
    _windows(monkeypatch, 4096)
    monkeypatch.setattr(pc.os, "geteuid", lambda: owner)
    monkeypatch.setattr(pc.os, "access", lambda path, mode: False)
    assert pc.cached_bytes(f) == 4096  # its owner: mincore tells the truth
    monkeypatch.setattr(pc.os, "geteuid", lambda: owner + 1)
    monkeypatch.setattr(pc.os, "access", lambda path, mode: Path(path) == f and mode == os.W_OK)
    assert pc.cached_bytes(f) == 4096  # not its owner, but may write this very file


def _sparse(f: Path, size: int, data: tuple[int, int]) -> bool:
    """A file of ``size`` bytes whose only data is [data); False where the filesystem reports no holes."""
    with f.open("wb") as out:
        out.truncate(size)
        out.seek(data[0])
        out.write(os.urandom(data[1] - data[0]))
    fd = os.open(f, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_DATA) == data[0]
    finally:
        os.close(fd)


def _offset(f: Path, size: int, window: int) -> int | None:
    fd = os.open(f, os.O_RDONLY)
    try:
        return pc._uncached_data_offset(fd, size, window)
    finally:
        os.close(fd)


def test_the_last_candidate_is_the_last_full_window(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(16 * MiB))
    last = 15 * MiB
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 0 if off == last else n)  # all cached but the end
    assert _offset(f, 16 * MiB, MiB) == last


def test_data_that_starts_exactly_at_the_last_full_window_is_a_candidate(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path):
    f = tmp_path / "w.bin"
    if not _sparse(f, 16 * MiB, (15 * MiB, 16 * MiB)):
        pytest.skip("this filesystem does not report holes (SEEK_DATA)")
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 0)
    assert _offset(f, 16 * MiB, MiB) == 15 * MiB


def test_data_after_the_last_full_window_is_no_candidate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A window starting there would run past the end of the file."""
    f = tmp_path / "w.bin"
    if not _sparse(f, 16 * MiB, (15 * MiB + 512 * 1024, 16 * MiB)):
        pytest.skip("this filesystem does not report holes (SEEK_DATA)")
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 0)
    assert _offset(f, 16 * MiB, MiB) is None


def test_a_file_whose_quarter_is_exactly_64_pages_is_sampled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(64 * pc.PAGE * 4))
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 0)
    sample = pc.sample_read_rate([f])
    assert sample is not None and sample.bytes == 64 * pc.PAGE


def _clock(monkeypatch: pytest.MonkeyPatch, step: float) -> None:
    """The sample's clock: ``step`` seconds per reading, from ``step`` (a duration is a difference of two readings,
    so the first is not 0)."""
    ticks = iter(range(1, 10_000))
    monkeypatch.setattr(pc, "time", SimpleNamespace(monotonic=lambda: next(ticks) * step))  # this module's only


class _Reads:
    """os.preadv recorded: (offset, bytes asked, bytes read) of each read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, before: object = None) -> None:
        self.calls: list[tuple[int, int, int]] = []
        real = os.preadv

        def preadv(fd: int, bufs: list[memoryview], off: int) -> int:
            if before is not None:
                before(fd)  # type: ignore[operator]
            n = real(fd, bufs, off)
            self.calls.append((off, len(bufs[0]), n))
            return n

        monkeypatch.setattr(pc.os, "preadv", preadv)


def test_the_sample_reads_its_window_once_in_order_in_4_mib_chunks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(40 * MiB))  # a quarter: 10 MiB
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 0)
    _clock(monkeypatch, 0.01)  # a fast disk, whatever else this machine is doing
    reads = _Reads(monkeypatch)
    sample = pc.sample_read_rate([f])
    assert sample is not None and (sample.offset, sample.bytes) == (0, 10 * MiB)
    assert reads.calls == [(0, 4 * MiB, 4 * MiB), (4 * MiB, 4 * MiB, 4 * MiB), (8 * MiB, 2 * MiB, 2 * MiB)]


def test_the_sample_stops_at_its_time_bound(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A disk that takes half a second per chunk: two chunks' worth of time is the bound, so one read is timed."""
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(40 * MiB))
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 0)
    _clock(monkeypatch, pc.SAMPLE_S / 2)
    reads = _Reads(monkeypatch)
    sample = pc.sample_read_rate([f])
    assert len(reads.calls) == 1  # t0 = 0, read at 0.5 s, stop at 1.0 s (the bound: not one more)
    assert sample is not None and (sample.bytes, sample.seconds) == (4 * MiB, 1.5 * pc.SAMPLE_S)


def test_a_file_truncated_under_the_sample_ends_it_with_what_was_read(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(40 * MiB))
    monkeypatch.setattr(pc, "_cachestat", lambda fd, off, n: 0)
    _clock(monkeypatch, 0.01)
    reads = _Reads(monkeypatch, before=lambda fd: os.truncate(f, 1))  # one byte left
    sample = pc.sample_read_rate([f])
    assert sample is not None and sample.bytes == 1 and sample.seconds == pytest.approx(0.03)
    assert [n for _, _, n in reads.calls] == [1, 0]  # the end of the file read once, not until the time bound
