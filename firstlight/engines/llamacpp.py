"""llama.cpp ``llama-server`` (and the older ``server`` example).

Wording from ``tools/server/server.cpp``, ``server-http.cpp`` and ``server-context.cpp`` (2025-2026),
from the JSON-log era (2024: ``{"msg":"HTTP server listening"}``, ``"msg":"model loaded"``), and from
``llama-model-loader``/``gguf`` errors. The HTTP server starts *before* the model loads (it answers /health
503 "Loading model"), then "main: model loaded" / "server is listening on ..." / "starting the main loop" /
"all slots are idle". The request log line ("request: GET /health ... 503") also tells the phase: 503 is
"Loading model".
"""

from __future__ import annotations

from .common import SERVED_MARKERS, TORCH_FAILURES
from .profile import (
    WRAPPER_RANK,
    CommandFlags,
    EndpointRule,
    Endpoints,
    EngineProfile,
    FailureSignature,
    ImageEntrypoint,
    JsonValue,
    PhaseMarker,
    ProgressMarker,
    ServingCounters,
    metric_prefix,
    owned_by,
)
from .profile import SpecMetric as M

S = FailureSignature
P = PhaseMarker

LLAMA_OOM_HINT = (
    "not enough VRAM for weights/KV cache: lower -ngl (offload fewer layers), -c (context) or "
    "--parallel, use a smaller quant, or quantize the KV cache (-ctk/-ctv q8_0)"
)

# Shared with Ollama, which runs llama.cpp underneath.
LLAMACPP_PHASES: tuple[PhaseMarker, ...] = (
    # its loader's function names begin a line, or follow a host's or a viewer's own columns ("<embedding>: ",
    # "22:45\tollama\t"): the names are llama.cpp's own (corpus: d-llamacpp-log-viewer-tabbed-print-info-gemma9b)
    P(r"^(?:main|srv\s+\w+): loading model$", "weights_loading"),
    P(r"load_model: loading model '", "weights_loading"),
    P(r"(?:^|\s)llama_model_loader: loaded meta data", "weights_loading"),
    # the GGML era's loader, reading the file's hyperparameters (corpus: e-llamacpp-llama-gpt-compose-ggjt-v3-load-
    # internal: "llama_model_load_internal: format     = ggjt v3 (latest)")
    P(r"(?:^|\s)llama_model_load_internal: ", "weights_loading"),
    # the model's metadata, printed as its file is read (older builds' llm_load_print_meta, newer print_info)
    # (corpus: c-ollama-journal-deepseek-cudamalloc-panic)
    P(r"(?:^|\s)(?:llm_load_print_meta|print_info): ", "weights_loading", weak=True),
    P(r"(?:^|\s)llama_(?:model_)?load_(?:model_)?from_file(?:_impl)?: using device", "weights_loading"),
    P(
        r"(?:^|\s)(?:llm_)?load_tensors: (?:loading model tensors|offload|offloading|offloaded|using)",
        "weights_loading",
        weak=True,
    ),
    # the buffers are sized before their data is read (llama-model.cpp load_tensors, then load_all_data): the load
    # goes on; the context's lines after it are the next phase
    P(r"(?:^|\s)(?:llm_)?load_tensors: +\S+ model buffer size =", "weights_loading", weak=True),
    P(r"(?:^|\s)llama_(?:new_)?context(?:_with_model)?: ", "kv_cache"),
    P(r"(?:^|\s)llama_kv_cache\w*: |KV buffer size =|KV self size =", "kv_cache", weak=True),
    # the context's compute buffers, reserved after its KV cache (corpus: g-llamacpp-rocm-apertus-70b-compute-buffer-
    # oom: "graph_reserve: failed to allocate compute buffers")
    P(r"^(?:graph_reserve|ggml_gallocr_reserve_n): ", "kv_cache", weak=True),
    # the GGML era's loader (2023: "llama.cpp: loading model from /models/llama-2-13b.Q5_K_M.gguf")
    P(r"^llama\.cpp: loading model from ", "weights_loading"),
    # the multimodal projector's load (clip.cpp: "clip_model_load: loaded meta data ...", later clip_model_loader)
    P(r"^clip_model_load(?:er)?: ", "weights_loading", weak=True),
    P(r"warming up the model with an empty run", "warmup"),
    # a router's child reports its load to the router (corpus: c-llamacpp-router-child-loading-progress)
    P(r"\bcmd_child_to_router:state:\{\"state\":\"loading\"", "weights_loading"),
    # b11434 at the default verbosity prints neither of the lines above: the context (KV cache included) is
    # built when the thread pool starts, and the warm-up run follows at once (scripts/llama_server_notes.md).
    P(r"\binit: llama threadpool init, n_threads", "warmup", weak=True),
    # the server's slots, each a share of the context's KV cache, made once the context is (server-context.cpp)
    P(r"^(?:srv\s+)?\w+: initializing slots, n_slots = \d+", "kv_cache", weak=True),
    # each tensor's creation at debug verbosity (llama-model.cpp create_tensor; corpus: f-llamacpp-router-child-debug-
    # create-tensor-loading)
    P(r"\bcreate_tensor: loading tensor ", "weights_loading", weak=True),
)

