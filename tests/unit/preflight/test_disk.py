"""The disk measurement (``firstlight.preflight.disk``) in process, on real files on this machine's disk: what it
reads (uncached files of at least 1 MiB, the largest first, up to its byte bound), the rate it reports, the page
cache it leaves as it found it, even when it refuses to measure; the filesystem a path sits on, from real
mountinfo lines (proc(5)'s format, captured on this machine and on a Kubernetes node)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from firstlight.preflight import disk
from firstlight.preflight.pagecache import cached_bytes
from tests.support.slow_disk import evict

MIB = 1 << 20


def _uncached(path: Path, size: int) -> Path:
    """A file of ``size`` random bytes, written back and dropped from the page cache (its reads hit the disk)."""
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 8 * MIB)
            f.write(os.urandom(n))
            left -= n
    left_cached = evict(path)
    if left_cached:
        pytest.skip(f"the page cache keeps {left_cached} bytes of {path} after DONTNEED (this filesystem)")
    return path


def test_device_id_is_the_filesystems_major_and_minor(tmp_path: Path):
    st = os.stat(tmp_path)
    assert disk.device_id(tmp_path) == f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    assert disk.device_id("/proc") != disk.device_id(tmp_path)


# Captured: a container on a Kubernetes node (the weights on a hostPath, a volume name with a space as the kernel
# escapes it) and this machine's first lines.
MOUNTINFO = """\
9 1 0:3 not a mount line
22 27 0:21 / /proc rw,relatime - proc proc rw
1520 1400 0:230 / / rw,relatime master:612 - overlay overlay rw,lowerdir=/var/lib/l/1,upperdir=/var/lib/u
1530 1520 259:1 /var/lib/models /models rw,relatime - xfs /dev/nvme0n1p1 rw,attr2,inode64
1531 1530 259:2 / /models/llama rw,relatime - ext4 /dev/nvme1n1 rw
1532 1520 0:55 / /data\\040disk rw,relatime - nfs4 10.0.0.7:/export rw,vers=4.2
1533 1520 0:56 / /modelsx rw,relatime - tmpfs tmpfs rw
1534 1520 0:57 / /short rw,relatime
1535 1520 0:58 / /five - ext4 /dev/vdb rw
1536 1520 0:59 / /modelsX rw,relatime - tmpfs tmpfs rw
"""


@pytest.fixture
def mountinfo(tmp_path: Path) -> str:
    p = tmp_path / "mountinfo"
    p.write_text(MOUNTINFO)
    return str(p)


@pytest.mark.parametrize(("path", "mount"), [
    ("/models/llama/model-00001.safetensors", ("/models/llama", "ext4")),  # the longest mount holding it
    ("/models/qwen/config.json", ("/models", "xfs")),
    ("/models", ("/models", "xfs")),  # a mount point is inside itself
    ("/modelsx/a", ("/modelsx", "tmpfs")),
    ("/modelsy/a", ("/", "overlay")),  # /models is not a prefix of /modelsy: whole path components only
    ("/data disk/w.bin", ("/data disk", "nfs4")),  # the kernel writes a space as \040
    ("/short/x", ("/", "overlay")),  # a line without its " - " half is skipped
    ("/five/x", ("/five", "ext4")),  # five fields before " - " (no options) are enough
])
def test_the_mount_is_the_longest_mount_point_holding_the_path(mountinfo: str, path: str, mount: tuple[str, str]):
    assert disk.mount_of(path, mountinfo) == mount


def test_a_mountinfo_that_cannot_be_read_gives_the_root_and_no_type(tmp_path: Path):
    assert disk.mount_of("/models/x", str(tmp_path / "absent")) == ("/", "")


def test_a_path_under_no_listed_mount_is_the_roots_with_no_type(tmp_path: Path):
    p = tmp_path / "mountinfo"
    p.write_text("1530 1520 259:1 / /models rw - xfs /dev/nvme0n1p1 rw\n")
    assert disk.mount_of("/srv/x", str(p)) == ("/", "")


def test_bytes_that_are_not_utf8_in_mountinfo_do_not_stop_the_read(tmp_path: Path):
    p = tmp_path / "mountinfo"
    p.write_bytes(b"1520 1400 0:230 / / rw - overlay overlay rw\n"
                  b"1530 1520 0:55 / /caf\xe9 rw - nfs4 10.0.0.7:/x rw\n"  # a Latin-1 name
                  b"1531 1520 259:1 / /models rw - xfs /dev/nvme0n1p1 rw\n")
    assert disk.mount_of("/models/a", str(p)) == ("/models", "xfs")


def test_this_machines_proc_is_proc():
    assert disk.mount_of("/proc/self") == ("/proc", "proc")


def test_a_measurement_reads_the_uncached_files_and_leaves_the_cache_as_it_found_it(tmp_path: Path):
    big = _uncached(tmp_path / "big.bin", 40 * MIB)
    got = disk.measure(tmp_path)
    assert got["bytes"] == 40 * MIB
    assert got["seconds"] > 0  # the rate is of the uncached reads alone; seconds are kept to the millisecond
    assert got["rate"] * got["seconds"] == pytest.approx(got["bytes"], abs=got["rate"] * 0.0005 + 1)
    assert got["cache_rate"] > 0  # the same bytes again, from the page cache
    assert got["device"] == disk.device_id(tmp_path)
    assert (got["mount"], got["fstype"]) == disk.mount_of(tmp_path)
    assert cached_bytes(big) == 0


def test_cached_and_linked_files_are_not_measured(tmp_path: Path):
    a = _uncached(tmp_path / "a.bin", 36 * MIB)
    (tmp_path / "cached.bin").write_bytes(os.urandom(48 * MIB))  # in the page cache: it would measure memory
    (tmp_path / "link.bin").symlink_to(a)  # the same bytes twice
    assert disk.measure(tmp_path)["bytes"] == 36 * MIB
    assert cached_bytes(a) == 0


def test_files_under_1_mib_are_not_measured(tmp_path: Path):
    for i in range(20):
        _uncached(tmp_path / f"s{i}.bin", MIB - 1)  # the syscall's cost, not the disk's
    with pytest.raises(ValueError, match=r"\(0 MB\)"):
        disk.measure(tmp_path)
    _uncached(tmp_path / "one.bin", MIB)
    with pytest.raises(ValueError, match=r"\(1 MB\)"):
        disk.measure(tmp_path)


def test_the_byte_bound_stops_the_reads(tmp_path: Path):
    _uncached(tmp_path / "a.bin", 36 * MIB)
    _uncached(tmp_path / "b.bin", 34 * MIB)
    got = disk.measure(tmp_path, max_bytes=50 * MIB)
    assert got["bytes"] == 50 * MIB
    assert cached_bytes(tmp_path / "a.bin") == 0 and cached_bytes(tmp_path / "b.bin") == 0


def test_a_file_mostly_cached_is_skipped_but_a_tenth_cached_is_still_measured(tmp_path: Path):
    f = _uncached(tmp_path / "w.bin", 40 * MIB)
    with open(f, "rb") as fh:
        fh.read(2 * MIB)  # 5 %: read-ahead adds a little, still under a tenth
    before = cached_bytes(f) or 0
    assert 0 < before <= 4 * MIB
    got = disk.measure(f)
    assert got["bytes"] == 40 * MIB
    assert (cached_bytes(f) or 0) <= before  # what it had cached before may stay; nothing more


def test_too_little_uncached_data_is_refused_in_words_and_still_evicted(tmp_path: Path):
    f = _uncached(tmp_path / "w.bin", 8 * MIB)
    with pytest.raises(ValueError, match=r"too little uncached data under .* to measure \(8 MB\); evict it first"):
        disk.measure(tmp_path)
    assert cached_bytes(f) == 0
    with pytest.raises(ValueError, match=r"\(0 MB\)"):
        disk.measure(tmp_path / "w.bin", max_bytes=0)


def test_the_smallest_measurement_is_32_mib(tmp_path: Path):
    _uncached(tmp_path / "w.bin", 40 * MIB)
    assert disk.measure(tmp_path, max_bytes=disk.MIN_BYTES)["bytes"] == 32 * MIB
    evict(tmp_path / "w.bin")
    with pytest.raises(ValueError):
        disk.measure(tmp_path, max_bytes=disk.MIN_BYTES - 1)


def test_the_files_measured_are_the_regular_files_largest_first(tmp_path: Path):
    (tmp_path / "small.bin").write_bytes(b"x" * 10)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "big.bin").write_bytes(b"x" * 30)
    (tmp_path / "mid.bin").write_bytes(b"x" * 20)
    (tmp_path / "link.bin").symlink_to(tmp_path / "sub" / "big.bin")
    os.mkfifo(tmp_path / "fifo")
    assert disk._files(tmp_path) == [tmp_path / "sub" / "big.bin", tmp_path / "mid.bin", tmp_path / "small.bin"]
    assert disk._files(tmp_path / "mid.bin") == [tmp_path / "mid.bin"]


def test_a_file_is_read_to_its_last_byte(tmp_path: Path):
    _uncached(tmp_path / "w.bin", 32 * MIB + 1)  # four reads of 8 MiB, then one of a single byte
    assert disk.measure(tmp_path)["bytes"] == 32 * MIB + 1


def test_the_refusal_rounds_to_whole_megabytes(tmp_path: Path):
    _uncached(tmp_path / "w.bin", 1_500_000)
    with pytest.raises(ValueError, match=r"\(2 MB\)"):
        disk.measure(tmp_path)


def test_the_reported_times_are_the_measurements_own(tmp_path: Path):
    _uncached(tmp_path / "w.bin", 40 * MIB)
    t0 = time.monotonic()
    before = time.time()
    got = disk.measure(tmp_path)
    wall = time.monotonic() - t0
    assert 0 < got["seconds"] <= wall and got["seconds"] == round(got["seconds"], 3)
    assert 0 < got["bytes"] / got["cache_rate"] <= wall  # the page cache's read of the same bytes, within it too
    assert before <= got["measured_at"] <= time.time()


class _Ticks:
    """A monotonic clock that moves one millisecond each time it is read: each read of a chunk costs the same."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        self.now += 0.001
        return self.now

    def time(self) -> float:
        return time.time()

    def sleep(self, s: float) -> None:
        self.now += s


