"""The anatomy of a start: where the time went, what bound each phase, and what would cut it.

One function (:func:`anatomy`) over the judge's phases and the compact signal series it keeps (:class:`Signals`,
fed by the judge with the same observations it judges), so the anatomy is the same live, in ``replay``, in the
report and from the history. Pure: no clocks, no I/O.

Bounds (each with its numbers):
- weights: ``download`` (the engine's download lines), ``network_fs`` (the mount type), ``page_cache`` (most of the
  weights resident at start), ``loader_cpu`` (reads below the device's rate while one thread is at ~100 % of a core),
  ``disk`` (reads moved);
- compile: ``compile`` with the engine's own cache hit/miss lines, compiler runs and their CPU;
- any phase: ``cpu``, ``reads``, ``log`` (the signal that moved most), or ``idle`` when no measured signal moved
  (a line alone is a moment; lines less than IDLE_MIN_S apart keep a phase busy).
  Without process samples (a log replay) a silent stretch is ``unmeasured``, never ``idle``.
"""

from __future__ import annotations

import itertools
import shlex
from dataclasses import dataclass, field
from typing import Any

from firstlight.budgets import QuietTracker
from firstlight.formats import mbps as _mbps
from firstlight.logtext import one_line
from firstlight.timeline import EngineClock, LogLine, ProcessSample, WeightsTotal

__all__ = ["CLOCK_DIFF_S", "CLOCK_DIFF_SHARE", "NETWORK_FS", "RESIDENT_WARM", "WHOLE", "Signals", "anatomy",
           "clock_differs", "compare", "compare_clocks", "resident_share", "warm_page_cache"]

NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "fuse.s3fs", "fuse.gcsfuse",
                        "fuse.juicefs", "lustre", "gpfs", "ceph", "fuse.ceph", "glusterfs", "fuse.glusterfs",
                        "beegfs", "virtiofs", "fuse.rclone", "fuse.mountpoint-s3", "fuse.blobfuse"})
MAX_POINTS = 20000  # one process sample a tick: hours of a start, a few hundred kB
HOT_THREAD = 0.8  # share of samples with the busiest thread runnable: a thread at ~100 % of a core (or queued for one)
DISK_SHARE = 0.5  # reads at >= half the device's measured rate: the disk is the bound
RESIDENT_WARM = 0.9  # >= 90 % of the weights in the page cache at start: read from memory
IDLE_MIN_S = 2.0  # shorter silent stretches are sampling gaps, not idle
IDLE_CPU = 0.05  # cores: below this the tree did nothing
# bytes/s: below this the reads are a sleeping process's small read() calls (a pipe, a poll), not work; counted at
# any size, one such call made a whole backed-off sample gap (up to 4 s) "moved" and an idle phase "reads"
IDLE_READ_BPS = 64 * 1024
BACKED_OFF = 1.5  # a sample gap this many times the next one's: the sampler had backed off (it doubles its gap)
_NO_CLOCK = 1e3  # epoch seconds below this: a line without a timestamp of its own
_COMPILE_PHASES = ("compile",)
_WEIGHT_PHASES = ("weights_loading",)


def resident_share(w: WeightsTotal | None) -> float | None:
    """The share of the weights that was in the page cache as the server started; None: not measured."""
    return (w.resident / w.bytes) if w is not None and w.resident is not None and w.bytes else None


def warm_page_cache(resident: float) -> bool:
    """The one rule for "warm vs cold": the weights were read from memory, not storage (the weights phase's
    bound, the start type, the ETA's type before the engine says more)."""
    return resident >= RESIDENT_WARM


_Point = tuple[float, int, float, float | None, str, str]  # t, read bytes, CPU s, busiest thread: cores, name, state


