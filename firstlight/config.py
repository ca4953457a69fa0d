"""One Config object for a watch: what to watch, how to probe it, and when to give up.

The CLI builds it from options; tests and the library API build it directly. It is frozen: read-only once a
run starts. What a run learns while running (the engine, its endpoints, the ETA from history) is run-time state
owned by the session and its driver (``firstlight.drive``), never written back here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PROMPT = "The capital of France is"
DEFAULT_CHAT_PROMPT = "What is the capital of France? Answer in one word."
# --known-answer: check (record the answer at a deployment's first verified start, compare every later start's with
# it), record (this start's answer becomes the reference: after a deliberate model change), off
KNOWN_ANSWER_MODES: tuple[str, ...] = ("check", "record", "off")


@dataclass(frozen=True)
class ProbeConfig:
    """How the readiness ladder talks to the server."""

    url: str = "http://127.0.0.1:8000"
    api: str = "completions"  # completions | chat
    prompt: str | None = None  # None: DEFAULT_PROMPT / DEFAULT_CHAT_PROMPT by api
    max_tokens: int = 8
    expect: str | None = None  # regex the generated text must match
    model: str | None = None  # model name for requests; None: the first id /v1/models lists
    health_path: str = "/health"
    models_path: str | None = "/v1/models"
    completions_path: str = "/v1/completions"
    chat_path: str = "/v1/chat/completions"
    api_key: str | None = None
    connect_timeout: float = 1.0
    read_timeout: float = 5.0  # for health/models requests
    generation_timeout: float = 120.0  # read timeout of a generation probe, separate from the polling period
    min_interval: float = 0.1  # polling period right after any change
    max_interval: float = 1.0  # polling period after a long quiet spell (backs off x1.5 per quiet round)
    # Options the user set (e.g. {"health_path"}): an endpoint learnt at run time never replaces them.
    explicit: frozenset[str] = frozenset()

    @property
    def effective_prompt(self) -> str:
        if self.prompt is not None:
            return self.prompt
        return DEFAULT_CHAT_PROMPT if self.api == "chat" else DEFAULT_PROMPT


@dataclass(frozen=True)
class JudgeConfig:
    """The rules that turn observations into a verdict."""

    timeout: float = 3600.0  # overall deadline, seconds since start
    stall_timeout: float = 120.0  # no progress of any kind for this long: hung
    spin_timeout: float = 900.0  # only CPU/GPU busy (no log, I/O, memory, readiness change): hung, busy-wait
    generation_attempts: int = 3  # definitive bad answers (garbage, empty, --expect mismatch) before failed
    cpu_busy_cores: float = 0.10  # CPU use above this (in cores) counts as weak progress
    io_step_bytes: int = 1 << 20  # bytes read between two samples that count as strong progress
    rss_step_bytes: int = 32 << 20  # RSS growth that counts as strong progress
    gpu_mem_step_bytes: int = 64 << 20  # GPU memory change that counts as strong progress
    d_state_seconds: float = 30.0  # a process in D state for this long is reported
    zombie_seconds: float = 5.0  # a child left unreaped this long is reported (a prompt wait() is normal)
    worker_min_age_s: float = 3.0  # a child that lived this long and then died is reported (not a helper)
    expected_total_s: float | None = None  # a whole-start estimate from history, if any
    # Replay has no probes: the engine's own ready line stands in for the generation that READY needs live.
    ready_from_log: bool = False
    # "worker": a member of a multi-node start that serves no API (the command reader's ServerCommand.role):
    # READY when its port is seen listening, its serving checks the same; "server": READY after a real generation
    role: str = "server"
    # a worker that serves no port (vLLM --headless, ServerCommand.head): the head node's hosts; its READY and its
    # checks are its engines' ready line and its process tree's connection to one of them, seen in /proc
    head: tuple[str, ...] = ()


@dataclass(frozen=True)
class AfterReadyConfig:
    """Checks once the server serves: warm-up requests, a short benchmark (with speculative decoding)."""

    warmup: int = 0  # sequential requests; first vs steady-state latency
    bench: bool = False
    bench_requests: int = 32
    bench_concurrency: int = 4
    bench_duration: float | None = 60.0
    bench_prompt_len: int = 128
    bench_output_len: int = 64


@dataclass(frozen=True)
class HistoryConfig:
    """Every run is remembered per deployment: the ETA of the next start, and the baseline to compare with."""

    enabled: bool = True
    path: Path | str | None = None  # a SQLite file or a postgresql:// URL; None: the per-user data directory
    fail_on_regression: bool = False
    margin: float = 0.2  # worse than the baseline by more than this fraction is a regression
    known_answer: str = "check"  # KNOWN_ANSWER_MODES: the first answer checked against this deployment's before

    @property
    def answers(self) -> bool:
        """Known answers are recorded or checked: the history is kept and --known-answer is not off."""
        return self.enabled and self.known_answer != "off"


@dataclass(frozen=True)
class Config:
    command: list[str] = field(default_factory=list)  # `up`: the server command
    pid: int | None = None  # `watch`: a server process started by someone else
    watched_command: list[str] = field(default_factory=list)  # `watch --pid`: that process's command line
    log_file: Path | None = None
    log_from_start: bool = False  # `watch --log-from-start`: read an existing log whole, not from its end
    # the log's size when the sidecar began waiting for this start, which came later: where this start's lines
    # begin in a log without dates (None: not known; the size when the watch began)
    log_start_size: int | None = None
    engine: str | None = None  # None: detect
    model_path: Path | None = None  # weights on disk, for the fraction read
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    after: AfterReadyConfig = field(default_factory=AfterReadyConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    sample_interval: float = 1.0  # process / GPU samplers
    grace: float = 10.0  # SIGTERM -> SIGKILL grace period when stopping the server
    keep_on_failure: bool = False
    after_ready: str = "supervise"  # supervise (stay in the foreground) | detach (leave it running) | stop
    echo_server_output: bool = True
    serving_interval: float = 10.0  # after READY: an active check when nothing completed for this long; 0: off


@dataclass(frozen=True)
class Outputs:
    """What a run writes and serves besides its verdict: the CLI's ``--record``/``--report``/``--trace``,
    ``--json``/``--plain``, ``--metrics-port``, ``--serve-readiness`` and the group's members; the API's
    ``record``/``report``/``trace``. Typed once here, so no layer passes them as loose keywords."""

    record: Path | None = None  # every observation, as JSON Lines (replays to the same verdict)
    report: Path | None = None  # the run drawn as one self-contained HTML page, whatever the verdict
    trace: Path | None = None  # the run as Chrome trace-event JSON (ui.perfetto.dev)
    json: bool = False  # JSON Lines events on stdout
    plain: bool = False  # plain lines on a terminal too (no live dashboard)
    metrics: str | None = None  # [HOST:]PORT of the Prometheus scrape
    readiness: str | None = None  # HOST:PORT of /readyz /livez /startupz
    deployment: str | None = None  # the deployment label of the metrics
    members: tuple[str, ...] = ()  # the base URLs of a multi-node start's other firstlights
    member_port: int = 8081  # their readiness port under LeaderWorkerSet
