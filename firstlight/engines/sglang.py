"""SGLang (``python -m sglang.launch_server`` / ``sglang serve``).

Wording read from SGLang 0.5.23 (``python/sglang/srt``), ``http_server.py`` at 9c0549b7 (0.4.x) and
0025436e (~0.5.3), and from real 2024-2026 startup logs. Old (0.4.x/0.3.x) and new (0.5.x) lines are both
listed. Order of a start: server_args -> Init torch distributed -> Load weight begin/end -> KV Cache is
allocated / Memory pool end -> Capture cuda graph begin/end (piecewise: Compiling/Capturing num tokens)
-> [draft model: same again] -> max_total_num_tokens=... -> uvicorn lifespan -> "Uvicorn running on"
-> warmup (GET /model_info, POST /generate) -> "The server is fired up and ready to roll!".
"""

from __future__ import annotations

from .clocks import sglang_metrics, sglang_server_info
from .common import FRAME_MARKERS, NCCL_PHASES, SERVED_MARKERS, SHARD_PROGRESS, TORCH_FAILURES, UVICORN_PHASES
from .profile import (
    WRAPPER_RANK,
    ClockEndpoint,
    CommandFlags,
    EndpointRule,
    Endpoints,
    EngineProfile,
    FailureSignature,
    PhaseMarker,
    ProgressMarker,
    ServingCounters,
    SpecMetric,
    metric_prefix,
    owned_by,
)

S = FailureSignature

SGLANG_KV_HINT = (
    "no room left for the KV cache after the weights: raise --mem-fraction-static (within what the GPU has), "
    "lower --context-length / --max-running-requests / --chunked-prefill-size, or use more GPUs"
)
P = PhaseMarker

PHASES: tuple[PhaseMarker, ...] = (
    P(r"^server_args=ServerArgs\(", "process_start"),
    P(r"^Init torch distributed begin\.", "distributed_init"),
    P(r"^Init torch distributed ends\.", "distributed_init", weak=True),
    P(r"^Load weight begin\. avail mem=", "weights_loading"),
    P(r"^Rank \d+: load weight begin\.$", "weights_loading"),
    P(r"^Load weight end\. ", "weights_loaded", weak=True),
    P(r"^KV Cache is allocated\. ", "kv_cache"),
    P(r"^Memory pool end\. avail mem=", "kv_cache", weak=True),
    # piecewise CUDA graph / torch.compile (0.5.x)
    P(r"^Compiling num tokens \(", "compile", weak=True),
    P(r"^Compiling a graph for dynamic shape takes", "compile", weak=True),
    P(r"^Capture piecewise CUDA graph begin", "cuda_graph"),
    P(r"^Capturing num tokens \(", "cuda_graph", weak=True),
    # decode graphs: 0.4.x "Capture cuda graph begin. This can take up to several minutes.",
    # "Capture draft (extend) cuda graph begin"; 0.5.23 "Capture target decode CUDA graph begin."
    P(r"^Capture (?:draft (?:extend )?)?cuda graph begin", "cuda_graph"),
    P(r"^Capture (?:target|draft) (?:decode|verify|prefill|extend) CUDA graph begin", "cuda_graph"),
    P(r"^Capturing batches \(", "cuda_graph", weak=True),
    P(r"^Capture (?:draft (?:extend )?|piecewise )?(?:cuda|CUDA) graph end\.", "cuda_graph", weak=True),
    P(r"^Capture (?:target|draft) (?:decode|verify|prefill|extend) CUDA graph end", "cuda_graph", weak=True),
    *UVICORN_PHASES,
    *NCCL_PHASES,
    # a node of rank >= 1, its schedulers ready (srt/utils launch_dummy_health_check_server): its port opens
    P(r"^(?:Starting dummy health check server|Dummy health check server scheduled on existing loop) at \S+",
      "http_listening"),
    P(r"\"GET /(?:get_)?model_info HTTP/1\.[01]\" 200", "warmup"),
    P(r"\"POST /(?:generate|encode|v1/chat/completions) HTTP/1\.[01]\" 200", "warmup", weak=True),
)