@dataclass
class Signals:
    """What the anatomy needs from a start's observations, kept small: (t, read bytes, CPU s, busiest thread)
    per process sample, log-line times, the engine's compile-cache lines and compiler runs."""

    points: list[_Point] = field(default_factory=list)
    log_times: list[float] = field(default_factory=list)
    compile_lines: list[tuple[float, str, float | None, str]] = field(default_factory=list)  # t, state, s, text
    compiler_cpu: float = 0.0  # CPU seconds of compiler children that finished
    compiler_runs: int = 0
    downloads: list[float] = field(default_factory=list)  # times of download progress lines
    hub: list[tuple[float, int]] = field(default_factory=list)  # the hub cache's growth: t, bytes arrived then
    weights: WeightsTotal | None = None
    clocks: list[EngineClock] = field(default_factory=list)  # the engine's own figures (compare_clocks)
    peer_lines: list[tuple[float, str]] = field(default_factory=list)  # the engine's peer-load lines: t, text
    wake_lines: list[tuple[float, str]] = field(default_factory=list)  # ... that it woke from sleep
    compile_key: dict[str, str] = field(default_factory=dict)  # its compile cache's key: key, env, cfg, comp, code
    engine_version: tuple[float, str] | None = None  # t, the version its log says
    # per phase, the longest silence of strong progress, of any progress and of each signal (the judge feeds it)
    quiet: QuietTracker = field(default_factory=QuietTracker)

    def feed(self, obs: Any) -> None:
        if isinstance(obs, ProcessSample) and obs.alive and len(self.points) < MAX_POINTS:
            self.points.append((obs.t, obs.read_bytes, obs.cpu_seconds, obs.thread_top, obs.thread_top_name,
                                obs.thread_top_state))
        elif isinstance(obs, LogLine) and obs.final and len(self.log_times) < MAX_POINTS:
            self.log_times.append(obs.t)
        elif isinstance(obs, WeightsTotal):
            self.weights = obs
        elif isinstance(obs, EngineClock):
            self.engine_clock(obs)

    def engine_clock(self, obs: EngineClock) -> None:
        if len(self.clocks) < 64:
            self.clocks.append(obs)

    def compile_line(self, t: float, state: str, seconds: float | None, text: str) -> None:
        if len(self.compile_lines) < 64:
            self.compile_lines.append((t, state, seconds, text[:200]))

    def start_line(self, t: float, kind: str, value: str) -> None:
        if kind == "version" and self.engine_version is None:
            self.engine_version = (t, value[:80])
        elif kind == "compile_key":
            for part in value.split():
                name, _, v = part.partition("=")
                self.compile_key.setdefault(name, v[:64])  # the first said: rank 0's, as the cache is shared
        else:
            lines = {"peer": self.peer_lines, "woken": self.wake_lines}.get(kind)
            if lines is not None and len(lines) < 8:
                lines.append((t, value[:200]))

    def compiler_ran(self, cpu_seconds: float) -> None:
        self.compiler_runs += 1
        self.compiler_cpu += cpu_seconds


def _r(x: float | None, n: int = 3) -> float | None:
    return None if x is None else round(x, n)


@dataclass
class _Window:
    """The signals over one stretch [t0, t1]."""

    seconds: float
    read: int
    cpu: float
    thread_top: float | None  # the median tick's busiest thread, in cores
    thread_name: str
    runnable: float | None  # share of ticks whose busiest thread was runnable (R): CPU-bound, however loaded
    logs: int
    measured: bool
    busy_s: float  # seconds in which CPU or reads moved, or log lines came less than IDLE_MIN_S apart
    idle: list[tuple[float, float]]
    sampled: bool = True  # the start had process samples (False: a log replay)

    @property
    def read_rate(self) -> float | None:
        return self.read / self.seconds if self.measured and self.seconds > 0 else None

    @property
    def cores(self) -> float | None:
        return self.cpu / self.seconds if self.measured and self.seconds > 0 else None


