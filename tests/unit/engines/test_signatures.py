"""Every failure signature in the engine profiles is exercised by at least one real line.

A line comes from a real startup log in ``../shared/logs/``, from the engine fixtures in ``tests/fixtures/engines/``,
from the classification table of ``tests/unit/engines/test_profile.py``, or from ``SIGNATURE_LINES`` below, where each
line's comment names where its wording comes from (the engine's source file, its docs, or an issue or log that quotes
it). Two tests: a signature that no line matches fails the first (a signature nobody can show firing is a guess);
a line that no longer classifies to its category under its engine fails the second (a signature that stopped
matching the wording it was written for).
"""

from __future__ import annotations

import re

import pytest

from firstlight.engines import PROFILES, clean_line, get_profile
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import IN_CI, SHARED
from tests.support.engines_profiles import CLASSIFY_CASES

FIXTURE_LOGS = _FIXTURES / "engines"

# (engine, expected category, line). Timestamps and prefixes are the engine's own log format.
SIGNATURE_LINES: list[tuple[str, str, str]] = [
    # --- any engine, from tests/fixtures/corpus/ (real logs of public issues) ----------------------------------
    # NCCL's own warning of a failed connect, in its "host:pid:tid [dev]" frame: c-sglang-nccl-socket-connect-abort-tp0
    ("sglang", "nccl", "h100-15:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to 10.0.0.82<38455> "
                       "failed : Software caused connection abort"),
    # Ollama's scheduler on a runner that died of a Go panic (exit status 2): c-ollama-exit-status-2-vram-not-recovered
    ("ollama", "crashed", 'time=2025-02-20T12:24:52.667+08:00 level=ERROR source=sched.go:455 msg="error loading '
                          'llama server" error="llama runner process has terminated: exit status 2"'),
    # TGI's sharded layers splitting the heads: b-tgi-falcon-heads-not-divisible
    ("tgi", "bad_argument", "ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: 71 and "
                            "`num_shards`: 2"),
    # ggml's CUDA error check aborting a router's child: c-llamacpp-router-child-warmup-cuda-shared-object
    ("llamacpp", "other", "D:\\a\\llama.cpp\\llama.cpp\\ggml\\src\\ggml-cuda\\ggml-cuda.cu:107: CUDA error"),
    # TensorRT-LLM's executor memory check: b-trtllm-serve-qwen3-tp8-kv-insufficient
    ("trtllm", "kv_cache", "The following component could not be created: KV cache"),
    ("trtllm", "oom", "[07/08/2025-19:47:15] [TRT-LLM] [RANK 1] [E] Failed to initialize executor on rank 1: Executor "
                      "creation failed due to insufficient GPU memory."),
    # llama.cpp's KV cache that does not fit: c-llamacpp-1m-ctx-kv-alloc-fail
    ("llamacpp", "kv_cache", "llama_kv_cache_init: failed to allocate buffer for kv cache"),
    # oneAPI's abort banner in Ollama's runner: c-ollama-intel-gpu-abort-docker-desktop
    ("ollama", "crashed", "Abort was called at 63 line in file:"),
    # the dynamic loader refusing to start llama-server: c-llamacpp-compose-up-libgomp-exit-127
    ("llamacpp", "import_error", "llama-server: error while loading shared libraries: libgomp.so.1: cannot open shared "
                                 "object file: No such file or directory"),
    # sgl_kernel's loader with no build for the GPU/torch: b-sglang-sgl-kernel-common-ops-import
    ("sglang", "import_error", "[sgl_kernel] CRITICAL: Could not load any common_ops library!"),
    # torch.distributed's TCPStore on a taken MASTER_PORT: b-tgi-openshift-master-port-in-use
    ("tgi", "port_in_use", "RuntimeError: The server socket has failed to listen on any local network address. The "
                           "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."),
    # Ollama's scheduler giving up a load as systemd stops it: c-ollama-journal-load-canceled-by-stop
    ("ollama", "other", 'time=2025-09-05T17:06:43.313+08:00 level=INFO source=sched.go:441 msg="Load failed" '
                        'model=/home/u/.ollama/models/blobs/sha256-3e4cb1417446 error="context canceled"'),
    # llama.cpp on a GGUF of a type it does not know: c-llamacpp-invalid-ggml-type-42-bitnet
    ("llamacpp", "quantization", "gguf_init_from_file_impl: tensor 'blk.25.ffn_down.weight' has invalid ggml type 42 "
                                 "(NONE)"),
    # llama-server -hf against a mirror without the repository, and the load after it: c-llamacpp-hf-mirror-repo-404
    ("llamacpp", "model_not_found", "0.00.073.098 E get_repo_commit: error: GET failed (404): Sorry, we can't find the "
                                    "page you are looking for."),
    ("llamacpp", "other", "0.00.074.625 E llama_model_load_from_file_impl: exactly one out metadata, path_model, and "
                          "file must be defined"),
    # --- SGLang ---------------------------------------------------------------------------------------------
    # python/sglang/srt/server_args.py, PortArgs.init_new (DP attention): wait_port_available failed
    ("sglang", "port_in_use", "[2025-09-20 10:01:02] Port is already in use. dist_init_port=None port_base=30000 "
                              "detokenizer_port=30001 nccl_port=30233 scheduler_input_port=30002"),
    # python/sglang/srt/models/registry.py, ModelRegistry._raise_for_unsupported
    ("sglang", "other", "[2025-09-20 10:01:02 TP0] ValueError: Unsupported architectures: Glm5NextForCausalLM. "
                        "Supported list: ['LlamaForCausalLM', 'Qwen2ForCausalLM']"),
    # python/sglang/srt/managers/detokenizer_manager.py, run_detokenizer_process
    ("sglang", "other", "[2025-09-20 10:01:02] DetokenizerManager hit an exception: Traceback (most recent call "
                        "last):"),
    # --- llama.cpp's RPC server (b11434) ---------------------------------------------------------------------
    # ggml/src/ggml-rpc/ggml-rpc.cpp, ggml_backend_rpc_start_server: socket_t::create_server failed (bind/listen)
    ("llamarpc", "port_in_use", "Failed to create server socket"),
    # tools/rpc/rpc-server.cpp, main: no device after the -d filter
    ("llamarpc", "bad_argument", "No devices found"),
    # tools/rpc/rpc-server.cpp, rpc_server_params_parse: an unknown flag
    ("llamarpc", "bad_argument", "error: unknown argument: --bogus"),
    # ggml/src/ggml-rpc/ggml-rpc.cpp, ggml_backend_rpc_start_server: rpc_transport_init failed
    ("llamarpc", "crashed", "Failed to initialize RPC transport"),
    # ggml/src/ggml-rpc/ggml-rpc.cpp, rpc_serve_client: a client of another protocol version
    ("llamarpc", "bad_argument", "HELLO request size mismatch (8 vs 4) — client needs upgrade to protocol v3.x"),
    # llama-server --rpc whose worker was killed (captured from b11434 on this project's machine; the path is the
    # build tree's): ggml/src/ggml-rpc/ggml-rpc.cpp, RPC_STATUS_ASSERT in rpc_dispatcher::send
    ("llamacpp", "crashed", "/tmp/src/llama.cpp/ggml/src/ggml-rpc/ggml-rpc.cpp:566: Remote RPC server crashed or "
                          "returned malformed response"),
    # --- PyTorch / CUDA, shared by every engine --------------------------------------------------------------
    # docs/en/faq.md of InternLM/lmdeploy (TurboMind's allocator): also the common "CUDA runtime error ... out of
    # memory" wording
    ("lmdeploy", "oom", "RuntimeError: [TM][ERROR] CUDA runtime error: out of memory "
                        "/workspace/lmdeploy/src/turbomind/utils/allocator.h:246"),
    # cuBLAS handle creation under OOM: aten/src/ATen/cuda/CublasHandlePool.cpp (TORCH_CUDABLAS_CHECK), as quoted
    # in many issues
    ("vllm", "oom", "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
    # Metal command buffer OOM (llama.cpp ggml-metal / MLX on Apple GPUs), as quoted in issues
    ("llamacpp", "oom", "ggml_metal_graph_compute: command buffer 0 failed with status 5 error: Insufficient Memory "
                        "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"),
    # NCCL's CUDACHECK (src/include/checks.h) on a failed allocation, and src/include/alloc.h's ncclCudaCalloc
    ("sglang", "oom", "node1:2201:2301 [0] misc/utils.cc:412 NCCL WARN Cuda failure 'out of memory'"),
    # c10/cuda/CUDACachingAllocator.cpp, the OOM message that names the other processes on the GPU
    ("vllm", "gpu_occupied", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a "
                             "total capacity of 79.19 GiB of which 471.69 MiB is free. Process 19239 has 14.26 GiB "
                             "memory in use. Including non-PyTorch memory, this process has 64.63 GiB memory in use."),
    # cudaErrorDevicesUnavailable's text (CUDA runtime), raised by torch's C10_CUDA_CHECK
    ("sglang", "gpu_occupied", "torch.AcceleratorError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"),
    # cudaErrorInvalidDeviceFunction's text through C10_CUDA_CHECK (kernels not built for the GPU)
    ("vllm", "kernel_image", "RuntimeError: CUDA error: invalid device function"),
    # torch/cuda/__init__.py, _check_capability (a warning: not fatal)
    ("vllm", "kernel_image", "UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with "
                             "the current PyTorch installation."),
    # flash-attention csrc/flash_attn/flash_api.cpp (TORCH_CHECK on the compute capability)
    ("tgi", "kernel_image", "RuntimeError: FlashAttention only supports Ampere GPUs or newer."),
    # torch.load of a Git LFS pointer: pickle's "invalid load key" (torch/serialization.py _legacy_load)
    ("vllm", "corrupt_weights", "_pickle.UnpicklingError: invalid load key, 'v'."),
    # torch/nn/modules/module.py, load_state_dict's error_msgs
    ("vllm", "corrupt_weights", "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:"),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, the watchdog's timeout message
    ("sglang", "nccl", "[rank1]:[E1120 10:11:12.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
                       "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                       "Timeout(ms)=600000) ran for 600030 milliseconds before timing out."),
    # torch/cuda/__init__.py, _lazy_init (no driver) / cudaErrorInsufficientDriver's text
    ("vllm", "other", "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
                      "and installed a driver from http://www.nvidia.com/Download/index.aspx"),
    # transformers/models/auto/configuration_auto.py, AutoConfig.from_pretrained
    ("vllm", "other", "ValueError: The checkpoint you are trying to load has model type `gemma4` but Transformers "
                      "does not recognize this architecture. This could be because of an issue with the checkpoint, "
                      "or because your version of Transformers is out of date."),
    # vllm/platforms/cuda.py (check_if_supports_dtype) on a pre-Ampere GPU
    ("vllm", "other", "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
                      "Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting "
                      "the `dtype` flag in CLI, for example: --dtype=half."),
    # cudaErrorIllegalAddress's text through C10_CUDA_CHECK
    ("sglang", "other", "RuntimeError: CUDA error: an illegal memory access was encountered"),
    # CPython Python/pylifecycle.c (fatal_error) via faulthandler
    ("vllm", "crashed", "Fatal Python error: Segmentation fault"),
    # CPython Lib/argparse.py: _check_value ("invalid choice") and parse_known_args ("required")
    ("vllm", "bad_argument", "api_server.py: error: argument --dtype: invalid choice: 'fp7' (choose from 'auto', "
                             "'half', 'float16', 'bfloat16', 'float', 'float32')"),
    ("sglang", "bad_argument", "launch_server.py: error: the following arguments are required: --model-path"),
    # Doubtful: the wording of this signature was not found in an engine's source (see docs/development.md)
    ("vllm", "bad_argument", "ValueError: argument --enable-prefix-caching-v2 has been removed"),
    # llama.cpp common/arg.cpp, common_params_parse: an unknown flag, and a handler that threw
    ("llamacpp", "bad_argument", "error: invalid argument: --no-such-flag"),
    ("llamacpp", "bad_argument", "error while handling argument \"--flash-attn\": expected value"),
    # --- vLLM ---------------------------------------------------------------------------------------------------
    # vllm/v1/worker/gpu_worker.py, determine_available_memory's assertion (as quoted in issues)
    ("vllm", "gpu_occupied", "AssertionError: Error in memory profiling. Initial free memory 58.23 GiB, current free "
                             "memory 59.34 GiB. This happens when other processes sharing the same container release "
                             "GPU memory while vLLM is profiling during init."),
    # vllm/v1/worker/cpu_worker.py (CPU backend), as quoted in a user's log
    ("vllm", "oom", "(Worker pid=114) ERROR 08-14 08:34:03 [multiproc_executor.py:1018] ValueError: Available memory "
                    "on node 0 (2.5/7.77 GiB) on kv cache allocation is less than requested memory for kv (12.0 GiB)."),
    # vllm/model_executor/models/registry.py, _raise_for_unsupported
    ("vllm", "other", "ValueError: Model architectures ['CohereForCausalLM'] are not supported for now. Supported "
                      "architectures: ['AquilaModel', 'AquilaForCausalLM']"),
    # --- llama.cpp / Ollama -------------------------------------------------------------------------------------
    # llama.cpp src/llama-model-loader.cpp, check_tensor_dims (as quoted in issues)
    ("llamacpp", "corrupt_weights", "llama_model_load: error loading model: check_tensor_dims: tensor "
                                    "'token_embd.weight' has wrong shape; expected 4096, 32005, got 4096, 32000, 1, 1"),
    # llama.cpp tools/server/server.cpp, main: ctx_http.start() failed (port in use)
    ("llamacpp", "other", "main: exiting due to HTTP server error"),
    # ollama server/routes.go (404 body) and server/images.go (pull)
    ("ollama", "model_not_found", "Error: model \"llama9\" not found, try pulling it first"),
    # sglang: the profiled KV pool is negative, as posted in https://github.com/sgl-project/sglang/issues/7691
    ("sglang", "kv_cache", "[2025-07-02 07:41:59 DP0 TP0] max_total_tokens=131072 is larger than the profiled value "
                           "-561981. Use the profiled value instead."),
    # --- TGI: huggingface/text-generation-inference --------------------------------------------------------------
    # server/text_generation_server/models/flash_causal_lm.py, warmup: the prefill OOM
    ("tgi", "kv_cache", "2024-05-01T10:00:00.000000Z ERROR warmup{max_input_length=4095 max_prefill_tokens=4096 "
                   "max_total_tokens=4096 max_batch_size=None}:warmup: text_generation_router_v3::client: "
                   "router/src/client/mod.rs:45: Server error: Not enough memory to handle 4096 prefill tokens. "
                   "You need to decrease `--max-batch-prefill-tokens`"),
    # router/src/server.rs, run: TcpListener::bind failed
    ("tgi", "port_in_use", "2024-05-01T10:00:00.000000Z ERROR text_generation_router::server: router/src/server.rs:"
                           "2325: Failed to bind to 0.0.0.0:80: Address already in use (os error 98)"),
    # launcher/src/main.rs, shard_manager: the shard died of a signal
    ("tgi", "other", "2024-05-01T10:00:00.000000Z ERROR shard-manager: text_generation_launcher: Shard process was "
                     "signaled to shutdown with signal 9 rank=0"),
    # launcher/src/main.rs, download_convert_model
    ("tgi", "other", "2024-05-01T10:00:00.000000Z ERROR download: text_generation_launcher: Download encountered an "
                     "error: OSError: meta-llama/Llama-9 is not a local folder"),
    # launcher/src/main.rs: the webserver exited while the shards ran
    ("tgi", "other", "2024-05-01T10:00:00.000000Z ERROR text_generation_launcher: Webserver Crashed"),
    # server/text_generation_server/server.py, serve_inner: logger.exception
    ("tgi", "other", "2024-05-01T10:00:00.000000Z ERROR text_generation_launcher: Error when initializing model"),
    # sglang/srt/entrypoints/engine.py, _launch_subprocesses: a worker node (node_rank >= 1) joins its schedulers
    ("sglang", "other", "[2026-01-01 00:00:00] Scheduler or DataParallelController 4242 terminated with -9"),
    # vllm/v1/engine/core.py, startup_handshake (HANDSHAKE_TIMEOUT_MINS = 5): a --headless node without its head
    ("vllm", "other", "RuntimeError: Did not receive response from front-end process within 5 minutes"),
    # --- TensorRT-LLM --------------------------------------------------------------------------------------------
    # tensorrt_llm/executor/proxy.py, GenerationExecutorProxy: a worker failed to start
    ("trtllm", "other", "RuntimeError: Executor worker returned error"),
    # cpp/include/tensorrt_llm/common/tllmException.h: "[TensorRT-LLM][ERROR] " prefix, as quoted in issues
    ("trtllm", "other", "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: emplaceDone "
                        "(cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp:2992)"),
    # --- LMDeploy: InternLM/lmdeploy ------------------------------------------------------------------------------
    # src/turbomind/core/logger.cc (Prefix: "[TM][LEVEL][time][file:line] ") and comm/device_comm.cc:28
    ("lmdeploy", "other", "[TM][FATAL][0821 22:31:54.000123][device_comm.cc:28] Unknown communication backend: mpi"),
    # lmdeploy/pytorch/engine/engine.py, async_loop: logger.exception, lmdeploy/utils.py's log format
    ("lmdeploy", "other", "2025-08-21 22:31:54,123 - lmdeploy - ERROR - engine.py:625 - Engine main loop failed."),
    # --- Triton Inference Server, any backend (tests/fixtures/corpus: d-trtllm-triton-engine-config-parse-error,
    # d-trtllm-triton-compose-fmha-key-not-found, d-generic-triton-vllm-backend-failed-to-load-all-models)
    ("trtllm", "other", "E1030 07:31:13.009883 4933 backend_model.cc:634] ERROR: Failed to create instance: unexpected "
                        "error when creating modelInstanceState: [json.exception.parse_error.101] parse error"),
    ("trtllm", "other", "E0618 08:11:17.058465 1 model_repository_manager.cc:614] \"Invalid argument: ensemble "
                        "'ensemble' depends on 'tensorrt_llm' which has no loaded version. Model 'tensorrt_llm' "
                        "loading failed with error: version 1 is at UNAVAILABLE state\""),
    ("generic", "other", "error: creating server: Internal - failed to load all models"),
    # --- vLLM's engine core dying as it starts (corpus: d-vllm-production-stack-enginecore-hit-exception,
    # d-vllm-gguf-minicpm-vocab-assert-rpc-died)
    ("vllm", "other", "ERROR 05-06 01:55:26 [core.py:383] EngineCore hit an exception: Traceback (most recent call "
                      "last):"),
    ("vllm", "other", "ERROR 09-03 11:29:27 api_server.py:171] RPCServer process died before responding to readiness "
                      "probe"),
    # --- 2023 Ollama's runner that could not be started (corpus: e-ollama-compose-2023-fork-exec-llama-server-missing)
    ("ollama", "other", "2023/09/04 18:31:32 ggml_llama.go:295: error starting llama.cpp server: error starting the "
                        "external llama.cpp server: fork/exec /tmp/llama-2755348604/server: no such file or directory"),
    # --- a supervisor of llama-server (corpus: d-llamacpp-tabby-supervisor-starting-ctrl-c-exit)
    ("llamacpp", "other", "2024-07-24T07:25:28.289106Z  WARN llama_cpp_server::supervisor: crates/llama-cpp-server/"
                          "src/supervisor.rs:99: llama-server <embedding> exited with status code -1"),
    # --- gathering f's (tests/fixtures/corpus, each named): Triton's model table, systemd's word on the service, Open
    # MPI's init, a vLLM-family worker's method (f-trtllm-triton-chatglm2-mpisize-unavailable,
    # f-ollama-quoted-journalctl-x-mkdir-models-permission-denied, f-trtllm-triton-llava-orte-init-failed,
    # f-generic-aphrodite-ray-load-model-error)
    ("trtllm", "other", "| tensorrt_llm   | 1       | UNAVAILABLE: Internal: unexpected error when creating "
                        "modelInstanceState: [TensorRT-LLM][ERROR] Assertion failed:  |"),
    ("generic", "other", "systemd[1]: ollama.service: Main process exited, code=exited, status=1/FAILURE"),
    # systemd's unit for a process a signal dumped (src/core/service.c: "Main process exited, code=%s, status=%i/%s")
    ("generic", "crashed", "systemd[1]: llama.service: Main process exited, code=dumped, status=11/SEGV"),
    ("trtllm", "other", "It looks like orte_init failed for some reason; your parallel process is"),
    ("generic", "other", "(RayWorkerAphrodite pid=34320) ERROR:    Error executing method load_model. This might cause "
                         "deadlock in distributed execution."),
    # vLLM's Ray workers (worker_base.py execute_method's logger.exception), as pasted in the ROCm and Ascend trackers
    ("vllm", "other", "(RayWorkerWrapper pid=769965) ERROR 10-07 15:58:23 worker_base.py:464] Error executing method "
                      "init_device. This might cause deadlock in distributed execution."),
    ("vllm", "other", "ERROR 02-28 09:16:29 worker_base.py:572] Error executing method "
                      "'determine_num_available_blocks'. This might cause deadlock in distributed execution."),
    # ggml's failed assert, whichever program embeds it (https://github.com/ggml-org/llama.cpp/issues/9478)
    ("llamacpp", "crashed", "ggml/src/ggml.c:6793: GGML_ASSERT(false && ‘backwards pass not implemented’) failed"),
    ("generic", "crashed", "ggml/src/ggml.c:6793: GGML_ASSERT(false && ‘backwards pass not implemented’) failed"),
    # vllm-ascend's worker, v1's API-server manager, v0's multiprocessing worker (f-vllm-ascend-qwen3-next-910b4-
    # no-free-memory, f-vllm-ascend-glm5-dp2-tp8-apiserver-died, f-vllm-cpu-gemma2-sdpa-softcap-load-fail)
    ("vllm", "kv_cache", "Available memory: 0, total memory: 65452113920"),
    ("vllm", "other", "ERROR 05-11 11:39:27 [utils.py:291] Exception occurred while running API servers: Process "
                      "ApiServer_0 (PID: 359) died with exit code 1"),
    ("vllm", "other", "(VllmWorkerProcess pid=143) ERROR 09-20 08:05:48 multiproc_worker_utils.py:226] Exception in "
                      "worker VllmWorkerProcess while processing method load_model: Torch SPDA does not support logits "
                      "soft cap., Traceback (most recent call last):"),
    # LMDeploy's PyTorch engine, Ollama's scheduler (f-lmdeploy-pytorch-tp2-baichuan-rank1-failed-dist-model,
    # f-ollama-compose-unknown-arch-pangu-newllamaserver-failed)
    ("lmdeploy", "other", "01/18 15:13:28 - lmdeploy - ERROR - /root/miniconda3/envs/aichat/lib/python3.9/"
                          "site-packages/lmdeploy/pytorch/engine/model_agent.py - _start_tp_process - 855 - Rank[1] "
                          "failed."),
    ("ollama", "other", 'time=2025-11-06T06:23:22.759Z level=INFO source=sched.go:418 msg="NewLlamaServer failed" '
                        'model=/root/.ollama/models/blobs/sha256-8fc8 error="unable to load model"'),
    # a Rust server's command line rejected by clap, and its panic (g-generic-mistralrs-caprover-missing-subcommand-
    # crashloop, g-generic-mistralrs-gguf-tokenizer-403-panic)
    ("generic", "bad_argument", "error: 'mistralrs-server' requires a subcommand but one was not provided"),
    ("generic", "bad_argument", "Usage: mistralrs-server [OPTIONS] <COMMAND>"),
    ("generic", "other", "thread 'main' panicked at mistralrs-core/src/pipeline/gguf.rs:261:9:"),
    # ROCm's GPU memory fault, a Ray actor dead in its constructor (g-vllm-rocm-tp4-cudagraph-capture-memory-access-
    # fault, g-vllm-v01-ray-tp4-worker-actor-died-dist-init)
    ("vllm", "crashed", "Memory access fault by GPU node-5 (Agent handle: 0x460e3a50) on address 0x7ec4dfe0e000. "
                        "Reason: Write access to a read-only page."),
    ("vllm", "other", "(Worker pid=4225) Exception raised in creation task: The actor died because of an error raised "
                      "in its creation task, ray::Worker.__init__() (pid=4225, ip=172.31.68.176, actor_id="
                      "5dc662848f950df8d330eb8a01000000, repr=<vllm.worker.worker.Worker object at 0x7f4e9ea814e0>)"),
    # llama.cpp's context not made (g-llamacpp-rocm-apertus-70b-compute-buffer-oom)
    ("llamacpp", "other", "llama_init_from_model: failed to initialize the context: failed to allocate compute pp "
                          "buffers"),
    # Triton's TensorRT-LLM backend: the KV cache too small for one sequence, MPI's ranks not the engine's, a model's
    # load given up (g-trtllm-triton-paged-kv-693-tokens-failed-load, g-trtllm-triton-baichuan2-tp2-mpisize-assert)
    ("trtllm", "kv_cache", "E1128 16:31:49.479096 227 backend_model.cc:634] ERROR: Failed to create instance: "
                           "unexpected error when creating modelInstanceState: maxTokensInPagedKvCache must be large "
                           "enough to process at least 1 sequence to completion (i.e. must be larger than beam_width * "
                           "tokensPerBlock * maxBlocksPerSeq)"),
    ("trtllm", "bad_argument", "E1114 09:30:00.910920 6946 model_lifecycle.cc:621] failed to load 'tensorrt_llm' "
                               "version 1: Internal: unexpected error when creating modelInstanceState: [TensorRT-LLM]"
                               "[ERROR] Assertion failed: mpiSize == tp * pp (/app/tensorrt_llm/cpp/tensorrt_llm/"
                               "runtime/worldConfig.cpp:80)"),
    ("trtllm", "other", "I1128 16:31:49.479201 227 model_lifecycle.cc:756] failed to load 'tensorrt_llm'"),
    # Ollama's 2024 runner giving its model up in its JSON log, and the 2023 daemon's word on a runner killed by a
    # signal (g-ollama-win-64k-ctx-compute-buffer-cudamalloc-oom, g-ollama-journald-cpu-runner-illegal-instruction)
    ("ollama", "other", '{"function":"load_model","level":"ERR","line":410,"model":"C:\\Users\\Administrator\\'
                        '.ollama\\models\\blobs\\sha256-912687f2b75ca31331bfcf8b55a34a366dbb0f31df6bf65bc464c1d2431b92'
                        'be","msg":"unable to load model","tid":"11992","timestamp":1715077029}'),
    ("ollama", "crashed", "Dec 19 10:46:26 wt-chatbot-v1 ollama[639]: 2023/12/19 10:46:26 llama.go:451: signal: "
                          "illegal instruction"),
    # a Windows app's word on its llama-server dying of an access violation (h-llamacpp-jan-vulkan-rx6800xt-exit-
    # access-violation), llama-box's rejection of a flag (h-llamacpp-llama-box-override-tensor-invalid-argument),
    # torch.compile's own exception (h-vllm-llmd-openshift-triton-cache-permission)
    ("llamacpp", "crashed", "Failed to load llama-server: llamacpp error: Process exited with code "
                            "ExitStatus(ExitStatus(3221225477))"),
    ("generic", "bad_argument", "Invalid argument: --override-tensor"),
    ("vllm", "other", "torch._inductor.exc.InductorError: PermissionError: [Errno 13] Permission denied: '/.triton'"),
    # vLLM: a TP split across quantized groups, a model path with no config, an attention backend the build lacks,
    # its compiled ops missing (h-vllm-v0-mq-engine-awq-tp-input-size-misaligned, h-vllm-prodstack-shared-storage-no-
    # config-format, h-vllm-dgx-spark-torch-sdpa-backend-not-registered, h-vllm-glm4-api-rms-norm-missing-op-fatal-
    # shutdown)
    ("vllm", "quantization", "ValueError: The input size is not aligned with the quantized weight shape. This can be "
                             "caused by too large tensor parallel size."),
    ("vllm", "model_not_found", "ValueError: No supported config format found in Qwen/Qwen1.5-0.5B"),
    ("vllm", "bad_argument", "ValueError: Backend TORCH_SDPA must be registered before use. Use register_backend("
                             "Backend.TORCH_SDPA, 'your.module.YourClass')"),
    ("vllm", "import_error", "AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'"),
]


def _corpus() -> list[str]:
    lines = [line for _, line, _ in CLASSIFY_CASES] + [line for _, _, line in SIGNATURE_LINES]
    logs = sorted(FIXTURE_LOGS.glob("*.log")) + sorted((FIXTURE_LOGS.parent / "unseen").glob("*.log"))
    shared = SHARED / "logs"
    if shared.is_dir():
        logs += sorted(shared.glob("*.log"))
    elif IN_CI:
        pytest.fail(f"{shared} is missing: under CI the real logs must be there")
    for log in logs:
        lines += log.read_text(errors="replace").splitlines()
    return [clean_line(line) for line in lines]


def _signatures() -> dict[tuple[str, str], list[str]]:
    sigs: dict[tuple[str, str], list[str]] = {}
    for name, profile in PROFILES.items():
        for s in profile.failure_signatures:
            sigs.setdefault((s.pattern, s.category), []).append(name)
    return sigs


def test_every_failure_signature_matches_a_real_line():
    corpus = _corpus()
    unmatched = [f"{engines[0]} {category}: {pattern}" for (pattern, category), engines in _signatures().items()
                 if not any(re.search(pattern, line) for line in corpus)]
    assert not unmatched, f"{len(unmatched)} signatures match no line:\n" + "\n".join(unmatched)


@pytest.mark.parametrize("engine, category, line", SIGNATURE_LINES, ids=[f"{e}-{c}-{i}" for i, (e, c, _) in
                                                                         enumerate(SIGNATURE_LINES)])
def test_each_source_line_gives_its_category(engine: str, category: str, line: str):
    m = get_profile(engine).classify(line)
    assert m.failure is not None, f"no signature matches {line!r}"
    assert m.failure.category == category, (m.failure, line)
