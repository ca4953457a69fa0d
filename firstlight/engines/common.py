"""Signatures shared by engines: PyTorch/CUDA/ROCm, NCCL, Hugging Face Hub, safetensors, uvicorn.

Sources: PyTorch and CUDA runtime error texts, NCCL (``pynccl_wrapper``/ProcessGroupNCCL), transformers and
huggingface_hub exceptions, safetensors (``MetadataIncompleteBuffer`` in old releases, "incomplete metadata,
file not fully covered" in new ones), uvicorn's bind error. Engine modules add their own wording on top.
"""

from __future__ import annotations

from firstlight.deaths import CRASH_HINT

from .profile import FailureSignature, PhaseMarker, ProgressMarker

S = FailureSignature

# A traceback frame line, up to the function name.
FRAME = r"^\s*File \"[^\"]*\", line \d+, in "

# An exception's last line, as printed at the end of a Python traceback.
EXC = r"^(?:[\w.]+\.)?\b"

OOM_HINT = (
    "GPU out of memory: lower the memory fraction / max context / batch size, use a smaller or quantized "
    "model, or add GPUs (tensor parallel)"
)

NCCL_HINT = (
    "NCCL failed: check NCCL_DEBUG=INFO output, shm size (--shm-size/--ipc=host), P2P/IB settings "
    "(NCCL_P2P_DISABLE, NCCL_IB_DISABLE) and that all GPUs are visible"
)