LLAMACPP_FAILURES: tuple[FailureSignature, ...] = (
    # a supervisor that runs llama-server says it ended (TabbyML: "llama-server <embedding> exited with status
    # code -1"; corpus: d-llamacpp-tabby-supervisor-starting-ctrl-c-exit): the start is over, the lines before say why
    S(
        r"\bllama-server\b.{0,60}\bexited with (?:status|exit) code -?[1-9]\d*",
        "other",
        "llama-server exited before it served: the lines before this one say why (a signal, an error); run it "
        "by hand with the same arguments to see its own output",
        True,
    ),
    S(
        r"cudaMalloc failed: out of memory|ErrorOutOfDeviceMemory|hipMalloc failed: out of memory",
        "oom",
        LLAMA_OOM_HINT,
        True,
    ),
    S(
        r"failed to allocate \w+ buffer|unable to allocate \w+ buffer|failed to allocate compute buffers?",
        "oom",
        LLAMA_OOM_HINT,
        True,
    ),
    # the KV cache's own buffer (llama_kv_cache_init), named after ggml's generic allocation failure: the context
    # (-c) asks more than is left after the weights
    S(
        r"failed to allocate buffer for kv cache|llama_kv_cache_init\(\) failed for self-attention cache",
        "kv_cache",
        "the KV cache of this context does not fit: lower -c (context) or --parallel, quantize the KV cache "
        "(-ctk/-ctv q8_0), or offload fewer layers (-ngl)",
        True,
    ),
    S(
        # the 2023 builds (ggml .bin files): "error loading model: failed to open X: No such file or directory"
        # (corpus: d-llamacpp-server-2023-json-no-such-file)
        r"failed to open GGUF file|gguf_init_from_file\w*: failed to open|"
        r"error loading model: failed to open .{1,400}: No such file or directory",
        "model_not_found",
        "the GGUF path does not exist or cannot be read: check -m/--model (inside the container)",
        True,
    ),
    S(
        r"data is not within the file bounds, model is corrupted or incomplete",
        "corrupt_weights",
        "the GGUF file is truncated or corrupt: re-download it (compare size/sha256)",
        True,
    ),
    S(
        # gguf_init_from_reader is the b11000+ name of the reader (seen on b11434 with a truncated header)
        # a 2023 ggml/ggjt .bin read as GGUF: "gguf_init_from_file: invalid magic number 67676a74" (corpus:
        # d-llamacpp-main-ggjt-invalid-magic)
        r"invalid magic (?:characters|number)|failed to read magic|"
        r"gguf_init_from_(?:file|reader)\w*: failed to read",
        "corrupt_weights",
        "not a GGUF file (or a truncated one): re-download or convert the model",
        True,
    ),
    # a tensor type this build does not know: a quantization format newer than the build (or another fork's)
    # (corpus: c-llamacpp-invalid-ggml-type-42-bitnet)
    S(
        r"tensor '[^']+' has invalid ggml type \d+",
        "quantization",
        "the GGUF uses a quantization type this llama.cpp build does not know: update llama.cpp, or use a GGUF "
        "of a type it supports",
        True,
        None,
        "weights_loading",
    ),
    # a model named on the Hub (-hf) that its endpoint does not know (corpus: c-llamacpp-hf-mirror-repo-404)
    S(
        r"\bget_repo_commit: error: GET failed \((?:401|404)\)",
        "model_not_found",
        "the Hub (or HF_ENDPOINT's mirror) has no such repository: check -hf's repo name and the endpoint",
        False,
    ),
    # the load that follows, with no file to read
    S(
        r"llama_model_load_from_file_impl: exactly one out metadata, path_model, and file must be defined",
        "other",
        "llama.cpp was given no model file to load: see the download's lines above",
        True,
        WRAPPER_RANK,
    ),
    S(
        r"tensor '[^']+' has wrong shape|wrong number of tensors; expected|"
        r"tensor '[^']+' (?:has invalid ggml type|not found)",
        "corrupt_weights",
        "the GGUF does not match this llama.cpp build (or is damaged): re-convert or update llama.cpp",
        True,
    ),
    S(
        r"unknown model architecture: '|unknown pre-tokenizer type|key not found in model: |"
        r"error loading model architecture|error loading model vocabulary",
        "other",
        "this llama.cpp build does not support the model (architecture/tokenizer): update llama.cpp",
        True,
        25,
        "weights_loading",  # read from the GGUF's metadata as it loads
    ),
    # ggml/src/ggml-rpc/ggml-rpc.cpp (b11434): GGML_ABORT when an --rpc worker's answer does not come (it died or
    # its connection broke); the leader aborts at once
    # ggml's CUDA error check (ggml-cuda.cu ggml_cuda_error): "CUDA error: <its text>", then the file's line, then abort
    S(
        r"[/\\]ggml-cuda\.cu:\d+: CUDA error$",
        "other",
        "a CUDA call failed in ggml (see the 'CUDA error:' line before it): a driver/runtime mismatch, a device "
        "lost, or a kernel this GPU cannot run",
        True,
    ),
    S(
        r"Remote RPC server crashed or returned malformed response",
        "crashed",  # ggml-rpc.cpp aborts the leader: a peer's death kills it
        "an --rpc worker died or its connection broke: its own firstlight (the group's member) names what it did",
        True,
    ),
    S(
        r"couldn't bind HTTP server socket|couldn't bind to server socket",
        "port_in_use",
        "the port is already in use: stop the other server or change --port",
        True,
        None,
        "http_listening",  # its HTTP server's bind (corpus: c-llamacpp-windows-couldnt-bind-8080)
    ),
    # generic wrappers
    S(
        r"error loading model: ",
        "other",
        "llama.cpp could not load the model: see the line above",
        True,
        WRAPPER_RANK,
        "weights_loading",
    ),
    S(
        r"failed to load model|unable to load model|exiting due to model loading error|"
        r"llama_init_from_gpt_params: error",
        "other",
        "llama.cpp could not load the model: see the lines above",
        True,
        WRAPPER_RANK,
        "weights_loading",
    ),
    # the context (its KV cache and compute buffers) could not be made, the weights loaded
    S(
        r"failed to initialize the context|failed to create context with model",
        "other",
        "llama.cpp could not make the context (KV cache and compute buffers): see the lines above",
        True,
        WRAPPER_RANK,
        "kv_cache",
    ),
    S(
        r"exiting due to HTTP server error|failed to initialize HTTP server",
        "other",
        "the HTTP server failed to start: see the line above",
        True,
        WRAPPER_RANK,
    ),
)

