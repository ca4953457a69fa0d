"""NVIDIA TensorRT-LLM ``trtllm-serve``.

``launch_server`` (``tensorrt_llm/commands/serve.py``) binds the socket first ("Failed to bind socket to
{host}:{port}" on conflict), builds the whole ``LLM(...)`` (weights, KV cache, autotuning, CUDA graphs), then
runs uvicorn on the pre-bound socket, so uvicorn's "Application startup complete." is the ready line and no
"Uvicorn running on" is printed. The gRPC entry point prints "Model loaded successfully" and "Server is
ready to accept requests".

Under Triton's TensorRT-LLM backend the server is Triton's: its model repository's models load
("model_lifecycle.cc:472] \"loading: tensorrt_llm:1\""), each rank's runtime says "Loaded engine size: N MiB", and
Triton starts its endpoints ("Started HTTPService at 0.0.0.0:8000") once the models have loaded.
"""

from __future__ import annotations

from .common import FRAME_MARKERS, NCCL_PHASES, SERVED_MARKERS, SHARD_PROGRESS, TORCH_FAILURES, TRITON_PHASES
from .profile import (
    METRICS,
    WRAPPER_RANK,
    CommandFlags,
    EndpointRule,
    Endpoints,
    EngineProfile,
    FailureSignature,
    PhaseMarker,
    owned_by,
)
from .profile import SpecMetric as M

S = FailureSignature
P = PhaseMarker