PROGRESS: tuple[ProgressMarker, ...] = (
    *SHARD_PROGRESS,
    ProgressMarker(
        r"^Capturing batches \((?:bs=\d+ )?avail_mem=[\d.]+ ?GB\):\s*(?P<pct>\d+)%\|[^|]*\| "
        r"(?P<done>\d+)/(?P<total>\d+)",
        "cuda_graph",
        "cuda_graph",
    ),
    ProgressMarker(
        r"^Capturing num tokens \([^)]*\):\s*(?P<pct>\d+)%\|[^|]*\| (?P<done>\d+)/(?P<total>\d+)",
        "cuda_graph",
        "cuda_graph",
    ),
    ProgressMarker(
        r"^Compiling num tokens \([^)]*\):\s*(?P<pct>\d+)%\|[^|]*\| (?P<done>\d+)/(?P<total>\d+)",
        "compile",
        "compile",
    ),
)

FAILURES: tuple[FailureSignature, ...] = (
    # its kernel package's loader found no build of its ops for this GPU and torch (sgl_kernel/load_utils.py); the
    # ImportError it raises ends the start
    S(
        r"\[sgl_kernel\] CRITICAL: Could not load any common_ops library",
        "import_error",
        "sgl-kernel has no build for this GPU/torch (an undefined symbol: built against another torch): install the "
        "sgl-kernel wheel that matches SGLang's torch",
        True,
    ),
    S(
        r"The memory capacity is unbalanced\. Some GPUs may be occupied by other processes",
        "gpu_occupied",
        "another process holds memory on one of the GPUs (often a stale server): kill it (nvidia-smi) "
        "before restarting",
        True,
    ),
    S(
        r"Not enough memory\. Please try to increase --mem-fraction-static|Not enough memory to allocate KV cache",
        "kv_cache",
        SGLANG_KV_HINT,
        True,
    ),
    # the profiled KV pool is negative: no room for the cache (it fails, or OOMs at the first batch)
    S(r"is larger than the profiled value -\d+\. Use the profiled value instead", "kv_cache", SGLANG_KV_HINT, False),
    S(
        r"scheduler died during initialization \(exit code: -9\)",
        "oom",
        "the scheduler was SIGKILLed (exit -9), usually by the host OOM killer: check `dmesg -T | grep -i "
        "oom` and host RAM",
        True,
        30,
    ),
    S(
        r"Initialization failed\. warmup error|Server warmup failed; aborting startup",
        "warmup_failed",
        "the HTTP server came up but its internal warmup request failed: see the traceback; check "
        "--host/proxies (NO_PROXY) and SGLANG_WARMUP_TIMEOUT",
        True,
    ),
    S(
        r"Capture cuda graph failed",
        "other",
        "CUDA graph capture failed: try --disable-cuda-graph, or a smaller --mem-fraction-static / "
        "--cuda-graph-max-bs",
        True,
        15,
    ),
    S(
        r"(?:Port|port) (?:\d+ )?is (?:already )?in use|Port is already in use\.",
        "port_in_use",
        "a port SGLang needs (HTTP or one of its internal ports) is in use: stop the old server or change "
        "--port/--nccl-port",
        True,
    ),
    S(
        r"Quantization method specified in the model config \(.*\) does not match the quantization method",
        "quantization",
        "--quantization disagrees with the checkpoint's quantization_config: drop the flag or pass the "
        "checkpoint's method",
        True,
    ),
    S(
        r"Unknown quantization method|is not supported for quantization method|"
        r"No compressed-tensors compatible scheme was found|"
        r"quantization is currently not supported in ROCm|Unsupported quantization",
        "quantization",
        "the quantization method/scheme is not supported by this SGLang build or GPU",
        True,
    ),
    S(
        r"Unsupported architectures?:|Model architectures? \[.*\] (?:is|are) not supported",
        "other",
        "this SGLang version does not support the model architecture: upgrade SGLang",
        True,
        25,
    ),
    # generic wrappers (the root cause is printed next to them)
    S(
        r"Scheduler hit an exception",
        "other",
        "a scheduler (TP worker) crashed: see its traceback",
        True,
        WRAPPER_RANK,
    ),
    S(  # a worker node (--node-rank >= 1) after its schedulers were ready: one of them ended (multi-node)
        r"Scheduler or DataParallelController \d+ terminated with -?\d+",
        "other",
        "a scheduler of this node ended (exit -9 = OOM killer): see the lines above; its dummy /health answered 200 "
        "regardless",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"Received sigquit from a child process",
        "other",
        "a child process failed: see the traceback above",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"Exception in (?:run_tp_server|ModelTpServer|ControllerSingle|ControllerMulti|run_data_parallel)",
        "other",
        "a TP worker crashed during startup: see its traceback",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"(?:TpModelWorkerClient|DataParallelController|DetokenizerManager|TokenizerManager) "
        r"hit an exception",
        "other",
        "an SGLang subprocess crashed: see its traceback",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"Rank \d+ scheduler died during initialization",
        "other",
        "a scheduler process died during initialization: see the lines above (exit -9 = OOM killer)",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"\bInitialization failed\. ",
        "other",
        "SGLang failed to initialize: see the traceback",
        True,
        WRAPPER_RANK,
    ),
    *TORCH_FAILURES,
)