LLAMACPP_DETECT: tuple[tuple[str, int], ...] = (
    # its loader, also after a supervisor's or a host's prefix (TabbyML's llama-cpp-server: "... <embedding>: ")
    (r"(?:^|\s)llama_model_loader: ", 4),
    # the GGML era's loader (2023, ggjt files; corpus: e-llamacpp-llama-gpt-compose-ggjt-v3-load-internal)
    (r"(?:^|\s)llama_model_load_internal: ", 4),
    # its log's component tags (server, common), also as its router forwards a child's line ("[54881] cmn  ...")
    (r"^(?:\[\d+\] )?(?:srv|cmn)\s+\w+: ", 4),
    (r"^slot\s+\w+: id\s+\d+ \|", 4),
    (r"^main: (?:HTTP server is listening|server is listening|model loaded|loading model)", 4),
    (r"\"(?:msg|message)\":\"(?:HTTP server listening|model loaded|all slots are idle)", 4),
    (r"llama server listening at", 4),
    (r"(?:^|\s)(?:llm_)?load_tensors: ", 3),
    # its model summary (llama-model.cpp's print_info, since 2025; before: llm_load_print_meta), also after a
    # viewer's or a host's own columns (corpus: d-llamacpp-print-info-deepseek-eight-gpu-buffers)
    (r"(?:^|\s)(?:print_info|llm_load_print_meta): [\w ()]+?\s+= ", 4),
    # its usage text, printed at a bad argument: each option's environment variable (common/arg.cpp; corpus:
    # d-llamacpp-textgen-flash-attn-bad-value-exit-1)
    (r"\(env: LLAMA_ARG_[A-Z0-9_]+\)", 4),
    # llama-box's load progress (corpus: d-llamacpp-llama-box-metal-rpc-tensor-progress)
    (r"\bloaded\s+\d{1,3}% model tensors into buffer$", 4),
    (r"^llama_(?:new_)?context(?:_with_model)?: ", 3),
    (r"^build: \d+ \([0-9a-f]+\)", 3),
    # llama.cpp's common library (its server, its CLI, and the backends that embed them: LocalAI's gRPC server), and
    # a router's child reporting to its router (corpus: c-llamacpp-localai-grpc-loads-ok,
    # c-llamacpp-router-child-loading-progress)
    (r"\bcommon_init_from_params: ", 4),
    (r"\bcmd_child_to_router:state:", 4),
    # its CLI's own head (llama-cli, the older `main`; corpus: c-llamacpp-invalid-ggml-type-42-bitnet,
    # c-llamacpp-cli-windows-tensor-out-of-bounds)
    (r"^main: (?:llama backend init$|load the model and apply lora adapter|error: unable to load model$|"
     r"build = \d+ \(|built with )", 4),
    (r"^ggml_(?:cuda|metal|vulkan|backend|sycl)\w*: ", 1),
    (r"llama-server|llama\.cpp", 1),
    # its loader's and context's function names anywhere in a line: a host that embeds it prefixes them
    # ("[error] [WASI-NN] llama.cpp: llama_model_load: error loading model: ...")
    (r"\b(?:llama_model_load|llama_load_model_from_file|llama_model_load_from_file_impl|llama_new_context_with_model|"
     r"llama_init_from_model): ", 4),
    (r"^llama_kv_cache\w*: ", 3),
    # a platform naming the llama.cpp server it runs: llama-box (a fork) by its name (its binary, GPUStack's
    # worker.backends.llama_box), Docker Model Runner's llama.cpp backend component ("[inference.inference-llama.cpp]")
    # (not a download of its release asset: "downloading llama-box-linux-amd64-cuda-12.4", GPUStack's tools manager
    # fetching it, before anything runs; corpus: f-generic-gpustack-docker-server-serving-tools-download)
    (r"\bllama[-_]box\b(?!-(?:linux|darwin|windows)-)", 4),
    (r"\binference-llama\.cpp\b", 3),
    # the program by its name: its own messages ("llama-server: error while loading shared libraries: ...") and its
    # command line echoed by a shell's trace ("+ llama-server --model ...")
    (r"(?:^|[\s/\\])llama-server(?:\.exe)?(?:: | --?[a-z])", 3),
    # ggml's backend registry loading a backend library (ggml-backend-reg.cpp): llama.cpp's builds with dynamic
    # backends, and what embeds them (Ollama, which embeds llama.cpp, wins where its own lines come)
    (r"^load_backend: loaded \w+ backend from \S*libggml-", 4),
    # the 2024 server's text log: "INFO [                    main] HTTP server listening | tid="11744" timestamp=..."
    # (corpus: f-llamacpp-windows-gemma-slow-response-ready)
    (r"^(?:INFO|WARN|ERR|VERB|DEBUG) \[ *\w+\] .{1,300} \| tid=\"\d+\" timestamp=\d+", 4),
    # llamafile's GPU module loader (corpus: f-llamacpp-llamafile-llava-gpu-nvidia-segfault), a tensor's creation at
    # debug verbosity, the runtime's timings of a generation (llama-cpp-python embeds it), ggml's CUDA backend in a
    # CUDA error's report ("in function ggml_backend_cuda_buffer_set_tensor at ...")
    (r"^(?:import_cuda_impl|link_cuda_dso|ggml_cuda_link|get_nvcc_path|get_rocm_bin_path|import_metal_impl|"
     r"link_metal_dso): ", 4),
    (r"\bcreate_tensor: loading tensor ", 4),
    (r"^llama_print_timings: ", 4),
    # the GGML era's loader and context ("llama.cpp: loading model from ...", "llama_init_from_file: failed to load
    # model"), and ggml's CUDA backend listing its devices, as a program that embeds it starts (corpus: g-llamacpp-
    # lcpp-python-docker-gguf-on-ggml-build, g-llamacpp-textgen-webui-invalid-rpc-arg)
    (r"^llama\.cpp: loading model from |^llama_init_from_file: ", 4),
    (r"^ggml_cuda_init: found \d+ \w+ devices?:", 4),
    (r"\bin function ggml_backend_cuda_\w+ at ", 3),
)