TORCH_FAILURES: tuple[FailureSignature, ...] = (
    # --- GPU memory -----------------------------------------------------------------------------
    S(r"\bOutOfMemoryError: (?:CUDA|HIP|XPU)? ?out of memory", "oom", OOM_HINT, True),
    S(r"\b(?:CUDA|HIP) out of memory(?:\. Tried to allocate| occurred when)", "oom", OOM_HINT, True),
    # "CUDA driver error: out of memory" (torch's driver-API check, a Marlin repack: tests/fixtures/corpus/
    # a-vllm-v1-marlin-repack-cuda-driver-oom.log)
    S(r"(?:CUDA|HIP|hip|cuda)(?: driver)? ?[Ee]rror: out of memory", "oom", OOM_HINT, True),
    S(r"CUDA runtime error.*out of memory", "oom", OOM_HINT, True),
    S(
        r"\b(?:cudaErrorMemoryAllocation|hipErrorOutOfMemory|CUBLAS_STATUS_ALLOC_FAILED)\b",
        "oom",
        OOM_HINT,
        True,
    ),
    S(r"\bkIOGPUCommandBufferCallbackErrorOutOfMemory\b", "oom", OOM_HINT, True),
    # ggml's CUDA/HIP allocation failure, whichever program embeds ggml (an Ollama runner read by the generic
    # profile: c-ollama-journal-deepseek-cudamalloc-panic)
    S(r"\b(?:cudaMalloc|hipMalloc) failed: out of memory", "oom", OOM_HINT, True),
    S(r"NCCL WARN Cuda failure 'out of memory'|Failed to CUDA calloc", "oom", OOM_HINT, False),
    # NCCL's own warning of a failed connection or call, in its "host:pid:tid [dev] NCCL WARN ..." frame: the cause
    # a later wrapper ("Scheduler hit an exception") stands for (corpus: c-sglang-nccl-socket-connect-abort-tp0.log)
    S(r"\bNCCL WARN \w[^\n]{0,200}?(?:\bfailed\b|\berror\b|\btimed? ?out\b)", "nccl", NCCL_HINT, False),
    # --- another process on the GPU -----------------------------------------------------------------
    S(
        r"Process \d+ has [\d.]+ [KMGT]iB memory in use\..*this process has",
        "gpu_occupied",
        "out of memory while another process holds GPU memory (the OOM message lists it): stop it "
        "(nvidia-smi) or pick a free GPU",
        True,
    ),
    S(
        r"CUDA-capable device\(s\) (?:is|are)(?:/are)? busy or unavailable|"
        r"all CUDA-capable devices are busy or unavailable",
        "gpu_occupied",
        "the GPU is in exclusive-process mode and another process holds it: stop it (nvidia-smi) or "
        "change the compute mode",
        True,
    ),
    # --- kernels not built for this GPU ---------------------------------------------------------------
    S(
        r"no kernel image is available for execution on the device",
        "kernel_image",
        "the wheel/kernels were not built for this GPU architecture: install a build for its compute "
        "capability (or disable the custom kernel / CUDA graphs)",
        True,
    ),
    S(
        r"(?:^|: )(?:CUDA|HIP|hip) error: invalid device function\b|"
        r"\b(?:hipErrorInvalidDeviceFunction|hipErrorNoBinaryForGpu)\b|\bNo binary for gpu\b",
        "kernel_image",
        "kernels were not compiled for this GPU (arch/gfx target): rebuild or install a matching wheel",
        True,
    ),
    S(
        r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",
        "kernel_image",
        "this PyTorch build does not support the GPU's compute capability: install a matching PyTorch",
        False,
    ),
    S(
        r"FlashAttention only supports (?:Ampere|Turing|Hopper) GPUs or newer|"
        r"the provided PTX was compiled with an unsupported toolchain",
        "kernel_image",
        "the attention/kernel library does not support this GPU (or driver): use another attention "
        "backend or a build for this architecture",
        True,
    ),
    # --- quantization ---------------------------------------------------------------------------------
    S(
        r"The quantization method \S+ is not supported for the current GPU|Unknown quantization method: |"
        r"No compressed-tensors compatible scheme was found|"
        r"Cannot find any of .* in the model's quantization config",
        "quantization",
        "the quantization method/scheme is unknown, inconsistent with the checkpoint, or needs a newer GPU",
        True,
    ),
    # --- corrupt / mismatched checkpoints -----------------------------------------------------------
    S(
        r"\bSafetensorError: Error while deserializing header|incomplete metadata, file not fully covered|"
        r"\b(?:MetadataIncompleteBuffer|HeaderTooLarge|HeaderTooSmall)\b",
        "corrupt_weights",
        "a safetensors shard is truncated or not a safetensors file (Git LFS pointer?): re-download it "
        "and check sizes/sha256",
        True,
    ),
    S(
        r"invalid load key, |PytorchStreamReader failed reading zip archive|"
        r"failed finding central directory",
        "corrupt_weights",
        "a .bin/.pt checkpoint is truncated or an LFS pointer: re-download the weights",
        True,
    ),
    S(
        EXC + r"KeyError: '(?:model|transformer|lm_head|language_model|vision_tower|visual|encoder|decoder|"
        r"backbone|mtp|layers)\.[\w.]*'",
        "corrupt_weights",
        "checkpoint tensor names do not match what the model code expects (wrong quantization flag, "
        "revision, or an unsupported/modified checkpoint layout)",
        False,
    ),
    S(
        r"size mismatch for [\w.]+: copying a param|Error\(s\) in loading state_dict",
        "corrupt_weights",
        "checkpoint tensor shapes do not match the model config: check model revision/quantization",
        False,
    ),
    # --- NCCL ------------------------------------------------------------------------------------------
    S(
        r"\bNCCL error\b|\b(?:ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclInvalidUsage|"
        r"ncclRemoteError|DistBackendError)\b",
        "nccl",
        NCCL_HINT,
        True,
    ),
    S(
        r"Watchdog caught collective operation timeout|\bProcessGroupNCCL\b.*(?:timeout|Timeout)|"
        r"\bDistNetworkError\b",
        "nccl",
        "a collective timed out: one rank hung or died; check the other ranks' logs and NCCL settings",
        True,
    ),
    # --- ports --------------------------------------------------------------------------------------------
    # torch.distributed's rendezvous store (MASTER_PORT, 29500 by default) cannot bind: the port is taken by another
    # job's rendezvous, in distributed init (corpus: b-tgi-openshift-master-port-in-use.log)
    S(
        r"The server socket has failed to (?:listen on any local network address|bind to \S+ \(errno: (?:98|48)\b)",
        "port_in_use",
        "the distributed rendezvous port (MASTER_PORT, 29500 by default) is already in use: stop the other job "
        "or set another MASTER_PORT",
        True,
        phase="distributed_init",
    ),
    S(
        r"\[Errno (?:98|48)\].*[Aa]ddress already in use|\[WinError 10048\]|"
        r"error while attempting to bind on address|bind: address already in use|"
        r"errno: (?:98|48) - Address already in use|\b(?:AddrInUse|EADDRINUSE)\b",
        "port_in_use",
        "a port is already in use (the HTTP port, or a distributed/NCCL port such as 29500): stop the "
        "other server or choose other ports",
        True,
    ),
    # --- imports --------------------------------------------------------------------------------------------
    S(
        EXC + r"(?:ModuleNotFoundError|ImportError):(?: |$)",  # a message on the lines after it, or none
        "import_error",
        "a Python package or compiled extension is missing or built against another torch/CUDA: "
        "reinstall the engine's matching wheels",
        False,
    ),
    # a framework's own exception carrying Python's import failure ("bentoml.exceptions.MissingDependencyException:
    # None (reason: No module named 'tensorflow')"; corpus: f-generic-bentoml-runner-missing-tensorflow)
    S(
        EXC + r"\w*(?:Exception|Error): .{0,200}\bNo module named '[\w.]+'",
        "import_error",
        "a Python package the server needs is missing from its environment: install it (or the engine's extra)",
        False,
    ),
    # the dynamic loader's refusal to start a program (exit status 127): nothing of it ran
    S(
        r"\berror while loading shared libraries: \S+: cannot open shared object file",
        "import_error",
        "a shared library the program needs is missing (not installed in the image, or not on LD_LIBRARY_PATH)",
        True,
    ),
    S(
        r"(?:OSError|ImportError): [^\s:]+\.so(?:\.\d+)*: (?:cannot open shared object file|"
        r"undefined symbol)|\bundefined symbol: \w",
        "import_error",
        "a shared library is missing or ABI-incompatible (CUDA/torch version mismatch): reinstall matching "
        "wheels or fix LD_LIBRARY_PATH",
        False,
    ),
    # --- trust_remote_code ------------------------------------------------------------------------------
    S(
        r"contains custom code which must be executed to correctly load the model|"
        r"Please pass the argument `?trust_remote_code=True`?|"
        r"requires you to execute the (?:configuration|modeling) file in that repo|"
        r"consider setting `?trust_remote_code=True`?",
        "trust_remote_code",
        "the model ships custom code: add --trust-remote-code (after reviewing the repo)",
        True,
    ),
    # --- model not found / not accessible ---------------------------------------------------------------
    S(
        r"\b(?:RepositoryNotFoundError|LocalEntryNotFoundError|RevisionNotFoundError)\b|"
        r"Repository Not Found for url|is not a local folder and is not a valid model identifier|"
        r"Invalid repository ID or local directory specified|does not appear to have (?:a )?files? named|"
        r"Can't load the configuration of|Cannot find the requested files in the (?:disk cache|local cache)|"
        r"HFValidationError: Repo id must|"
        r"No such file or directory: '[^']*(?:config\.json|\.safetensors|\.gguf|\.bin|tokenizer[^']*)'",
        "model_not_found",
        "the model id/path or revision does not exist (or HF_HUB_OFFLINE is set without a cached copy): "
        "check the name, the path inside the container, and the revision",
        True,
    ),
    S(
        r"\bGatedRepoError\b|Cannot access gated repo|Access to model [^\s]+ is restricted|"
        r"You are trying to access a gated repo",
        "model_not_found",
        "gated model: accept its license on huggingface.co and pass HF_TOKEN",
        True,
    ),
    # --- other fatal runtime errors (specific, but not one of the named categories) ---------------------
    S(
        r"CUDA driver version is insufficient for CUDA runtime version|"
        r"The NVIDIA driver on your system is too old|Found no NVIDIA driver on your system|"
        r"No CUDA GPUs are available|CUDA driver initialization failed",
        "other",
        "no usable GPU driver: the driver is missing or older than the CUDA runtime in the image "
        "(or the container was started without GPU access)",
        True,
    ),
    S(
        r"does not recognize this architecture|"
        r"Transformers does not recognize this architecture",
        "other",
        "the installed transformers is too old for this model type: upgrade transformers (or the engine)",
        True,
        25,
    ),
    S(
        r"Bfloat16 is only supported on GPUs with compute capability",
        "other",
        "this GPU has no bfloat16: pass --dtype half (float16)",
        True,
        25,
    ),
    # argparse's own rejection ("prog: error: unrecognized arguments: --x", "argument --dtype: invalid choice:
    # ...", "... the argument has been removed"): the server never started, and the line says which flag.
    S(
        r"^[\w.\- ]+: error: (?:unrecognized arguments|argument |the following arguments are required|"
        r"invalid choice)|\bargument \S+: invalid choice: |\bthe argument has been removed\b",
        "bad_argument",
        "the command line was rejected (an unknown, removed or invalid flag for this engine version): "
        "check --help",
        True,
    ),
    S(
        r"an illegal memory access was encountered|device-side assert triggered|"
        r"unspecified launch failure|\bCUBLAS_STATUS_EXECUTION_FAILED\b",
        "other",
        "a CUDA kernel crashed: try disabling CUDA graphs/custom kernels, and report it with "
        "CUDA_LAUNCH_BLOCKING=1 output",
        True,
    ),
    # A native crash said in words (faulthandler, a launcher shell's report on its child, UCX's handler, a C++
    # abort): crashed, ranked below every named cause and the generic "other" lines, as before, so that a CUDA
    # error printed before the abort stays the root cause.
    S(
        r"^Fatal Python error: |\bSegmentation fault\b|\bcore dumped\b|^terminate called after throwing|"
        r"\bSIGSEGV\b|\bIllegal instruction\b|"
        # a Go runtime's panic (Ollama's runner), oneAPI/SYCL's abort banner (corpus: c-ollama-journal-deepseek-
        # cudamalloc-panic, c-ollama-intel-gpu-abort-docker-desktop)
        r"^panic: |^Abort was called at \d+ line in file:|"
        # a Go runtime's fatal-signal dump: its "SIGABRT: abort" head, and the amd64 register dump that closes it
        # (corpus: c-ollama-journal-runner-sigabrt-registers)
        r"^SIG(?:ABRT|SEGV|BUS|ILL|FPE|TRAP): [a-z ]+$|^rflags +0x[0-9a-f]+$|"
        # ggml's own aborts, whichever program embeds it: a failed GGML_ASSERT, and its CUDA/ROCm error check
        # ("/app/ggml/src/ggml-cuda/ggml-cuda.cu:89: ROCm error"; corpus: f-llamacpp-rocm-docker-4gpu-gfx906-context-
        # destroyed, f-ollama-msty-json-wrapped-ggml-assert-runner-died)
        r"\bGGML_ASSERT\(|ggml-cuda\.cu:\d+: (?:CUDA|ROCm|HIP|MUSA) error$",
        "crashed",
        CRASH_HINT,
        True,
        10,
    ),
)