def test_the_rates_are_over_every_file_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(disk, "time", _Ticks())
    one = tmp_path / "one"
    one.mkdir()
    _uncached(one / "a.bin", 40 * MIB)
    single = disk.measure(one)
    two = tmp_path / "two"
    two.mkdir()
    _uncached(two / "a.bin", 40 * MIB)
    _uncached(two / "b.bin", 40 * MIB)
    double = disk.measure(two)
    assert double["bytes"] == 2 * single["bytes"]
    assert double["rate"] == pytest.approx(single["rate"], rel=1e-6)  # twice the bytes in twice the reads
    assert double["cache_rate"] == pytest.approx(single["cache_rate"], rel=0.2)


def test_eviction_checks_each_file_once_when_its_pages_are_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(4 * MIB))
    os.sync()  # written back: DONTNEED then drops every page
    checks: list[Path] = []
    real = disk.cached_bytes

    def counted(p: Path) -> int | None:
        checks.append(p)
        return real(p)

    monkeypatch.setattr(disk, "cached_bytes", counted)
    disk._evict([(f, 4 * MIB, 0)], time.monotonic() + 30)
    assert checks == [f] and real(f) == 0


def test_eviction_that_cannot_drop_the_pages_gives_up_at_its_bound(monkeypatch: pytest.MonkeyPatch):
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm here")
    f = shm / f"firstlight-test-{os.getpid()}.bin"
    f.write_bytes(os.urandom(MIB))  # tmpfs: its pages are the file, never dropped
    try:
        checks: list[Path] = []
        real = disk.cached_bytes
        monkeypatch.setattr(disk, "cached_bytes", lambda p: checks.append(p) or real(p))
        t0 = time.monotonic()
        disk._evict([(f, MIB, 0)], t0 + 0.3)
        assert time.monotonic() - t0 >= 0.3 and len(checks) >= 2  # tried again until its bound, then left it
    finally:
        f.unlink()
