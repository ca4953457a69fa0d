"""What the judge follows besides the log: compiler runs in the process tree and the GPUs. Each tracker keeps its
own state and says what a sample meant (a progress mark, a busy-wait hint, a warning); the judge weighs that
against everything else (``firstlight.judge``)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from firstlight.assessment import Event, Evidence
from firstlight.timeline import GpuSample

# Compiler runs (torch.compile/Inductor, Triton, DeepGEMM and flashinfer JIT, nvcc) are evidence of a compile:
# strong progress, and reported as one aggregate, not a note per process.
COMPILERS = frozenset({"cc", "cc1", "cc1plus", "c++", "g++", "gcc", "clang", "clang++", "ld", "ld.lld", "ld.gold",
                       "collect2", "as", "nvcc", "ptxas", "cicc", "fatbinary", "nvlink", "ninja", "make"})
COMPILE_WINDOW_S = 60.0
_COMPILE_NOTE_EVERY_S = 30.0


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


class CompileTracker:
    """Compiler processes seen in the tree, counted over the last ``COMPILE_WINDOW_S``."""

    def __init__(self) -> None:
        self._runs: deque[tuple[float, str]] = deque(maxlen=4096)  # (t, name) of compiler runs seen
        self._noted = float("-inf")

    def ran(self, t: float, name: str) -> str:
        """One compiler run: what to quote as the latest progress."""
        self._runs.append((t, name))
        return f"compiler run ({name}): {self.runs(t)} in the last {COMPILE_WINDOW_S:.0f}s"

    def runs(self, now: float) -> int:
        return sum(1 for t, _ in self._runs if now - t <= COMPILE_WINDOW_S)

    def runs_between(self, t0: float, t1: float) -> int:
        return sum(1 for t, _ in self._runs if t0 <= t <= t1)

    def note(self, t: float) -> list[Event]:
        """One aggregate line about compiler children, at most every 30 s."""
        if not self._runs or t - self._noted < _COMPILE_NOTE_EVERY_S:
            return []
        self._noted = t
        n = self.runs(t)
        return [Event(t, "note", f"compiling: {n} compiler runs in the last {COMPILE_WINDOW_S:.0f}s",
                      {"compiler_runs": n})]


@dataclass
class GpuReading:
    """What one GPU sample meant: memory that moved (strong progress), utilisation (weak: a busy-wait looks the
    same), and GPUs held by processes outside the server's tree (warnings, each once)."""

    strong: str | None = None
    weak: str | None = None
    foreign: list[tuple[Evidence, dict[str, int]]] = field(default_factory=list)


class GpuTracker:
    def __init__(self, mem_step_bytes: int) -> None:
        self.mem_step_bytes = mem_step_bytes
        self.last: GpuSample | None = None
        self._prev: dict[int, int] = {}  # device -> memory used at the last step that counted
        self._util: deque[tuple[float, float]] = deque(maxlen=600)  # (t, mean utilisation)
        self._foreign_reported: set[tuple[int, int]] = set()

    def feed(self, g: GpuSample, tree: set[int]) -> GpuReading:
        r = GpuReading()
        for d in g.devices:
            before = self._prev.get(d.index)
            if before is not None and abs(d.memory_used - before) >= self.mem_step_bytes:
                r.strong = f"GPU {d.index} memory {gb(before)} -> {gb(d.memory_used)}"
                self._prev[d.index] = d.memory_used
            elif before is None:
                self._prev[d.index] = d.memory_used
            if d.utilization:
                r.weak = f"GPU {d.index} utilisation {d.utilization:.0f}%"
        utils = [d.utilization for d in g.devices if d.utilization is not None]
        if utils:
            self._util.append((g.t, sum(utils) / len(utils)))
        if tree:
            for gp in g.processes:
                key = (gp.gpu, gp.pid)
                if gp.pid not in tree and key not in self._foreign_reported:
                    self._foreign_reported.add(key)
                    mem = "" if gp.memory_used is None else f" ({gb(gp.memory_used)})"
                    ev = Evidence("gpu", f"GPU {gp.gpu} held by PID {gp.pid} {gp.name}{mem}, "
                                         f"outside the server's process tree", g.t)
                    r.foreign.append((ev, {"gpu": gp.gpu, "pid": gp.pid}))
        self.last = g
        return r

    def mean_util_between(self, t0: float, t1: float) -> float | None:
        gpu = [u for t, u in self._util if t0 <= t <= t1]
        return sum(gpu) / len(gpu) if gpu else None


__all__ = ["COMPILERS", "COMPILE_WINDOW_S", "CompileTracker", "GpuReading", "GpuTracker", "gb"]