# Deaths said by a runtime under any engine: a Rust program's panic (mistral.rs, TGI's router: "thread 'main' panicked
# at ..."), ROCm's GPU memory fault, which aborts the process ("Memory access fault by GPU node-1 (Agent handle: ...)
# on address ..."), a Ray actor that died in its constructor
RUNTIME_DEATHS: tuple[FailureSignature, ...] = (
    S(r"^thread '[^']{1,80}' panicked at ", "other",
      "the program panicked at start: its message (on this line or the next) says why", True, 15),
    S(r"^Memory access fault by GPU node-\d+ ", "crashed", CRASH_HINT, True, 10),
    # a Windows process that died of an access violation (0xC0000005), as its parent reports the exit status
    # ("Process exited with code ExitStatus(ExitStatus(3221225477))"; corpus: h-llamacpp-jan-vulkan-rx6800xt-exit-
    # access-violation)
    S(r"\bexit(?:ed with)? (?:code|status)\b.{0,30}?\b3221225477\b", "crashed", CRASH_HINT, True, 10),
    S(r"Exception raised in creation task: The actor died because of an error raised in its creation task",
      "other", "a Ray actor died while it was created: the traceback after it names the cause", True, 5),
    # torch.compile's own exceptions: the start died compiling (corpus: h-vllm-llmd-openshift-triton-cache-permission)
    S(r"^torch\._(?:inductor|dynamo)\.exc\.\w+: ", "other",
      "torch.compile failed: its message says why (an unwritable cache directory: set TRITON_CACHE_DIR and "
      "TORCHINDUCTOR_CACHE_DIR to a writable path; else try --enforce-eager)", True, None, "compile"),
)