LLAMACPP = EngineProfile(
    name="llamacpp",
    display_name="llama.cpp (llama-server)",
    checked_versions=("b11434",),  # scripts/setup_llama_server.py builds it
    default_port=8080,
    default_host="127.0.0.1",
    command_patterns=(
        r"(?:^|[\s/\\])llama-server(?:\.exe)?(?:\s|$)",
        r"\bggml-org/llama\.cpp:server\b|\bggerganov/llama\.cpp:server\b",
        r"(?:^|[\s/])(?:\./)?server\s+(?:.*\s)?(?:-m|--model)\s",
    ),
    endpoints=Endpoints(
        health="/health",
        models="/v1/models",
        metrics="/metrics",  # needs --metrics
        info=("/props",),
        # "allow the models endpoint to be accessed during loading" (2025 builds)
        lying_while_loading=("/v1/models", "/models", "/api/tags"),
        listens_before_ready=True,
    ),
    endpoint_rules=(
        *owned_by("llamacpp"),
        EndpointRule("/props", json_any=("default_generation_settings", "total_slots", "build_info", "chat_template")),
        # its answer while the model loads, on /props and on its health endpoints
        EndpointRule(("/props", "/health", "/v1/health"), ask=("/props",),
                     json=(JsonValue("error.type", "unavailable_error"),
                           JsonValue("error.message", contains="Loading model"))),
        EndpointRule("/models", json=(JsonValue("models", is_list=True),), ask=()),  # the router's model list
        metric_prefix("llamacpp:"),
    ),
    images=(ImageEntrypoint(r"(?:^|/)(?:ggml-org|ggerganov)/llama\.cpp:server", ("llama-server",)),),
    ignore_eos=True,
    phase_markers=(
        *LLAMACPP_PHASES,
        # the request log proves the port is open; 503 on /health means "Loading model"
        P(r"request: GET /(?:v1/)?health \S+ 503$", "weights_loading", weak=True),
        # No http_listening phase: llama-server opens its port before it loads (listens_before_ready), so its
        # "HTTP server is listening" line is a listening marker, not a step past the weights.
    ),
    progress_markers=(ProgressMarker(r"offloaded (?P<done>\d+)/(?P<total>\d+) layers to GPU", "layers"),
                      # llama-box: "0.02.208.203 I loaded  36% model tensors into buffer"
                      ProgressMarker(r"\bloaded\s+(?P<pct>\d{1,3})% model tensors into buffer$", "weights",
                                     "weights_loading"),
                      # a router's child: {"state":"loading","payload":{...,"value":0.1797194480895996}}
                      ProgressMarker(r"\bcmd_child_to_router:state:\{\"state\":\"loading\",.{0,200}?\"value\":"
                                     r"(?P<frac>[\d.]+)", "weights")),
    failure_signatures=(*LLAMACPP_FAILURES, *TORCH_FAILURES),
    ready_markers=(
        *SERVED_MARKERS,
        r"^(?:main|srv\s+\w+): model loaded$",
        r"\"(?:msg|message)\":\"model loaded\"",
        r"(?<!router )\bserver is listening on \S+",
        r"starting the main loop",
        r"^srv\s+start: server is ready$",  # llama-box, after "start: listening host = ..., port = ..."
        # llama-box's older builds: "main: starting server" once its slots are made; its "main: listening" comes
        # before the load (corpus: f-llamacpp-llamabox-split-gguf-4slots-ready)
        r"^srv\s+main: starting server$",
        # llama-cpp-python's server, uvicorn once the model is loaded (corpus: g-llamacpp-lcpp-python-ailab-recipe-
        # uvicorn-ready)
        r"Uvicorn running on \S+",
        # a generation's timings, printed as it ends: the llama.cpp runtime that a server embeds answered one
        # (llama-cpp-python's server: "llama_print_timings:        eval time = ..."; the 2024 server's text log:
        # "INFO [print_timings] prompt eval time = ..."; corpus: f-llamacpp-llamacpppython-llava-metal-uvicorn-ready)
        r"^llama_print_timings: +(?:prompt )?eval time +=|^\w+ \[ *print_timings\] (?:prompt )?eval time +=",
        r"all slots are idle",
        r"request: GET /(?:v1/)?health \S+ 200$",
        # LocalAI's word that its llama.cpp backend loaded the model (corpus: c-llamacpp-localai-grpc-loads-ok)
        r"\[llama-cpp\] Loads OK$",
    ),
    listening_markers=(
        r"HTTP server is listening",
        r"\"(?:msg|message)\":\"HTTP server listening\"",
        r"llama server listening at",
        r"\bserver is listening on \S+",
        r"\bllama_server: listening on \S+",  # b11434
        r"log_server_r: request: ",
    ),
    # tools/server/server-task.cpp to_metrics(): n_decode_total moves with every decode step, tokens_predicted_total
    # at each request's end; requests_processing = busy slots, requests_deferred = waiting for one (needs --metrics)
    serving=ServingCounters(done=("llamacpp:tokens_predicted_total", "llamacpp:n_decode_total"),
                            busy=("llamacpp:requests_processing", "llamacpp:requests_deferred"),
                            slots="/slots"),
    spec_decoding=(
        M("response_timings", "timings.draft_n", "per response: draft tokens proposed"),
        M("response_timings", "timings.draft_n_accepted", "per response: draft tokens accepted"),
        M("log", r"draft acceptance rate = (?P<value>[\d.]+)", "log: draft acceptance rate"),
        M("slots", "speculative", "/slots: each slot's speculative flag (it has a drafter)"),
    ),
    flags=CommandFlags(model=("-m", "--model", "-hf", "--hf-repo"), model_env=("LLAMA_ARG_MODEL",), tp=(), pp=(),
                       dp=(), nnodes=(), quantization=(), rpc=("--rpc",), context=("-c", "--ctx-size"),
                       context_env=("LLAMA_ARG_CTX_SIZE",), kv_dtype=("-ctk", "--cache-type-k"),
                       # --fit (on by default) sizes a context left unset to the memory
                       fits_unset_context=True, context_must_fit=True),
    port_flags=("--port",),
    host_flags=("--host",),
    port_env=("LLAMA_ARG_PORT",),
    host_env=("LLAMA_ARG_HOST",),
    detect_patterns=LLAMACPP_DETECT,
    version_line=r"^build: (?P<version>\d+ \([0-9a-f]+\))",  # tools/server/server.cpp: "build: N (commit) with ..."
    notes="Listens before loading: /health 503 while loading, /v1/models 200 throughout.",
)
