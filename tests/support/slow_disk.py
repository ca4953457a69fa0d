"""Real slow-disk faults: weights evicted from the page cache, and a disk made slow by the kernel's block throttle.

``evict`` writes a file's dirty pages back and drops them (``posix_fadvise(DONTNEED)``), as a reboot or memory
pressure would. ``Throttle`` is a cgroup whose reads from one block device the kernel holds to a rate (cgroup v1
``blkio.throttle.read_bps_device``, or v2 ``io.max``): a process put in it reads that device no faster, while
page-cache hits are not throttled, as with a real slow disk. It needs root and a block device under the path.
"""

from __future__ import annotations

import os
from pathlib import Path

from firstlight.preflight.disk import device_id
from firstlight.preflight.pagecache import cached_bytes


def evict(path: Path) -> int:
    """Drop ``path`` (a file, or each file of a directory) from the page cache; the bytes still resident after."""
    files = [f for f in path.iterdir() if f.is_file()] if path.is_dir() else [path]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)  # a fresh copy's pages are dirty: written back first, or DONTNEED keeps them
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return sum(cached_bytes(f) or 0 for f in files)


def whole_disk(device: str) -> str:
    """The throttle applies to whole disks: a partition's ``major:minor`` becomes its disk's."""
    sys_dev = Path("/sys/dev/block") / device
    if (sys_dev / "partition").exists():
        return (sys_dev.resolve().parent / "dev").read_text().strip()
    return device


def why_no_throttle(path: Path) -> str | None:
    """Why a throttle on the disk under ``path`` cannot be made here (None: it can)."""
    if os.geteuid() != 0:
        return "the block throttle needs root"
    if not (Path("/sys/dev/block") / device_id(path)).exists():
        return f"{path} is not on a block device ({device_id(path)})"
    if not Path("/sys/fs/cgroup/blkio").is_dir() and not Path("/sys/fs/cgroup/cgroup.subtree_control").exists():
        return "no blkio (v1) or io (v2) cgroup controller"
    return None


class Throttle:
    """A cgroup whose reads from the disk holding ``path`` are held to ``bps`` bytes a second."""

    def __init__(self, path: Path, bps: int) -> None:
        self.device = whole_disk(device_id(path))
        v1 = Path("/sys/fs/cgroup/blkio")
        if v1.is_dir():
            self.dir = v1 / f"firstlight-slow-disk-{os.getpid()}"
            self.dir.mkdir()
            (self.dir / "blkio.throttle.read_bps_device").write_text(f"{self.device} {bps}")
        else:
            root = Path("/sys/fs/cgroup")
            if "io" not in (root / "cgroup.subtree_control").read_text().split():
                (root / "cgroup.subtree_control").write_text("+io")
            self.dir = root / f"firstlight-slow-disk-{os.getpid()}"
            self.dir.mkdir()
            (self.dir / "io.max").write_text(f"{self.device} rbps={bps}")

    def enter(self) -> None:
        """In a child before exec (``preexec_fn``): it and all it starts read the disk at the throttled rate."""
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def close(self) -> None:
        """Remove the cgroup (its processes must have ended)."""
        self.dir.rmdir()

    def __enter__(self) -> Throttle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