WORKER_METHOD_HINT = "a worker failed a step of the start: its traceback (on the worker's lines) names the cause"
# vLLM's Ray and multiprocessing executors (and their forks: Aphrodite) when a worker's method raises: the driver
# re-raises it and the start ends. The method says the step: its model's load, its device's (and NCCL's) set-up, the
# KV cache's sizing (corpus: f-generic-aphrodite-ray-load-model-error). vLLM v0's multiprocessing workers say it
# as `Exception in worker VllmWorkerProcess while processing method load_model.`, its traceback on the lines
# before (corpus: e-vllm-ascend-v084-mp-worker-load-model-exception, e-vllm-v0-deepseek-r1-70b-worker-load-model-oom)
_METHOD = (r"(?:Error executing method '?{m}'?\. This might cause deadlock"
           r"|Exception in worker \S+ while processing method {m}\.)")
WORKER_METHOD_FAILURES: tuple[FailureSignature, ...] = (
    S(_METHOD.format(m="load_model"), "other", WORKER_METHOD_HINT, True, 0, "weights_loading"),
    S(_METHOD.format(m="init_device"), "other", WORKER_METHOD_HINT, True, 0, "distributed_init"),
    S(_METHOD.format(m="(?:determine_num_available_blocks|determine_available_memory|initialize_cache|"
                       "initialize_from_config)"), "other", WORKER_METHOD_HINT, True, 0, "kv_cache"),
)