SGLANG = EngineProfile(
    name="sglang",
    display_name="SGLang",
    default_port=30000,
    default_host="127.0.0.1",
    command_patterns=(
        r"(?:^|[\s/])(?:python\d?(?:\.\d+)?\s+)?-m\s+sglang\.(?:launch_server|srt\.server)\b",
        r"(?:^|[\s/])sglang\s+serve\b",
        r"\bsglang[./]launch_server\b",
        r"\blmsysorg/sglang\b",
    ),
    endpoints=Endpoints(
        # /health_generate runs a 1-token generation on every version; /health is the same handler on
        # 0.5.x but answers 200 unconditionally on 0.4.x
        health="/health_generate",
        models="/v1/models",
        metrics="/metrics",
        info=("/server_info", "/get_server_info", "/model_info", "/get_model_info"),
        lying_while_loading=(
            "/model_info",
            "/get_model_info",
            "/v1/models",
            "/server_info",
            "/get_server_info",
            "/ping",
            "/health",  # 0.4.x: always 200
        ),
        listens_before_ready=True,
    ),
    endpoint_rules=(
        *owned_by("sglang"),
        EndpointRule(("/server_info", "/get_server_info"),
                     json_any=("mem_fraction_static", "internal_states", "schedule_policy", "tp_size")),
        EndpointRule(("/model_info", "/get_model_info"), json_all=("model_path", "is_generation"), ask=()),
        metric_prefix("sglang:"),
    ),
    ignore_eos=True,
    # its startup_time breakdown (observability/startup_time.py), in /server_info and as gauges
    clock_endpoints=(ClockEndpoint("/server_info", sglang_server_info), ClockEndpoint("/metrics", sglang_metrics)),
    phase_markers=PHASES,
    progress_markers=PROGRESS,
    failure_signatures=FAILURES,
    ready_markers=(r"The server is fired up and ready to roll!", *SERVED_MARKERS),
    listening_markers=(r"Uvicorn running on \S+",),
    # srt/observability/metrics_collector.py (needs --enable-metrics); num_requests_total counts finished requests
    serving=ServingCounters(done=("sglang:num_requests_total", "sglang:generation_tokens_total"),
                            busy=("sglang:num_running_reqs", "sglang:num_queue_reqs")),
    spec_decoding=(
        SpecMetric(
            "server_info",
            "internal_states[].avg_spec_accept_length",
            "mean tokens accepted per verify step (includes the bonus token), per DP rank",
        ),
        SpecMetric("prometheus", "sglang:spec_accept_length", "gauge: mean accepted length"),
        SpecMetric("prometheus", "sglang:spec_accept_rate", "gauge: accepted / proposed draft tokens"),
        SpecMetric("prometheus", "sglang:spec_verify_calls_total", "counter: verify forward passes"),
        SpecMetric(
            "response_meta", "meta_info.spec_accept_length", "per request: completion_tokens / spec_verify_ct"
        ),
        SpecMetric("response_meta", "meta_info.spec_verify_ct", "per request: number of verify steps"),
        SpecMetric("log", r"accept len: (?P<value>[\d.]+)", "Decode batch line: mean accept length"),
        SpecMetric("log", r"accept rate: (?P<value>[\d.]+)", "Decode batch line (0.5.x): accept rate"),
    ),
    flags=CommandFlags(model=("--model-path", "--model"), tp=("--tp-size", "--tp", "--tensor-parallel-size"),
                       pp=("--pp-size", "--pp", "--pipeline-parallel-size"),
                       dp=("--dp-size", "--dp", "--data-parallel-size"),
                       # a node of rank >= 1 runs only schedulers; its port opens (a dummy /health that answers
                       # 200 forever) once they are ready: a worker, READY when that port is seen listening
                       node_rank=("--node-rank",), context=("--context-length",),
                       kv_dtype=("--kv-cache-dtype",), memory_share=("--mem-fraction-static",),
                       # its weight-cache daemon's client (sgl-project/sglang#27139)
                       attach=(("--weight-cache-mode", "client"),)),
    port_flags=("--port",),
    host_flags=("--host",),
    detect_patterns=(
        (r"^server_args=ServerArgs\(", 4),
        # a traceback's frame in SGLang's own package (corpus: h-sglang-mi300x-dsv3-launch-import-traceback-cut)
        (r"^\s*File \"[^\"]*[/\\]sglang[/\\](?:launch_server\.py|srt[/\\])", 4),
        # its rpyc-era (v0.1) router: "router init state: Traceback ..." (corpus: h-sglang-v01-rpyc-tp2-awq-70b-load)
        (r"^router init state: ", 4),
        (r"The server is fired up and ready to roll", 4),
        (r"^Load weight (?:begin|end)\. ", 4),
        (r"^Memory pool end\. avail mem=", 4),
        (r"^Capture (?:draft (?:extend )?)?cuda graph (?:begin|end)", 4),
        (r"^max_total_num_tokens=\d+", 4),
        (r"Scheduler hit an exception|Exception in run_tp_server|Received sigquit from a child process", 3),
        (r"sglang is using nccl==", 4),
        (r"[/\\]sglang[/\\]srt[/\\]", 4),
        (r"\bsglang\.srt\.\w", 4),  # its modules by name ("Ignore import error when loading sglang.srt.multimodal...")
        (r"\bsgl_kernel\b", 4),  # its kernel package, named in its import and load errors
        (r"\bbackends\.sglang\b", 4),  # a platform's backend for it, naming it (GPUStack's worker.backends.sglang)
        # its piecewise CUDA graph (model_executor/piecewise_cuda_graph_runner.py): log lines and tqdm bars
        (r"^Capture piecewise CUDA graph (?:begin|end)\b|^(?:Compiling|Capturing) num tokens \(num_tokens=\d+", 4),
        (r"sglang\.launch_server|sglang serve", 2),
        (r"^Init torch distributed begin\.", 3),
        (r"^(?:Prefill|Decode) batch[.,] #", 4),
        # its data-parallel controller launching each DP rank, and its warm-up's failure (multimodal_gen too)
        (r"^Launch DP\d+ starting at GPU #\d+", 4),
        (r"Server warmup failed; aborting startup", 4),
        # its progress bars
        (r"^Capturing batches \(bs=\d+ avail_mem=", 4),
        # vLLM's plugins print the same bar (vllm-omni; corpus: e-vllm-omni-npu-hunyuanimage-multithread-shards): not
        # enough alone to take a log from vLLM, which SGLang embeds
        (r"^Multi-thread loading shards:\s+\d+% Completed", 3),
    ),
    embeds=("vllm",),
    frame_markers=FRAME_MARKERS,
    # sglang/srt/model_loader/loader.py, RemoteInstanceModelLoader (--load-format remote_instance): NCCL or
    # TransferEngine from a seed instance, or ModelExpress
    peer_load=(r"^Loading weights from remote instance \.\.\.", r"^ModelExpress: weight transfer complete for "),
    notes="Port opens before warmup; /health is 503 until warmup on 0.5.x but always 200 on 0.4.x.",
)