TRTLLM = EngineProfile(
    name="trtllm",
    display_name="TensorRT-LLM (trtllm-serve)",
    default_port=8000,
    default_host="localhost",
    command_patterns=(
        r"(?:^|[\s/])trtllm-serve(?:\s|$)",
        r"\btensorrt_llm\.commands\.serve\b",
        r"\bnvcr\.io/nvidia/tensorrt-llm\b",
    ),
    endpoints=Endpoints(
        health="/health_generate",  # /health only checks the executor; this one generates a token
        models="/v1/models",
        metrics="/prometheus/metrics",  # /metrics is JSON iteration stats, not Prometheus
        info=("/version", "/server_info"),
        lying_while_loading=(),
        listens_before_ready=False,
    ),
    endpoint_rules=(
        *owned_by("tensorrt_llm"),
        # its /server_info may hold keys SGLang's and vLLM's do: this one is its own, weighed first
        EndpointRule(("/server_info", "/get_server_info"), json_any=("disaggregated_params",), priority=2),
        # its /metrics is its iteration stats as a JSON array, not Prometheus
        EndpointRule(("/metrics", "/prometheus/metrics"), status=(200,), json_list=True, priority=METRICS,
                     ask=("/metrics",)),
    ),
    ignore_eos=True,
    phase_markers=(
        P(r"Starting TensorRT-LLM init|TensorRT-LLM version: ", "process_start"),
        # the PyTorch backend's model init over, then its KV cache sized from the memory fraction and max_tokens
        # (corpus: h-trtllm-serve-gptoss120b-rtxpro-kv-window-reduced)
        P(r"^Model init total -- [\d.]+s$", "weights_loaded"),
        P(r"\bBoth free_gpu_memory_fraction and max_tokens are set\b", "kv_cache"),
        P(r"init_process_group|Initializing MPI|MPI size: \d+", "distributed_init", weak=True),
        P(
            r"Loading model weights|Loading weights|Use \S+ for loading weights|ModelLoader",
            "weights_loading",
        ),
        P(
            r"Model loaded successfully|Loading model weights took|weights loaded in",
            "weights_loaded",
            weak=True,
        ),
        P(
            r"\[MemUsageChange\].*(?:KV cache|kv cache)|"
            r"Allocated [\d.]+ GiB for max tokens in paged KV cache|"
            # the C++ runtime's sizing of its paged cache (older releases, Triton's backend)
            r"Max KV cache pages per sequence: \d+|Max tokens in paged KV cache: \d+|"
            # the C++ runtime's allocation of it (corpus: d-trtllm-triton-tp-kv-allocated-ensemble-loaded)
            r"Allocate \d+ bytes for k/v cache|Using \d+ total tokens in paged KV cache",
            "kv_cache",
            weak=True,
        ),
        P(r"[Aa]utotun(?:er|ing)", "compile", weak=True),
        P(r"[Cc]apturing CUDA graph|CUDA graph warmup|cuda_graph_batch_sizes", "cuda_graph", weak=True),
        P(r"TensorRT-LLM gRPC server started on", "http_listening"),
        # Triton's TensorRT-LLM backend (corpus: b-trtllm-triton-compose-loading, b-trtllm-triton-tp2-double-spaced)
        P(r"^\"?loading: \w+:\d+\"?$", "weights_loading"),  # after its glog head (model_lifecycle.cc)
        # one model of its repository loaded (a pre/postprocessing one): the repository's load goes on
        # (corpus: b-trtllm-triton-unfilled-template-params)
        P(r"^\"?successfully loaded '\w+'", "weights_loading", weak=True),
        # the engine file read: its deserialisation onto the GPUs follows, rank by rank
        P(r"\[TensorRT-LLM\]\[INFO\] Loaded engine size: [\d.]+ [MG]iB", "weights_loading", weak=True),
        # each rank's execution context made once its engine is on the GPU ("[MemUsageChange] Allocated 480.04 MiB
        # for execution context memory.")
        P(r"\[TensorRT-LLM\]\[INFO\] \[MemUsageChange\] Allocated [\d.]+ [MG]iB for execution context memory",
          "weights_loaded", weak=True),
        # the paged KV cache sized ("[TensorRT-LLM][INFO] Using 693 tokens in paged KV cache.")
        P(r"\[TensorRT-LLM\]\[INFO\] Using \d+ tokens in paged KV cache", "kv_cache"),
        *TRITON_PHASES,
        # the LLM API's model loader, step by step ("Loading Model: [2/2]\tBuilding TRT-LLM engine", llmapi/
        # llm_utils.py; corpus: f-trtllm-k8s-llmaz-qwen2-engine-build)
        P(r"^Loading Model: \[\d+/\d+\]\s+Building TRT-LLM engine", "compile"),
        P(r"^Loading Model: \[\d+/\d+\]\s+Loading ", "weights_loading"),
        P(r"^Loading model done\.$", "weights_loaded", weak=True),
        *NCCL_PHASES,
    ),
    progress_markers=SHARD_PROGRESS,
    failure_signatures=(
        S(
            r"Failed to bind socket to \S+",
            "port_in_use",
            "the port is already in use (trtllm-serve binds before loading): change --port",
            True,
        ),
        # the executor's memory check names the component it could not create (PyTorch flow, py_executor_creator):
        # the KV cache, in what is left after the model
        S(
            r"The following component could not be created: KV cache",
            "kv_cache",
            "the KV cache does not fit after the model: lower --kv_cache_free_gpu_memory_fraction's need (max batch "
            "size, max tokens, max sequence length) or add GPUs",
            True,
        ),
        S(
            r"maxTokensInPagedKvCache must be large enough to process at least 1 sequence",
            "kv_cache",
            "the KV cache left after the engine cannot hold one sequence: raise --kv_cache_free_gpu_memory_fraction "
            "or lower max_seq_len",
            True,
        ),
        # the ranks MPI started are not the engine's TP x PP (a TP2 engine launched without mpirun -n 2)
        S(
            r"Assertion failed: mpiSize == tp \* pp\b",
            "bad_argument",
            "the engine was built for more ranks than MPI started: launch world_size = TP x PP ranks",
            True,
            None,
            "distributed_init",
        ),
        S(
            r"Executor creation failed due to insufficient GPU memory",
            "oom",
            "not enough GPU memory for the executor: see the component it names",
            True,
        ),
        S(
            # TLLM_CUDA_CHECK's "CUDA runtime error in ...: out of memory (file:line)", also where a terminal's
            # wrap left only its tail on a line of its own
            r"\[TensorRT-LLM\]\[ERROR\].*out of memory|OutOfMemory|Requested amount of GPU memory|"
            r": out of memory \(\S*tensorrt_llm\S*:\d+\)",
            "oom",
            "not enough GPU memory: lower --kv_cache_free_gpu_memory_fraction, --max_batch_size or "
            "--max_num_tokens",
            True,
        ),
        S(
            r"MPI_ABORT was invoked|Executor worker returned error|Executor worker died",
            "other",
            "an executor/MPI worker died: see the error above",
            True,
            WRAPPER_RANK,
        ),
        # the executor failing to start on a rank (PyTorch flow), and a C++ exception printed as it is thrown, its
        # backtrace after it (corpus: f-trtllm-serve-pytorch-autotune-gemm-assert, f-trtllm-grps-deepseek-4gpu-xqa-
        # assert)
        S(
            r"\[E\] Failed to initialize executor on rank \d+: |"
            r"^\[TensorRT-LLM\]\[ERROR\] tensorrt_llm::common::TllmException: ",
            "other",
            "TensorRT-LLM could not start its executor: the error on this line names the check that failed",
            True,
            5,
        ),
        S(
            r"RuntimeError: \[TensorRT-LLM\]\[ERROR\]",
            "other",
            "TensorRT-LLM raised an error: see above",
            True,
            5,
        ),
        *TORCH_FAILURES,
    ),
    # Triton's endpoints, started once its models have loaded (corpus: b-trtllm-triton-tp8-http-before-engines)
    ready_markers=(r"^Application startup complete\.", r"Server is ready to accept requests",
                   r"^\"?Started HTTPService at \S+", *SERVED_MARKERS),
    listening_markers=(
        r"^\"?Started HTTPService at \S+",
        r"^Application startup complete\.",
        r"Uvicorn running on \S+",
        r"TensorRT-LLM gRPC server started on",
    ),
    spec_decoding=(
        M("perf_metrics", "speculative_decoding.acceptance_rate", "per request: accepted / drafted"),
        M("perf_metrics", "speculative_decoding.total_accepted_draft_tokens", "per request"),
        M("perf_metrics", "speculative_decoding.total_draft_tokens", "per request"),
    ),
    flags=CommandFlags(model=(), model_after=("trtllm-serve", "serve"), tp=("--tp_size", "--tp-size"),
                       pp=("--pp_size", "--pp-size"), dp=(), nnodes=(), quantization=(),
                       context=("--max_seq_len", "--max-seq-len")),
    port_flags=("--port",),
    host_flags=("--host",),
    detect_patterns=(
        (r"\[TRT-LLM\]", 4),
        (r"\[TensorRT-LLM\]", 4),
        (r"tensorrt_llm", 3),
        (r"^\s*File \"[^\"]*[/\\]tensorrt_llm[/\\][\w/\\]+\.py\", line \d+, in ", 1),  # a traceback frame of its own
        (r"trtllm-serve", 3),
        (r"\btensorrtllm_backend\b", 4),  # Triton's TensorRT-LLM backend, by its name (a path, a prompt)
        # Triton loading its TensorRT-LLM model (the backend's own name for it)
        (r"\bmodel_lifecycle\.cc:\d+\] \"?(?:loading: |successfully loaded ')tensorrt_llm\b", 4),
        # any Triton line (glog: "file.cc:N] ") naming its TensorRT-LLM model ("Model 'tensorrt_llm' loading failed")
        (r"\.cc:\d+\] .{0,160}'tensorrt_llm'", 4),
        # Triton's model table naming it, and its Python backend's instance of the TensorRT-LLM BLS model
        # (corpus: f-trtllm-triton-v100-models-ready-table, f-trtllm-triton-llava-orte-init-failed)
        (r"^\|\s*tensorrt_llm(?:_bls)?\s*\|\s*\d+\s*\|", 4),
        (r"\bTRITONBACKEND_\w+: tensorrt_llm\w*", 4),
    ),
    frame_markers=FRAME_MARKERS,
    notes="Binds early, listens only when the LLM is built.",
)
