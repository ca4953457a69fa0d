"""Cold-start scenarios of the simulated server, as data: a list of steps per scenario.

Durations are in seconds of the simulator's clock, already compressed (the demo turns a ten-minute start into
about thirty seconds). Each scenario reproduces a behaviour seen on real engines (shared/field-notes,
shared/user-pain.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Log:
    key: str  # a dialect line key
    stream: str = "stderr"


@dataclass(frozen=True)
class Listen:
    """Open the HTTP port (health says loading until Ready)."""


@dataclass(frozen=True)
class ReadWeights:
    seconds: float  # how long reading all weight files takes (throttled)
    progress: bool = True  # print shard-progress lines (False: silent, like a long quiet load)
    spin: bool = False  # pace the reads by busy-waiting on one thread (a CPU-bound loader), not by sleeping


@dataclass(frozen=True)
class Download:
    """Fetch the model from the hub as huggingface_hub does: a ``blobs/*.incomplete`` file in the hub cache
    (``$HF_HUB_CACHE``) that grows, then renamed whole and linked from the snapshot, whose weights are then read."""

    quiet: bool = False  # print no download lines (vLLM's own fetch shows no bar)
    stall: bool = False  # the bytes stop arriving halfway, and nothing else moves (a dead connection)


@dataclass(frozen=True)
class Burn:
    seconds: float  # CPU-bound work (compilation, graph capture)
    progress_key: str | None = None  # print this dialect line with progress while burning
    steps: int = 4


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Workers:
    count: int  # spawn worker processes (TP ranks)


@dataclass(frozen=True)
class KillWorker:
    """One worker dies (exit 1) while the parent lives on."""


@dataclass(frozen=True)
class Ready:
    first_request_s: float = 0.0  # the first generation takes this long (graph capture, JIT)


@dataclass(frozen=True)
class Crash:
    keys: tuple[str, ...]
    code: int = 1


@dataclass(frozen=True)
class DummyHealth:
    """An SGLang node of rank >= 1, its schedulers ready: it opens its port with a dummy ``/health`` and
    ``/health_generate`` that answer 200 forever (``launch_dummy_health_check_server``); it serves nothing else."""


@dataclass(frozen=True)
class Join:
    """A vLLM ``--headless`` node joins its head node (``--master-addr``/``--master-port``): a TCP connection held
    as long as the node lives; no answer in time: vLLM's handshake error, exit 1."""


@dataclass(frozen=True)
class Hang:
    """Everything stops: no log, no I/O, no CPU; the port stays as it is."""


@dataclass(frozen=True)
class Spin:
    """Busy-wait forever on one core (a deadlocked NCCL init), nothing else."""


Step = (Log | Listen | Download | ReadWeights | Burn | Sleep | Workers | KillWorker | Ready | Crash | Hang | Spin
        | DummyHealth | Join)


def _prelude(workers: int = 0) -> list[Step]:
    steps: list[Step] = [Log("args"), Log("dist_init"), Sleep(0.2)]
    if workers:
        steps.append(Workers(workers))
    steps.append(Log("dist_end"))
    return steps


def _loaded(graph_s: float = 0.6) -> list[Step]:
    return [Log("weights_end"), Log("kv_cache"), Log("kv_end"), Log("graph_begin"),
            Burn(graph_s, "graph_progress"), Log("graph_end"), Log("scheduler_ready")]


def _http() -> list[Step]:
    return [Log("http_start"), Log("lifespan"), Log("lifespan_done"), Listen(), Log("listening")]


def scenario(name: str, load_s: float = 1.0, workers: int = 0, node_rank: int = 0,
             headless: bool = False) -> list[Step]:
    """The steps of scenario ``name``; ``load_s`` is the time the weights take to read. On a node of rank >= 1 of
    a multi-node start the scenario's own steps run up to its HTTP server, which a worker node replaces with the
    dummy health server (SGLang: no tokenizer, no generation on that node). A ``headless`` node (vLLM) says so,
    joins its head, runs the same steps up to its engines' end of start, and serves nothing."""
    steps = _scenario(name, load_s, workers)
    if node_rank <= 0 and not headless:
        return steps
    cut = next((i for i, s in enumerate(steps) if isinstance(s, (Listen, Ready)) or s == Log("http_start")),
               len(steps))
    if headless:
        return [steps[0], Log("headless"), Join(), *steps[1:cut]]
    if cut == len(steps):  # it never got that far (a hang, a crash): the same steps
        return steps
    return [*steps[:cut], Log("dummy_health"), DummyHealth()]


def _scenario(name: str, load_s: float, workers: int) -> list[Step]:
    prelude = _prelude(workers)
    match = {
        # A normal start: weights, KV cache, graphs, HTTP, warmup, ready.
        "normal": [*prelude, Log("weights_begin"), ReadWeights(load_s), *_loaded(), *_http(),
                   Log("warmup"), Log("warmup_gen"), Ready(), Log("ready")],
        # The port is up and the engine says ready, but the first generation takes seconds (JIT, graphs).
        "slow_first_request": [*prelude, Log("weights_begin"), ReadWeights(load_s), *_loaded(), *_http(),
                               Log("ready"), Ready(first_request_s=3.0)],
        # OOM while capturing graphs: a traceback, then exit 1 (after a pause, as real engines take a while).
        "crash_oom": [*prelude, Log("weights_begin"), ReadWeights(load_s), Log("weights_end"), Log("kv_cache"),
                      Log("graph_begin"), Burn(0.3), Crash(("oom", "oom_tb", "sigquit"))],
        # A stale process holds GPU 0 (see the NVML fixture): the engine refuses to start.
        "gpu_occupied": [*prelude, Crash(("unbalanced", "sigquit"))],
        # Everything stops in the middle of the weights: no log, no I/O, no CPU.
        "hang": [*prelude, Log("weights_begin"), ReadWeights(load_s / 2), Hang()],
        # The weights finish ("100 % shards"), then nothing ever happens again.
        "hang_after_load": [*prelude, Log("weights_begin"), ReadWeights(load_s), Log("weights_end"), Hang()],
        # A deadlocked collective: one core at 100 %, nothing else moves.
        "busy_wait": [*prelude, Spin()],
        # Minutes of log silence while the disk reads steadily (the field notes' 8 quiet minutes).
        "slow_disk_silent": [*prelude, Log("weights_begin"), ReadWeights(load_s, progress=False), *_loaded(),
                             *_http(), Ready(), Log("ready")],
        # A TP worker dies; the parent waits for it forever.
        "worker_dies": [*_prelude(max(workers, 2)), Log("weights_begin"), ReadWeights(load_s / 2), KillWorker(),
                        Hang()],
    }
    # The weights fetched from the hub before they are read: a growing .incomplete file in the hub cache, with
    # huggingface_hub's bars (download), without any line (download_quiet), or stopping halfway (download_stall).
    for key, fetch in (("download", Download()), ("download_quiet", Download(quiet=True)),
                        ("download_stall", Download(quiet=True, stall=True))):
        match[key] = ([*prelude, Log("weights_begin"), fetch] if fetch.stall else
                       [*prelude, Log("weights_begin"), fetch, ReadWeights(load_s), *_loaded(), *_http(),
                        Ready(), Log("ready")])
    # The anatomy's fixtures: 3 s with nothing moving (distributed init), the weights read at a known rate
    # (sleep-paced: the disk's pace; spin-paced: a CPU-bound loader), 2 s of CPU in the KV-cache phase.
    anatomy: list[Step] = [Log("args"), Log("dist_init"), Sleep(3.0), Log("dist_end"), Log("weights_begin")]
    tail: list[Step] = [Log("weights_end"), Log("kv_cache"), Burn(2.0), Log("kv_end"), *_http(), Ready(), Log("ready")]
    match["anatomy_disk"] = [*anatomy, ReadWeights(load_s, progress=False), *tail]
    match["anatomy_cpu"] = [*anatomy, ReadWeights(load_s, progress=False, spin=True), *tail]
    # Restored from a snapshot (CRIU / cuda-checkpoint): no load, compile or graph line at all, the port open and a
    # generation served within a second; READY with the type ``restored``, never ``hung``.
    match["restored"] = [Sleep(0.3), Listen(), Ready()]
    # Woken from sleep mode (vLLM): the weights and KV cache put back from host memory, no load; then serving.
    match["woken"] = [Log("args"), Sleep(0.3), Log("wake"), *_http(), Ready(), Log("ready")]
    # Attached to a weight-cache daemon's weights (vLLM --load-format ipc_cache): no read of the weights, the KV
    # cache and graphs still come.
    match["attached"] = [*prelude, Log("weights_begin"), *_loaded(), *_http(), Ready(), Log("ready")]
    if name == "demo":
        # A large-model start compressed to about 25 s (READY at ~22 s): 8 TP workers, a long quiet weight read,
        # graphs, warmup.
        return [*_prelude(8), Log("weights_begin"), ReadWeights(12.0), *_loaded(6.0), *_http(),
                Log("warmup"), Log("warmup_gen"), Sleep(1.0), Log("ready"), Ready(first_request_s=2.0)]
    if name not in match:
        raise ValueError(f"unknown scenario {name!r} (known: {', '.join(sorted([*match, 'demo']))})")
    return match[name]


SCENARIOS = ("normal", "slow_first_request", "crash_oom", "gpu_occupied", "hang", "hang_after_load", "busy_wait",
             "slow_disk_silent", "worker_dies", "demo", "anatomy_disk", "anatomy_cpu", "restored", "woken",
             "attached", "download", "download_quiet", "download_stall")