SERVICE_HINT = "the service's main process exited with an error: the lines before systemd's say why"
# systemd's word on a service's main process, in a pasted journal (journalctl -u, -x): the start is over, whatever
# the engine (corpus: f-ollama-quoted-journalctl-x-mkdir-models-permission-denied). Ranked as the generic wrappers,
# so that the engine's own message before it stays the cause.
SERVICE_FAILURES: tuple[FailureSignature, ...] = (
    S(r"\.service: Main process exited, code=exited, status=[1-9]\d*/", "other", SERVICE_HINT, True, 5),
    S(r"\.service: Main process exited, code=(?:dumped|killed), status=(?:4/ILL|6/ABRT|7/BUS|8/FPE|11/SEGV)\b",
      "crashed", CRASH_HINT, True, 10),
)

MPI_HINT = (
    "MPI could not start the server's ranks (Open MPI's orte_init / MPI_Init failed): check the launcher's environment "
    "(mpirun --allow-run-as-root, OMPI_* variables, shared memory, /dev/shm) and that every rank can start"
)
# Open MPI failing its own initialisation, before any rank runs (TensorRT-LLM's executor, Triton's TensorRT-LLM backend;
# corpus: f-trtllm-triton-llava-orte-init-failed)
MPI_FAILURES: tuple[FailureSignature, ...] = (
    S(r"It looks like (?:orte_init|MPI_INIT|opal_init) failed for some reason", "other", MPI_HINT, True, None,
      "distributed_init"),
)

BAD_ARGUMENT_HINT = (
    "the server rejected its own command line: check the flag against this engine version's --help "
    "(flags are renamed and removed between versions)"
)
# Argument parsers (argparse, llama.cpp's common/arg.cpp) exit before anything loads; their own line is the
# evidence, not the "to show complete usage, run with -h" that follows it.
ARGUMENT_FAILURES: tuple[FailureSignature, ...] = (
    S(r": error: unrecognized arguments: ", "bad_argument", BAD_ARGUMENT_HINT, True),
    S(r": error: argument \S+(?:/\S+)?: (?:invalid choice|invalid \w+ value|expected (?:one|at least one) "
      r"argument|not allowed with)", "bad_argument", BAD_ARGUMENT_HINT, True),
    S(r": error: the following arguments are required: ", "bad_argument", BAD_ARGUMENT_HINT, True),
    S(r"\bargument \S+ (?:has been|was|is) (?:removed|deprecated and removed)\b", "bad_argument",
      BAD_ARGUMENT_HINT, True),
    S(r"^error: (?:invalid argument|unknown argument): ", "bad_argument", BAD_ARGUMENT_HINT, True),
    # clap's (a Rust server's command line: "error: 'mistralrs-server' requires a subcommand but one was not
    # provided"), and the usage line it ends with
    S(r"^error: '[\w.-]+' requires a subcommand but one was not provided", "bad_argument", BAD_ARGUMENT_HINT, True),
    S(r"^Usage: [\w.-]+ \[OPTIONS\]", "bad_argument", BAD_ARGUMENT_HINT, True, 0),
    S(r"^error while handling argument \"", "bad_argument", BAD_ARGUMENT_HINT, True),
    # llama-box's (GPUStack's llama.cpp server: "Invalid argument: --override-tensor"; corpus: h-llamacpp-llama-box-
    # override-tensor-invalid-argument)
    S(r"^Invalid argument: --[\w-]+$", "bad_argument", BAD_ARGUMENT_HINT, True),
    # argparse's usage block at the start of a server's output: it printed it because it rejected the command line,
    # its error line following (corpus: f-lmdeploy-api-server-usage-dump-arg-rejected, where the excerpt stops first).
    # Ranked as a wrapper: the error line, when it comes, is the evidence that names the flag.
    S(r"^usage: [\w.\-]+(?: [\w.\-]+){0,3} \[-h\]", "bad_argument", BAD_ARGUMENT_HINT, True, 0),
)