def _window(sig: Signals, t0: float, t1: float) -> _Window:
    pts = [p for p in sig.points if t0 <= p[0] <= t1]
    before = [p for p in sig.points if p[0] < t0]
    if before and not (pts and pts[0][0] == t0):  # counted from the last sample before, or one right at t0
        pts.insert(0, before[-1])
    after = next((p for p in sig.points if p[0] > t1), None)  # times the window's last movement
    logs = sorted(t for t in sig.log_times if t0 <= t < t1)
    seconds = max(t1 - t0, 0.0)
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return _Window(seconds, 0, 0.0, None, "", None, len(logs), False, 0.0, [], sampled=bool(sig.points))
    read = max(pts[-1][1] - pts[0][1], 0)
    cpu = max(pts[-1][2] - pts[0][2], 0.0)
    ticks = [p for p in pts[1:] if p[3] is not None]
    top = sorted(p[3] for p in ticks)[len(ticks) // 2] if ticks else None  # type: ignore[type-var]
    busy_ticks = [p for p in ticks if p[5] == "R" and (p[3] or 0) > 0]
    runnable = len(busy_ticks) / len(ticks) if ticks else None
    names = [p[4] for p in busy_ticks]
    name = max(dict.fromkeys(names), key=names.count) if names else ""  # a tie: the first busy (not hash order)
    idle: list[tuple[float, float]] = []
    spans: list[tuple[float, float]] = []  # when CPU or reads moved, and runs of lines each within IDLE_MIN_S
    run_start: float | None = None
    li = 0
    for i, (a, b) in enumerate(itertools.pairwise(pts)):
        moved = _moved(a, b)
        lo, hi = max(a[0], t0), min(b[0], t1)
        if moved:
            spans.append((max(lo, hi - _moving_s(a, b, pts[i + 2] if i + 2 < len(pts) else after)), hi))
            if run_start is not None and lo - run_start >= IDLE_MIN_S:
                idle.append((run_start, lo))
            run_start = None
        elif run_start is None:
            run_start = lo
        # A line is a moment's activity: it ends a silent stretch where it was written but does not make the sample
        # gap around it busy. The gap's length is the sampler's back-off, not the process's: counted busy, one line
        # just before the phase's end made a backed-off 1.6 s gap "moved" and a 3 s idle phase "reads" (in CI).
        while li < len(logs) and logs[li] <= b[0]:
            if run_start is not None and logs[li] >= run_start:
                if logs[li] - run_start >= IDLE_MIN_S:
                    idle.append((run_start, logs[li]))
                run_start = logs[li]
            li += 1
    if run_start is not None and min(pts[-1][0], t1) - run_start >= IDLE_MIN_S:
        idle.append((run_start, min(pts[-1][0], t1)))
    spans += _log_runs(logs)
    return _Window(seconds, read, cpu, top, name, runnable, len(logs), True, _covered(spans), idle)


def _moved(a: _Point, b: _Point) -> bool:
    """Reads or CPU moved between two samples (a sleeping process's small reads and ticks do not count)."""
    dt = b[0] - a[0]
    return dt > 0 and ((b[1] - a[1]) / dt >= IDLE_READ_BPS or (b[2] - a[2]) / dt >= IDLE_CPU)


def _moving_s(a: _Point, b: _Point, c: _Point | None) -> float:
    """How long what moved between samples ``a`` and ``b`` took, ending at ``b``. The sampler lengthens its gap
    only while nothing moves and is back at its base rate after the first sample that moved, so a gap much longer
    than the next one holds a start, not a steady movement: it is timed at the rate the next gap saw, and at least
    that gap's length. Counted whole, the next phase's first reads (its line read 6 ms after the sample) made a
    backed-off 1.6 s gap of a 3 s idle phase "reads"."""
    dt = b[0] - a[0]
    if c is None or c[0] - b[0] <= 0 or dt <= BACKED_OFF * (c[0] - b[0]):
        return dt
    nxt = c[0] - b[0]
    took = nxt
    # reads, then CPU: each signal that moves on, at the rate it moves on at
    for done, rate in ((b[1] - a[1], (c[1] - b[1]) / nxt), (b[2] - a[2], (c[2] - b[2]) / nxt)):
        if done > 0 and rate > 0:
            took = max(took, done / rate)
    return min(dt, took)


def _log_runs(logs: list[float]) -> list[tuple[float, float]]:
    """Runs of lines each less than IDLE_MIN_S after the one before: a process busy writing its log. A line alone
    is a moment (a run of no length), however long the sample gap it fell in."""
    runs: list[tuple[float, float]] = []
    for t in logs:
        if runs and t - runs[-1][1] < IDLE_MIN_S:
            runs[-1] = (runs[-1][0], t)
        else:
            runs.append((t, t))
    return runs


def _covered(spans: list[tuple[float, float]]) -> float:
    """The seconds the union of ``spans`` covers."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(spans):
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total


def _ev(signal: str, value: str, since: float | None) -> dict[str, Any]:
    return {"signal": signal, "value": value, "since": since}


def _download_bound(sig: Signals, t0: float, t1: float) -> tuple[str, list[dict[str, Any]]]:
    """A download phase is bound by the download: the bytes the hub cache grew by, else the engine's lines."""
    arrived = sum(n for t, n in sig.hub if t0 <= t <= t1)
    ev = []
    if arrived:
        ev.append(_ev("hub_cache", f"{arrived / 1e6:.1f} MB arrived in the hub cache at "
                                   f"{_mbps(arrived / (t1 - t0) if t1 > t0 else None)}", t0))
    lines = sum(1 for t in sig.downloads if t0 <= t <= t1)
    if lines or not ev:
        ev.append(_ev("log", f"{lines} download progress lines", t0))
    return "download", ev


def _weights_bound(w: _Window, sig: Signals, t0: float, device_rate: float | None,
                   resident: float | None, fstype: str) -> tuple[str, list[dict[str, Any]]]:
    rate = w.read_rate
    if any(t0 <= t for t in sig.downloads):
        return "download", [_ev("log", f"{sum(1 for t in sig.downloads if t >= t0)} download progress lines", t0)]
    if fstype in NETWORK_FS:
        return "network_fs", [_ev("disk", f"weights on a {fstype} mount, read {_mbps(rate)}", t0)]
    if resident is not None and warm_page_cache(resident):
        return "page_cache", [_ev("disk", f"{resident:.0%} of the weights resident in the page cache at start, "
                                          f"read {_mbps(rate)}", t0)]
    if not w.measured:  # a live phase shorter than a sample still keeps what was measured of its start
        why = f"shorter than a sample ({w.seconds:.2f}s)" if w.sampled else "no process samples (a log replay)"
        res = f"; {resident:.0%} of the weights resident in the page cache at start" if resident is not None else ""
        return "unmeasured", [_ev("log", f"{why}: the bound is not known{res}", t0)]
    hot = w.runnable is not None and w.runnable >= HOT_THREAD
    slow = device_rate is None or rate is None or rate < DISK_SHARE * device_rate
    if hot and slow:
        of = f" vs the device's {_mbps(device_rate)}" if device_rate else ""
        return "loader_cpu", [_ev("cpu", f"thread {w.thread_name or '?'} CPU-bound (runnable in {w.runnable:.0%} of "
                                         f"samples, {w.thread_top or 0:.2f} cores on this machine) while reading "
                                         f"{_mbps(rate)}{of}", t0)]
    if w.read > 0:
        of = f", {rate / device_rate:.0%} of the device's measured {_mbps(device_rate)}" \
            if device_rate and rate is not None else " (device rate not measured: firstlight preflight --disk)"
        res = f"; {resident:.0%} resident at start" if resident is not None else ""
        return "disk", [_ev("disk", f"read {w.read / 1e6:.0f} MB at {_mbps(rate)}{of}{res}", t0)]
    return _generic_bound(w, t0)


def _generic_bound(w: _Window, t0: float) -> tuple[str, list[dict[str, Any]]]:
    if not w.measured:
        why = f"shorter than a sample ({w.seconds:.2f}s)" if w.sampled else "no process samples"
        return ("log" if w.logs else "unmeasured"), [_ev("log", f"{w.logs} log lines; {why}", t0)]
    cores = w.cores or 0.0
    if w.seconds - w.busy_s >= IDLE_MIN_S and w.busy_s < 0.5 * w.seconds:
        return "idle", [_ev("watch", f"no measured signal moved for {w.seconds - w.busy_s:.1f}s of "
                                     f"{w.seconds:.1f}s (CPU {cores:.2f} cores, {w.read} B read, {w.logs} lines)", t0)]
    if cores >= 0.5 or (w.runnable or 0) >= HOT_THREAD:
        top = f"; busiest thread {w.thread_name} runnable in {w.runnable:.0%} of samples" if w.runnable else ""
        return "cpu", [_ev("cpu", f"{cores:.2f} cores on average{top}", t0)]
    if (w.read_rate or 0) >= IDLE_READ_BPS:  # a sleeping process's small reads are not what bound it
        return "reads", [_ev("disk", f"read {w.read / 1e6:.1f} MB at {_mbps(w.read_rate)}", t0)]
    return "log", [_ev("log", f"{w.logs} log lines; CPU {cores:.2f} cores", t0)]


def _compile_info(sig: Signals, t0: float, t1: float) -> dict[str, Any]:
    lines = [c for c in sig.compile_lines if t0 <= c[0] <= t1 + 1e-6]
    states = {c[1] for c in lines}
    cache = "hit" if "hit" in states and "miss" not in states else "miss" if "miss" in states else None
    # The largest figure is the compile's whole: vLLM prints torch.compile's total, then the profiling run's own
    # (often under a second) or both together; the last line alone read a 67 s compile as 0.83 s
    total = max((c[2] for c in lines if c[1] == "total" and c[2] is not None), default=None)
    return {"cache": cache, "engine_seconds": total, "lines": [c[3] for c in lines[:4]],
            "compiler_runs": sig.compiler_runs, "compiler_cpu_s": round(sig.compiler_cpu, 2)}


def anatomy(phases: list[dict[str, Any]], sig: Signals, end: float, *, first_generation_s: float | None = None,
            device_rate: float | None = None, cache_rate: float | None = None,
            reached: str | None = None) -> dict[str, Any]:
    """Each phase's duration and bound, idle stretches, cache states and what would cut the start."""
    w = sig.weights
    resident = resident_share(w)
    fstype = w.fstype if w is not None else ""
    out_phases: list[dict[str, Any]] = []
    idle_all: list[dict[str, Any]] = []
    compile_cache: str | None = None
    weights_rate: float | None = None
    weights_s: float | None = None
    # a replayed log's lines before its first timestamp sit at the epoch: they start where the clock does
    origin = min((float(p["start"]) for p in phases if float(p["start"]) > _NO_CLOCK), default=0.0)
    for i, p in enumerate(phases):
        t0 = max(float(p["start"]), origin)
        t1 = max(float(p["end"] if p.get("end") is not None else
                       (phases[i + 1]["start"] if i + 1 < len(phases) else end)), t0)
        if p["name"] == "ready":
            continue
        win = _window(sig, t0, t1)
        entry: dict[str, Any] = {"name": p["name"], "start": t0, "seconds": round(t1 - t0, 3)}
        if p["name"] in _WEIGHT_PHASES:
            bound, ev = _weights_bound(win, sig, t0, device_rate, resident, fstype)
            weights_rate, weights_s = win.read_rate, t1 - t0
            entry["read_bytes"], entry["read_rate"] = win.read, _r(win.read_rate, 0)
        elif p["name"] == "download":
            bound, ev = _download_bound(sig, t0, t1)
        elif p["name"] in _COMPILE_PHASES:
            info = _compile_info(sig, t0, t1)
            compile_cache = info["cache"]
            bound = "compile"
            ev = [_ev("log", f"compile cache {info['cache'] or 'not reported'}"
                             + (f"; the engine says {info['engine_seconds']:g}s" if info["engine_seconds"] else "")
                             + f"; {info['compiler_runs']} compiler runs, {info['compiler_cpu_s']:g} CPU s", t0)]
            entry["compile"] = info
        else:
            bound, ev = _generic_bound(win, t0)
        entry.update({"bound": bound, "cpu_cores": _r(win.cores, 2), "thread_top": _r(win.thread_top, 2),
                      "thread_runnable": _r(win.runnable, 2), "evidence": ev})
        quiet = sig.quiet.of(p["name"], t1)
        if quiet is not None and sig.points:  # silences are measured only with a process tree to watch
            entry["quiet"] = quiet
        out_phases.append(entry)
        idle_all += [{"phase": p["name"], "start": a, "seconds": round(b - a, 3)} for a, b in win.idle]
    total = (end - max(float(phases[0]["start"]), origin)) if phases else 0.0
    measured = bool(sig.points)
    anat: dict[str, Any] = {
        "total_s": round(total, 3),
        "reached": reached or (phases[-1]["name"] if phases else None),
        "measured": measured,
        "phases": out_phases,
        "idle": idle_all,
        "idle_s": round(sum(x["seconds"] for x in idle_all), 3),
        "first_generation_s": _r(first_generation_s),
        "cache": {
            "page_cache_resident": _r(resident),
            "weights_bytes": w.bytes if w is not None else None,
            "fstype": fstype or None,
            "compile_cache": compile_cache,
            "compile_key": dict(sig.compile_key) or None,
            "device_rate": _r(device_rate, 0),
            "weights_read_rate": _r(weights_rate, 0),
        },
    }
    anat["cuts"] = _cuts(anat, weights_s, weights_rate, device_rate, cache_rate, w)
    return anat


def _cuts(anat: dict[str, Any], weights_s: float | None, rate: float | None, device_rate: float | None,
          cache_rate: float | None, w: WeightsTotal | None) -> list[dict[str, Any]]:
    """What the evidence supports, each saving from this machine's own figures."""
    cuts: list[dict[str, Any]] = []
    byname = {p["name"]: p for p in anat["phases"]}
    wp = byname.get("weights_loading")
    if wp and weights_s and w is not None and w.bytes and wp["bound"] in ("disk", "loader_cpu", "network_fs"):
        uncached = w.bytes - (w.resident or 0) if w.resident is not None else w.bytes
        if wp["bound"] != "loader_cpu" and rate and uncached > 0:
            # the time spent reading from storage, against the same bytes from memory (when measured)
            from_disk = min(uncached / rate, weights_s)
            from_cache = uncached / cache_rate if cache_rate else 0.0
            saving = max(from_disk - from_cache, 0.0)
            path = shlex.quote(one_line(w.path))  # a suggestion to paste: one line, quoted
            cuts.append({"cut": "warm_page_cache", "saving_s": round(saving, 2),
                         "how": f"pre-warm the weights into the page cache (vmtouch -t {path} or cat them to "
                                f"/dev/null) or keep them resident: {uncached / 1e6:.0f} MB read at {_mbps(rate)}",
                         "from": "this start's read rate" + (f" and the page cache's {_mbps(cache_rate)}"
                                                             if cache_rate else "")})
        if device_rate and rate and rate < DISK_SHARE * device_rate and wp["bound"] in ("loader_cpu", "network_fs"):
            saving = max(weights_s - uncached / device_rate, 0.0)
            how = ("--safetensors-load-strategy eager (or copy the weights to local disk)"
                   if wp["bound"] == "network_fs" else "a faster loader (more loader threads, fastsafetensors)")
            cuts.append({"cut": "device_rate", "saving_s": round(saving, 2),
                         "how": f"{how}: read at the device's {_mbps(device_rate)} instead of {_mbps(rate)}",
                         "from": "preflight --disk"})
    cp = byname.get("compile")
    if cp and cp.get("compile", {}).get("cache") == "miss":
        cuts.append({"cut": "compile_cache", "saving_s": None,
                     "how": "keep the engine's compile cache on a persistent volume (vLLM: VLLM_CACHE_ROOT, "
                            "~/.cache/vllm/torch_compile_cache); the saving is known once a warm start is in the "
                            "history", "from": "the engine's compile lines"})
    return cuts


def compare(cur: dict[str, Any], base: dict[str, Any], base_run: int | None = None) -> dict[str, Any] | None:
    """This start against the baseline's anatomy: the total's difference and each phase's, with the cache
    states of both, largest first."""
    if not cur or not base or not base.get("phases"):
        return None
    bp = {p["name"]: p for p in base["phases"]}
    deltas = []
    for p in cur.get("phases", []):
        b = bp.get(p["name"])
        if b is None:
            continue
        d = p["seconds"] - b["seconds"]
        why = []
        if p["name"] == "weights_loading":
            cc, bc = cur.get("cache", {}), base.get("cache", {})
            why.append(f"read {_mbps(p.get('read_rate'))} vs {_mbps(b.get('read_rate'))}")
            if cc.get("page_cache_resident") is not None and bc.get("page_cache_resident") is not None:
                why.append(f"{cc['page_cache_resident']:.0%} of the weights resident at start vs "
                           f"{bc['page_cache_resident']:.0%}")
        if p["name"] == "compile":
            why.append(f"compile cache {p.get('compile', {}).get('cache')} vs {b.get('compile', {}).get('cache')}")
        deltas.append({"phase": p["name"], "delta_s": round(d, 3), "seconds": p["seconds"],
                       "baseline_s": b["seconds"], "why": "; ".join(why)})
    deltas.sort(key=lambda x: -abs(x["delta_s"]))
    diff = cur.get("total_s", 0.0) - base.get("total_s", 0.0)
    top = [x for x in deltas if abs(x["delta_s"]) >= 0.1][:3]
    word = "slower" if diff >= 0 else "faster"
    msg = f"{word} by {abs(diff):.1f}s" + (": " + ", ".join(
        f"{x['phase']} {x['delta_s']:+.1f}s" + (f" ({x['why']})" if x["why"] else "") for x in top) if top else "")
    return {"run": base_run, "delta_s": round(diff, 3), "phases": deltas, "message": msg}


# -- the engine's own clock beside the anatomy -------------------------------------------------------------------
# Per stage the engine timed (firstlight.timeline.EngineClock, read by firstlight.engines.clocks from its log lines,
# endpoints and progress stream): the engine's seconds, firstlight's for the same phases, and a note where they
# differ. Two readings of one start that disagree are a finding (a stretch the engine does not count, a clock that
# starts at process creation); two that agree are evidence. A row differs when
# |engine - firstlight| > max(CLOCK_DIFF_S, CLOCK_DIFF_SHARE * firstlight): 2 s absorbs the granularity of log
# timestamps and of a sampled stream, 10 % the noise of a long phase.
CLOCK_DIFF_S = 2.0
CLOCK_DIFF_SHARE = 0.10
WHOLE = "*"  # a stage that covers the whole start up to its end (vLLM's "Startup took", SGLang's e2e)
MAX_CLOCK_ROWS = 32


def clock_differs(engine_s: float, firstlight_s: float) -> bool:
    """The engine's and firstlight's seconds disagree by more than 2 s and more than 10 % of firstlight's."""
    return abs(engine_s - firstlight_s) > max(CLOCK_DIFF_S, CLOCK_DIFF_SHARE * firstlight_s)


def _stream_rows(marks: list[EngineClock]) -> list[EngineClock]:
    """A progress stream's begin/end marks, paired per stage into figures: its seconds are the time between the
    stage's first mark and its end (as the marks arrived), ending where the end mark came."""
    out: list[EngineClock] = []
    begun: dict[tuple[str, str], EngineClock] = {}
    for m in marks:
        key = (m.source, m.stage)
        if m.mark == "begin":
            begun.setdefault(key, m)
        elif m.mark == "end" and key in begun:
            b = begun.pop(key)
            out.append(EngineClock(m.t, m.source, m.stage, m.phases, round(m.t - b.t, 3), text=m.text))
    return out


def _phase_name(phases: tuple[str, ...]) -> str:
    return "start" if phases == (WHOLE,) else "+".join(phases)


def compare_clocks(anat: dict[str, Any] | None, clocks: list[EngineClock]) -> dict[str, Any] | None:
    """The summary's ``engine_clock`` section, or None when the engine published nothing."""
    figures = [c for c in clocks if c.seconds is not None and not c.mark] + _stream_rows(
        [c for c in clocks if c.mark])
    if not figures:
        return None
    phases = {p["name"]: p for p in (anat or {}).get("phases", [])}
    origin = min((float(p["start"]) for p in phases.values()), default=None)
    rows: list[dict[str, Any]] = []
    for c in sorted(figures, key=lambda c: c.t)[:MAX_CLOCK_ROWS]:
        assert c.seconds is not None
        engine_s = round(c.seconds, 3)
        fl, began = _firstlight_seconds(c, phases, origin)
        row: dict[str, Any] = {"stage": c.stage, "source": c.source, "phase": _phase_name(c.phases) or None,
                               "engine_s": engine_s, "firstlight_s": fl, "differs": False, "note": None,
                               "at": c.t, "text": c.text}
        if c.phases and fl is None:
            row["note"] = f"firstlight saw no {_phase_name(c.phases)} phase" + _then(c, engine_s, phases)
        elif fl is not None and clock_differs(engine_s, fl):
            row["differs"] = True
            row["note"] = _why(c, engine_s, fl, began)
        rows.append(row)
    sources = list(dict.fromkeys(r["source"] for r in rows))
    return {"source": ", ".join(sources), "phases": rows,
            "findings": [f"{r['stage']}: {r['note']}" for r in rows if r["differs"]]}


def _then(c: EngineClock, engine_s: float, phases: dict[str, dict[str, Any]]) -> str:
    """The phases firstlight was in while the engine's stage ran (its end minus its seconds, to its end)."""
    lo, hi = c.t - engine_s, c.t
    names = [n for n, p in phases.items()
             if float(p["start"]) <= hi and float(p["start"]) + float(p["seconds"]) >= lo]
    return f": it was in {', '.join(names)} then" if names else ""


def _firstlight_seconds(c: EngineClock, phases: dict[str, dict[str, Any]], origin: float | None
                        ) -> tuple[float | None, float | None]:
    """firstlight's seconds for the phases a figure covers, and when the first of them began."""
    if not c.phases:
        return None, None
    if c.phases == (WHOLE,):
        return (round(c.t - origin, 3), origin) if origin is not None else (None, None)
    seen = [phases[p] for p in c.phases if p in phases]
    if not seen:
        return None, None
    return round(sum(float(p["seconds"]) for p in seen), 3), min(float(p["start"]) for p in seen)


def _why(c: EngineClock, engine_s: float, fl: float, began: float | None) -> str:
    """What the disagreement says, with both numbers and where the engine's clock must have started."""
    what = _phase_name(c.phases)
    head = f"the engine counts {engine_s:.1f}s, firstlight saw {fl:.1f}s of {what}"
    if began is None:
        return head
    lead = (c.t - engine_s) - began  # the engine's clock started this long after firstlight's phase began
    if engine_s < fl:
        return (f"{head}: the engine's clock starts {lead:.1f}s after firstlight's {what} began"
                if lead > 0 else f"{head}: {fl - engine_s:.1f}s of it the engine does not count")
    return (f"{head}: the engine's clock starts {-lead:.1f}s before firstlight's {what} began "
            "(at the process's creation, or in a phase firstlight names differently)")
