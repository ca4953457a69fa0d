"""Helpers shared by tests/e2e/units/test_cgroup.py, tests/unit/units/test_cgroup.py."""

from __future__ import annotations

from pathlib import Path

from firstlight.timeline import ProcessSample
from firstlight.units.cgroup import CgroupSampler


def _cgroup(tmp_path: Path, pids: list[int], memory: int | None = 7 << 30, rbytes: tuple[int, ...] = ()) -> Path:
    d = tmp_path / "sys" / "fs" / "cgroup" / "system.slice" / "llm.service"
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))
    if memory is not None:
        (d / "memory.current").write_text(f"{memory}\n")
    if rbytes:
        (d / "io.stat").write_text("".join(f"{259 + i}:0 rbytes={b} wbytes=4096 rios=12 wios=1 dbytes=0 dios=0\n"
                                           for i, b in enumerate(rbytes)))
    return d


def _sample(s: CgroupSampler) -> ProcessSample:
    return next(o for o in s.sample() if isinstance(o, ProcessSample))