TRITON_LOAD_HINT = (
    "a model of Triton's repository failed to load: its own line names why (an engine or config that does not match "
    "the backend's version, a missing file); Triton exits unless --exit-on-error=false"
)
# Triton Inference Server, hosting any backend (TensorRT-LLM, vLLM, Python): a model that cannot load ends its start
# (corpus: d-trtllm-triton-engine-config-parse-error, d-trtllm-triton-compose-fmha-key-not-found,
# d-generic-triton-vllm-backend-failed-to-load-all-models)
TRITON_FAILURES: tuple[FailureSignature, ...] = (
    S(r"(?:^|\s)Failed to create instance: ", "other", TRITON_LOAD_HINT, True, None, "weights_loading"),
    S(r"\bModel '[^']+' loading failed with error: ", "other", TRITON_LOAD_HINT, True, None, "weights_loading"),
    S(r"^error: creating server: .{0,80}failed to load all models", "other", TRITON_LOAD_HINT, True, None,
      "weights_loading"),
    # its model table, printed once every model has loaded or failed: "| tensorrt_llm | 1 | UNAVAILABLE: Internal:
    # ..." (corpus: f-trtllm-triton-chatglm2-mpisize-unavailable)
    S(r"^\|\s*[\w.-]+\s*\|\s*\d+\s*\|\s*UNAVAILABLE: ", "other", TRITON_LOAD_HINT, True, None, "weights_loading"),
    # its model repository's load of one model failing ("model_lifecycle.cc:621] failed to load 'tensorrt_llm'
    # version 1: Internal: ...")
    # (Triton 24.x quotes its messages: "model_lifecycle.cc:641] \"failed to load 'tensorrt_llm' version 1: ...";
    # corpus: h-trtllm-triton-compose-engine-config-key-missing)
    S(r"^\"?failed to load '[\w.-]+'(?: version \d+: |\"?$)", "other", TRITON_LOAD_HINT, True, 5,
      "weights_loading"),
)

# Triton's model table with every model READY: its models are loaded ("| tensorrt_llm | 1 | READY |")
TRITON_PHASES: tuple[PhaseMarker, ...] = (
    PhaseMarker(r"^\|\s*[\w.-]+\s*\|\s*\d+\s*\|\s*READY\s*\|$", "weights_loaded", weak=True),
)

TORCH_FAILURES = (*TORCH_FAILURES, *ARGUMENT_FAILURES, *TRITON_FAILURES, *SERVICE_FAILURES, *MPI_FAILURES,
                  *WORKER_METHOD_FAILURES, *RUNTIME_DEATHS)

# An access-log line of a generation that succeeded (HTTP 200 on a generation route): the server served somebody.
# Every profile lists these among its ready markers, so a replay reads READY from them and a live watch takes
# them as the engine's claim, that the judge confirms with its own generation. Linear patterns: fixed fields,
# bounded runs, no two unbounded runs in a row.
GENERATION_ROUTE = (r"/(?:v1/chat/completions|v1/completions|chat/completions|completions?|generate(?:_stream)?|"
                    r"api/generate|api/chat|v1/messages)")
SERVED_MARKERS: tuple[str, ...] = (
    # uvicorn (vLLM, SGLang, TensorRT-LLM, LMDeploy) and other common formats: "POST /generate HTTP/1.1" 200
    r"\"POST " + GENERATION_ROUTE + r"(?:\?[^\s\"]{0,512})? HTTP/[\d.]{1,3}\" 200\b",
    # ... where a platform mounts the API under its own prefix: KServe's "POST /openai/v1/chat/completions"
    r"\"POST (?:/[\w.-]{1,64}){1,2}" + GENERATION_ROUTE + r"(?:\?[^\s\"]{0,512})? HTTP/[\d.]{1,3}\" 200\b",
    # llama.cpp's server: "request: POST /completion 127.0.0.1 200"
    r"\brequest: POST " + GENERATION_ROUTE + r" \S{1,64} 200\b",
    # Ollama's gin: [GIN] 2025/01/20 - 10:11:12 | 200 |  1.5s |  127.0.0.1 | POST "/api/generate"
    r"^\[GIN\] [\d/]{10} - [\d:]{8} \| 200 \|[^|]{1,40}\|[^|]{1,80}\| POST +\"" + GENERATION_ROUTE + r"\"",
)

