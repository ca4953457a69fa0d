"""firstlight's vocabulary: verdicts, phases, failure categories and exit codes.

Dependency-free on purpose (like Supervisor's ``states`` module): the judge, the reporters, the CLI's help
texts and the tables of docs/usage.md all name these words, and tests check every one of them against this
module, so a word cannot be added in one place and forgotten in another.
"""

from __future__ import annotations

# -- verdicts ------------------------------------------------------------------------------------------
# "starting" is the only verdict that is not final. "regression" is a finding about a server that serves
# (slower than its baseline), never a stop: it only replaces "ready" in the run's result.
STARTING = "starting"
READY = "ready"
FAILED = "failed"
HUNG = "hung"
TIMEOUT = "timeout"
INTERRUPTED = "interrupted"
REGRESSION = "regression"

VERDICTS: tuple[str, ...] = (STARTING, READY, FAILED, HUNG, TIMEOUT, INTERRUPTED, REGRESSION)
FINAL_VERDICTS: tuple[str, ...] = (READY, FAILED, HUNG, TIMEOUT, INTERRUPTED)
SERVING_VERDICTS: tuple[str, ...] = (READY, REGRESSION)

# -- serving states (after READY) --------------------------------------------------------------------------
# What the serving checks say of a server that reached READY. ``hung`` is the verdict word: not serving, and its
# process shows no progress either. SERVING_GAUGE is Prometheus ``firstlight_serving``.
SERVING = "serving"
DEGRADED = "degraded"
NOT_SERVING = "not_serving"
SERVING_STATES: tuple[str, ...] = (SERVING, DEGRADED, NOT_SERVING, HUNG)
SERVING_GAUGE: dict[str, float] = {SERVING: 1.0, DEGRADED: 0.5, NOT_SERVING: 0.0, HUNG: 0.0}

# -- exit codes ----------------------------------------------------------------------------------------
EXIT_CODES: dict[str, int] = {READY: 0, FAILED: 1, HUNG: 2, TIMEOUT: 3, INTERRUPTED: 130}
EXIT_REGRESSION = 4  # only with --fail-on-regression; otherwise a regression exits 0 like ready
EXIT_USAGE = 64
EXIT_INTERNAL = 70

# -- phases --------------------------------------------------------------------------------------------
# Engine-neutral startup phases, in the order a start goes through them. Within one start the phase only
# moves forward along this tuple.
PHASES: tuple[str, ...] = (
    "process_start",
    "distributed_init",
    # the weights fetched from a model hub (Hugging Face's cache growing, the engine's download lines, Ollama's
    # pull) before they are read; a start whose weights are on disk skips it
    "download",
    "weights_loading",
    "weights_loaded",
    "compile",  # torch.compile / JIT: vLLM compiles before it sizes the KV cache (its profile run)
    "kv_cache",
    "cuda_graph",
    "http_listening",
    "warmup",
    "ready",
)
PHASE_INDEX: dict[str, int] = {p: i for i, p in enumerate(PHASES)}

# What a start that stopped moving in a phase is usually doing there: the hint of a hung verdict, and of a log
# that ends with no verdict (replay's "incomplete").
STALL_HINTS: dict[str, str] = {
    "process_start": "no engine progress line yet: still importing, downloading or compiling kernels, or the "
    "log level hides the markers",
    "distributed_init": "in distributed init: a hang here is usually NCCL (NCCL_DEBUG=INFO, P2P/IB "
    "settings, shm size)",
    "download": "downloading the weights: check the network, the hub's rate limit and HF_TOKEN; download them "
    "before the start (huggingface-cli download, ollama pull) and serve from the local cache",
    "weights_loading": "loading weights: compare disk/network read throughput with the checkpoint size",
    "weights_loaded": "weights loaded; profiling memory and allocating the KV cache come next",
    "kv_cache": "profiling memory / allocating the KV cache",
    "compile": "torch.compile / JIT compilation: minutes on a cold cache (persist the compile cache)",
    "cuda_graph": "capturing CUDA graphs: can take minutes; no progress for long may be a hang",
    "http_listening": "the HTTP port is up but the engine's ready line has not appeared yet (warmup "
    "pending); do not trust /v1/models here",
    "warmup": "warming up: the first generation may be slow (JIT kernels)",
}
# The phase after READY: the server serves, and firstlight watches it serving (Prometheus ``firstlight_phase``;
# the ``phase`` of a result whose server died after READY). Not a startup phase: no log line leads a start into
# it, so it is outside PHASES and PHASE_INDEX (which the engines' phase markers are checked against).
SERVING_PHASE = "serving"
ALL_PHASES: tuple[str, ...] = (*PHASES, SERVING_PHASE)

