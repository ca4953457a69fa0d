"""Observations: what the samplers and probes saw, each stamped with the moment it was seen.

A timeline is a plain list of these records. The judge (``firstlight.judge``) turns it into a verdict and
nothing else reads the world, so a recorded timeline (``to_dict``/``from_dict``, JSON Lines on disk) replays
to the same verdict in a test.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar


class Level(IntEnum):
    """The readiness ladder. Each level is a checked fact; READY means GENERATION held."""

    NONE = 0
    PROCESS = 1  # the server process is alive
    PORT = 2  # the port accepts TCP connections
    HTTP = 3  # something answers HTTP on it (any status)
    HEALTH = 4  # the engine's health endpoint says OK
    MODELS = 5  # the model is listed
    GENERATION = 6  # a real generation returned and checked out

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, name: str) -> Level:
        try:
            return cls[name.upper()]
        except KeyError:
            valid = ", ".join(lv.label for lv in cls if lv is not cls.NONE)
            raise ValueError(f"unknown level {name!r} (valid: {valid})") from None


@dataclass(frozen=True)
class Observation:
    t: float  # Unix epoch seconds when it was seen
    kind: ClassVar[str] = "observation"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, tuple) and v and dataclasses.is_dataclass(v[0]):
                v = [dataclasses.asdict(x) for x in v]
            elif isinstance(v, Level):
                v = v.label
            d[f.name] = v
        return d

    def to_line(self) -> str:
        """One line of a record (``--record``, the history's timeline): JSON that ``from_dict`` reads back. A
        value of a type JSON lacks is written as its text rather than end the watch."""
        return json.dumps(self.to_dict(), default=str) + "\n"


@dataclass(frozen=True)
class Started(Observation):
    """firstlight began watching (launching or attaching)."""

    pid: int | None = None
    url: str | None = None
    engine: str = "generic"
    launched: bool = False
    kind: ClassVar[str] = "started"


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    name: str
    state: str  # psutil status: running, sleeping, disk-sleep, zombie, ...
    cpu_seconds: float
    rss_bytes: int
    started: float = 0.0  # create time, epoch seconds


@dataclass(frozen=True)
class ProcessSample(Observation):
    """One look at the server's process tree (the root and every descendant)."""

    alive: bool
    exit_code: int | None = None
    cpu_seconds: float = 0.0  # user+system, summed over the tree, including exited children we saw
    rss_bytes: int = 0
    read_bytes: int = 0  # bytes read by the tree (storage reads, or read() calls where larger)
    threads: int = 0
    procs: tuple[ProcInfo, ...] = ()
    root_state: str | None = None
    died: tuple[ProcInfo, ...] = ()  # descendants gone since the previous sample, while the root lives
    zombies: tuple[ProcInfo, ...] = ()  # descendants that exited and their parent has not reaped (not members)
    # read when the process is found gone: the kernel's OOM-kill traces (cgroup counters, the unit's Result,
    # the kernel log), each as a person would check it
    oom: tuple[str, ...] = ()
    # the busiest thread since the previous sample: its CPU in cores, name and state now (R: running or waiting for
    # a CPU, so CPU-bound even on a loaded machine); read only for processes that used CPU since the last sample
    thread_top: float | None = None
    thread_top_name: str = ""
    thread_top_state: str = ""
    kind: ClassVar[str] = "process"


@dataclass(frozen=True)
class LogLine(Observation):
    text: str
    stream: str = "stdout"  # stdout | stderr | file
    lineno: int = 0
    final: bool = True  # False: a progress-bar redraw (\r) that the next redraw replaces
    kind: ClassVar[str] = "log"


@dataclass(frozen=True)
class Probe(Observation):
    """The result of checking one rung of the ladder, in one of three states (:attr:`state`): it holds, it does
    not hold yet (a server still loading: the next check may pass), or it answered wrong (garbage, an empty
    generation, a 4xx for the model: not a matter of waiting)."""

    level: Level
    ok: bool
    detail: str = ""  # what was seen, e.g. "GET /health -> 503 Loading model"
    status: int | None = None
    latency_s: float | None = None
    text: str | None = None  # the generated text for GENERATION
    transient: bool = True  # False: a definitive bad answer (garbage, empty), not merely "not yet"
    # GENERATION asked with log-probabilities (the known answer): the answer's tokens and each one's
    # log-probability, as the engine returned them; empty where it returned none
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = ()
    kind: ClassVar[str] = "probe"

    @property
    def state(self) -> str:
        """``ok``, ``not_yet`` or ``bad``."""
        return "ok" if self.ok else "not_yet" if self.transient else "bad"


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    memory_used: int
    memory_total: int
    utilization: float | None  # percent


@dataclass(frozen=True)
class GpuProcess:
    gpu: int
    pid: int
    memory_used: int | None
    name: str = ""


@dataclass(frozen=True)
class GpuSample(Observation):
    devices: tuple[GpuDevice, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    kind: ClassVar[str] = "gpu"


@dataclass(frozen=True)
class SourceNote(Observation):
    """A signal source reports on itself once: 'no GPU', 'log rotated', 'cannot read /proc/PID/io'. ``failed``: its
    sampler raised, so its signal is missing from then on (until a sample succeeds again: ``failed`` False)."""

    source: str
    message: str
    failed: bool = False
    kind: ClassVar[str] = "note"


@dataclass(frozen=True)
class WeightsTotal(Observation):
    bytes: int
    files: int
    path: str = ""
    resident: int | None = None  # bytes in the page cache as the server started; None: unknown
    fstype: str = ""  # the mount type the weights are on (nfs, ext4, ...)
    kind: ClassVar[str] = "weights"


@dataclass(frozen=True)
class HubDownload(Observation):
    """A model's folder in the Hugging Face hub cache (``models--ORG--NAME``) while the server may be downloading
    it: the bytes of its blobs, those still downloading (``*.incomplete``, which huggingface_hub grows as the bytes
    arrive) and the largest of those. Sampled by ``firstlight.samplers.hub``; growth is progress."""

    path: str  # the model's folder in the hub cache
    bytes: int = 0  # every blob's bytes, complete or not
    incomplete_bytes: int = 0  # the bytes of the *.incomplete files
    incomplete: int = 0  # how many *.incomplete files
    file: str = ""  # the largest *.incomplete file (empty: none)
    kind: ClassVar[str] = "hub_download"


@dataclass(frozen=True)
class EngineClock(Observation):
    """The engine's own account of a stage of its start (firstlight.engines.clocks): a figure it published (a log
    line's seconds, ``/server_info``), or a mark of its progress stream (llama.cpp's ``/models/sse``: ``begin`` and
    ``end`` of a stage, timed here as they arrive)."""

    source: str  # log | server_info | metrics | models_sse | startup_metrics
    stage: str  # the engine's own name for it
    phases: tuple[str, ...] = ()  # firstlight's phases it covers (empty: shown, not compared)
    seconds: float | None = None  # the engine's figure; None for a stream's mark
    mark: str = ""  # a stream's: begin | end
    text: str = ""  # the line or value it came from, clipped
    kind: ClassVar[str] = "engine_clock"


@dataclass(frozen=True)
class PortConflict(Observation):
    """The port answers, but another process listens on it (not the launched server's tree)."""

    detail: str = ""  # who holds it, as a person would check it
    kind: ClassVar[str] = "port_conflict"


@dataclass(frozen=True)
class KnownAnswer(Observation):
    """The answer this deployment gave at a verified start, from the history (``--known-answer``): the generation
    probe's text, tokens and log-probabilities at temperature 0, to the same request (``request``: its
    fingerprint). A later start's first answer is compared with it before READY. ``t`` is when this start looked it
    up (an observation's time is always this start's), ``recorded_at`` when the earlier run recorded it."""

    run: int | None = None  # the history run it was recorded by
    recorded_at: float | None = None
    text: str | None = None
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = ()
    request: str = ""
    kind: ClassVar[str] = "known_answer"


@dataclass(frozen=True)
class Interrupted(Observation):
    signal: str = "SIGINT"
    kind: ClassVar[str] = "interrupted"


@dataclass(frozen=True)
class CollectorStat:
    """How one collector of a watch is doing (node_exporter's per-collector success and duration, blackbox_exporter's
    per-probe success): a sampler (``kind`` "sampler": ``success`` is whether its last sample worked) or a rung of
    the readiness ladder (``kind`` "probe": whether the rung held on its last check). Not an observation: the
    exporter reads these when it is scraped, so a collector that stopped working is seen, never silent."""

    kind: str  # "sampler" or "probe"
    name: str  # the sampler's name ("process", "gpu"), or the rung's ("port", "health", "models", "generation")
    runs: int = 0  # samples taken, or checks made
    failures: int = 0  # samples that raised; checks whose rung did not hold
    errors: int = 0  # checks that failed inside firstlight (a probe only: a bug or a hostile answer, not the server)
    success: bool | None = None  # the last one's outcome; None before the first
    duration_s: float | None = None  # the last one's wall time


class CollectorBook:
    """Counts one collector's runs as they end, for :class:`CollectorStat`. Written by the collector's own thread
    and read by the exporter's; each field is replaced whole (an int or a float), so a read never sees a torn one."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        self.runs = self.failures = self.errors = 0
        self.success: bool | None = None
        self.duration_s: float | None = None

    def record(self, ok: bool, duration_s: float, error: bool = False) -> None:
        self.runs += 1
        self.failures += 0 if ok else 1
        self.errors += 1 if error else 0
        self.success, self.duration_s = ok, max(0.0, duration_s)

    def stat(self) -> CollectorStat:
        return CollectorStat(self.kind, self.name, self.runs, self.failures, self.errors, self.success,
                             self.duration_s)


_KINDS: dict[str, type[Observation]] = {
    cls.kind: cls
    for cls in (Started, ProcessSample, LogLine, Probe, GpuSample, SourceNote, WeightsTotal, Interrupted,
                PortConflict, EngineClock, KnownAnswer, HubDownload)
}


def from_dict(d: dict[str, Any]) -> Observation:
    """Inverse of ``Observation.to_dict`` (for replaying recorded timelines)."""
    d = dict(d)
    cls = _KINDS[d.pop("kind")]
    if cls is Probe:
        d["level"] = Level.parse(d["level"])
    if cls is Probe or cls is KnownAnswer:
        d["tokens"] = tuple(d.get("tokens", ()))
        d["logprobs"] = tuple(d.get("logprobs", ()))
    if cls is ProcessSample:
        d["procs"] = tuple(ProcInfo(**p) for p in d.get("procs", ()))
        d["died"] = tuple(ProcInfo(**p) for p in d.get("died", ()))
        d["zombies"] = tuple(ProcInfo(**p) for p in d.get("zombies", ()))
        d["oom"] = tuple(d.get("oom", ()))
    if cls is EngineClock:
        d["phases"] = tuple(d.get("phases", ()))
    if cls is GpuSample:
        d["devices"] = tuple(GpuDevice(**x) for x in d.get("devices", ()))
        d["processes"] = tuple(GpuProcess(**x) for x in d.get("processes", ()))
    return cls(**d)