FRAME_MARKERS: tuple[PhaseMarker, ...] = (
    # Where a crash happened, read from traceback frames ("File ..., line N, in func").
    PhaseMarker(
        FRAME + r"(?:init_torch_distributed|initialize_model_parallel|init_distributed_environment|"
        r"init_process_group|ncclCommInitRank|init_model_parallel_group|ensure_model_parallel_initialized)\b",
        "distributed_init",
    ),
    PhaseMarker(r"^\s*File \"[^\"]*/worker/\w+\.py\", line \d+, in init_device$", "distributed_init"),
    # vLLM's NCCL communicators, set up in distributed init (corpus: c-vllm-worker-pynccl-allreduce-traceback.log)
    PhaseMarker(r"^\s*File \"[^\"]*/device_communicators/\w+\.py\", line \d+, in ", "distributed_init"),
    PhaseMarker(
        FRAME + r"(?:load_model|load_weights|_load_weights|load_weights_and_postprocess|weight_loader\w*|"
        r"safetensors_weights_iterator|_get_weights_iterator|download_weights_from_hf|"
        r"_prepare_weights|load_state_dict|get_model|process_weights_after_loading|(?:gptq|awq)_marlin_(?:moe_)?repack|"
        # LMDeploy's PyTorch engine sharding its model (corpus: f-lmdeploy-pytorch-tp2-baichuan-rank1-failed-dist-model)
        r"_dist_model)$",
        "weights_loading",
    ),
    # a model's layers being built (vLLM's model_executor/, SGLang's srt/, TGI's text_generation_server/ layers and
    # models): only its load builds them (corpus: a-vllm-v1-interleaved-tp-workers-quant-scheme-frames.log)
    PhaseMarker(r"^\s*File \"[^\"]*[/\\](?:model_executor|srt|text_generation_server)[/\\](?:layers|models)[/\\]"
                r"[^\"]*\", line \d+, in "
                r"(?:__init__|create_weights)$", "weights_loading"),
    PhaseMarker(
        FRAME + r"(?:init_memory_pool|_initialize_kv_caches|determine_available_memory|"
        r"determine_num_available_blocks|initialize_kv_cache\w*|get_kv_cache_configs?|"
        r"_check_enough_kv_cache_memory|check_enough_kv_cache_memory|init_cache_engine|"
        r"profile_max_num_token|initialize_cache|profile_run|_dummy_sampler_run|"
        # vLLM's worker given its KV cache config, which also sets up a KV-transfer connector (corpus: f-vllm-llmd-
        # nested-prefix-kv-connector-init-error)
        r"initialize_from_config|ensure_kv_transfer_initialized|"
        # the attention backends chosen per KV-cache group (corpus: h-vllm-kaito-mistral-large3-attn-backend-keyerror)
        r"initialize_attn_backend|get_attn_backends_for_group)$",
        "kv_cache",
    ),
    PhaseMarker(r"File \"[^\"]*/torch/_(?:dynamo|inductor)/", "compile"),
    PhaseMarker(
        FRAME
        + r"(?:init_cuda_graphs|init_device_graphs|capture_model|_capture_cudagraphs|capture_one_batch_size|"
        r"capture_end|warmup_cuda_graphs|capture_graphs|_capture_graph|cuda_graph_warmup)$"
        r"|File \"[^\"]*(?:cuda_graph_runner\w*|torch/cuda/graphs)\.py\"",
        "cuda_graph",
    ),
    PhaseMarker(FRAME + r"(?:_execute_server_warmup|_wait_and_warmup|warmup_model|compile_or_warm_up_model|"
                r"warmup_graphs)$", "warmup"),
    # a quantization method's layers, built as the model's load builds its layers (corpus: h-vllm-llmcompressor-awq-
    # no-compatible-scheme-killed)
    PhaseMarker(r"^\s*File \"[^\"]*[/\\]layers[/\\]quantization[/\\][^\"]*\", line \d+, in ", "weights_loading"),
    # a C++ backtrace's frame of Triton creating a model's instance: its backend loads the model (corpus: h-generic-
    # triton-fastertransformer-neox-kserve-segfault)
    PhaseMarker(r"^\s*\d+\s+0x[0-9a-f]+ (?:\S*::)?TRITONBACKEND_ModelInstanceInitialize\(", "weights_loading"),
    # a C++ backtrace's frame of TensorRT deserializing an engine or its plugins: the engine is being loaded
    # ("7  0x7fdd040952b2 tensorrt_llm::plugins::GPTAttentionPluginCreator::deserializePlugin(...)"; corpus:
    # f-trtllm-grps-deepseek-4gpu-xqa-assert)
    PhaseMarker(r"^\d+\s+0x[0-9a-f]+ \S*::deserialize(?:Plugin|CudaEngine)\(", "weights_loading"),
)