# A download found after the engine said it began loading (vLLM's "Starting to load model", SGLang's "Load weight
# begin" come before the weights are fetched): the loading had not begun, so that span is the download's. The only
# phase a start is moved back to, and only from the phase right after it, before that phase showed any progress.
RELABELS: dict[str, str] = {"download": "weights_loading"}

# -- failure categories --------------------------------------------------------------------------------
# Rank = how specific (how close to the root cause) a category is: when several failure lines are seen,
# the highest rank wins; ties go to the earliest line. Generic wrappers ("Scheduler hit an exception",
# "EngineCore failed to start") are ``other`` with WRAPPER_RANK so that anything more specific wins.
CATEGORY_RANK: dict[str, int] = {
    "gpu_occupied": 100,
    "kernel_image": 95,
    "bad_argument": 94,
    "port_in_use": 92,
    "trust_remote_code": 90,
    "model_not_found": 88,
    "quantization": 82,
    # the KV cache does not fit in what is left after the weights: a memory failure with its own fix (the memory
    # fraction, the context length), named over a generic out-of-memory line of the same death
    "kv_cache": 81,
    "oom": 80,
    "corrupt_weights": 75,
    "import_error": 70,
    "nccl": 60,
    "warmup_failed": 40,
    "other": 20,
    # a native crash (a signal the server did not ask for) is a symptom: any cause its log names wins over it,
    # even one filed under "other" (a CUDA illegal memory access before the abort); it beats generic wrappers
    "crashed": 15,
}
WRAPPER_RANK = 0
# From the server's answers, not its log: it serves, but not valid text.
BAD_GENERATION = "bad_generation"
# From the server's answer against the one this deployment gave before (the known answer): it serves valid text,
# but other weights' answer.
WRONG_ANSWER = "wrong_answer"
FAILURE_CATEGORIES: tuple[str, ...] = (
    "oom",
    "kv_cache",
    "gpu_occupied",
    "quantization",
    "kernel_image",
    "corrupt_weights",
    "nccl",
    "port_in_use",
    "import_error",
    "trust_remote_code",
    "warmup_failed",
    "model_not_found",
    "bad_argument",
    "crashed",
    "other",
)
ALL_FAILURES: tuple[str, ...] = (*FAILURE_CATEGORIES, BAD_GENERATION, WRONG_ANSWER)
# The phase a start is in when a failure of these categories kills it, whatever line said it: NCCL fails in
# distributed init, the KV cache in its sizing, a warmup in the warmup, a checkpoint while its weights load. A
# fatal failure line moves the phase forward to it (never back), as a traceback frame does: a log that shows the
# death and nothing before it still says where the start died.
FAILURE_PHASES: dict[str, str] = {
    "nccl": "distributed_init",
    "kv_cache": "kv_cache",
    "warmup_failed": "warmup",
    "corrupt_weights": "weights_loading",
}


def exit_code(verdict: str, fail_on_regression: bool = False) -> int:
    """The process exit code of a final verdict (``regression`` exits 4 only when asked to)."""
    if verdict == REGRESSION:
        return EXIT_REGRESSION if fail_on_regression else EXIT_CODES[READY]
    return EXIT_CODES[verdict]