HUB_PROGRESS: tuple[ProgressMarker, ...] = (
    # huggingface_hub's tqdm bars while it fetches a repo into its cache (snapshot_download): the files, then
    # each file's bytes, named by the file ("model-00001-of-00004.safetensors: 45%|...| 1.2G/2.7G"), as in
    # https://github.com/EuroEval/EuroEval/issues/1178 ("config.json: 100%|████| 838/838 [00:00<00:00,
    # 8.49MB/s]"); only a weights file's bar is the download phase (a config's comes with any start)
    ProgressMarker(
        r"^(?:Fetching|Downloading) \d+ files:\s*(?P<pct>\d+)%\|[^|]*\| (?P<done>\d+)/(?P<total>\d+)",
        "download",
        "download",
    ),
    ProgressMarker(
        r"^[\w.-]{1,200}\.(?:safetensors|bin|gguf|pt|pth): +(?P<pct>\d+)%\|[^|]*\| *[\d.]+[kMGTP]?B?/[\d.]+[kMGTP]?B?",
        "download",
        "download",
    ),
)

# Progress bars shared by every engine that uses the HF/safetensors loaders (tqdm, or SGLang's
# "N% Completed | d/t" bar format).
SHARD_PROGRESS: tuple[ProgressMarker, ...] = (
    ProgressMarker(
        r"(?:Loading|Multi-thread loading|Loading safetensors|Loading pt) (?:\w+ )?checkpoint shards:"
        r"\s*(?P<pct>\d+)% Completed \| (?P<done>\d+)/(?P<total>\d+)",
        "shards",
        "weights_loading",
    ),
    ProgressMarker(
        r"(?:Multi-thread loading shards|Loading \w+ checkpoint shards|Loading checkpoint shards):"
        r"\s*(?P<pct>\d+)%(?: Completed \||\|[^|]*\|) (?P<done>\d+)/(?P<total>\d+)",
        "shards",
        "weights_loading",
    ),
    *HUB_PROGRESS,
)

# NCCL's own init lines ("host:pid:tid [dev] NCCL INFO ..."), whichever engine runs it: evidence of distributed
# init (corpus: c-generic-nccl-kube-pod-rings-connected.log). Weak: an NCCL line of a later collective never
# moves a start back.
NCCL_PHASES: tuple[PhaseMarker, ...] = (
    PhaseMarker(r"\bNCCL INFO (?:Bootstrap|Channel \d+/\d+|comm 0x|Connected all (?:rings|trees)|ncclCommInitRank|"
                r"NET/|Using network|cudaDriverVersion|NCCL version|Init COMPLETE|Setting affinity)|"
                r"^NCCL version \d+\.\d+", "distributed_init", weak=True),
    # torch.distributed's Gloo group joining its peers, and the engines' own word on their NCCL ("vLLM is using
    # nccl==2.21.5", "sglang is using nccl==2.27.3"; corpus: d-sglang-compose-tp2-gloo-custom-allreduce)
    PhaseMarker(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks|\bis using nccl==\d", "distributed_init",
                weak=True),
    # oneCCL's (Intel GPUs: "2024:09:14-11:02:35:(  241) |CCL_WARN| topology recognition ..."), and a collective's
    # "current rank: 0, world size: 4" as IPEX prints it
    PhaseMarker(r"\|CCL_(?:WARN|INFO)\| |current rank: \d+, world size: \d+", "distributed_init", weak=True),
)

UVICORN_PHASES: tuple[PhaseMarker, ...] = (
    PhaseMarker(r"^Started server process \[\d+\]", "http_listening"),
    PhaseMarker(r"Uvicorn running on \S+", "http_listening"),
)
