"""Helpers shared by tests/unit/engines/test_profile.py, tests/unit/engines/test_signatures.py."""

from __future__ import annotations

from typing import Any

# (engine, line, expected attributes). "failure" is (category, fatal); "progress" is (kind, done, total).
CLASSIFY_CASES: list[tuple[str, str, dict[str, Any]]] = [
    # --- SGLang: 0.4.x and 0.5.x wordings ---
    (
        "sglang",
        "[2024-10-31 21:57:01] server_args=ServerArgs(model_path='m', port=30000)",
        {"phase": "process_start"},
    ),
    ("sglang", "[2024-10-31 21:57:05 TP0] Init torch distributed begin.", {"phase": "distributed_init"}),
    (
        "sglang",
        "[2025-08-11 02:20:13 TP0] Load weight begin. avail mem=78.58 GB",
        {"phase": "weights_loading"},
    ),
    (
        "sglang",
        "[2024-10-31 21:57:20 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail "
        "mem=63.50 GB",
        {"phase": "weights_loaded", "phase_weak": True},
    ),
    (
        "sglang",
        "[2026-04-05 16:48:04] Load weight end. elapsed=0.75 s, type=Qwen2ForCausalLM, avail mem=103.12 GB, "
        "mem usage=0.99 GB.",
        {"phase": "weights_loaded"},
    ),
    (
        "sglang",
        "[2025-03-28 06:54:40 TP0] KV Cache is allocated. #tokens: 20480, K size: 0.55 GB",
        {"phase": "kv_cache"},
    ),
    (
        "sglang",
        "[23:17:01 TP3] Capture cuda graph begin. This can take up to several minutes.",
        {"phase": "cuda_graph", "phase_weak": False},
    ),
    (
        "sglang",
        "[2026-01-01 00:00:00 TP0] Capture target decode CUDA graph begin. This can take up to several "
        "minutes.",
        {"phase": "cuda_graph"},
    ),
    (
        "sglang",
        "[2025-08-11 02:15:16] Capture draft extend cuda graph begin. avail mem=53.64 GB",
        {"phase": "cuda_graph"},
    ),
    (
        "sglang",
        "Capturing batches (bs=4 avail_mem=55.16 GB):  25%|██▌       | 1/4 [00:00<00:01,  2.05it/s]",
        {"phase": "cuda_graph", "progress": ("cuda_graph", 1, 4)},
    ),
    (
        "sglang",
        "Compiling num tokens (num_tokens=7168):   5%|▌         | 3/58 [00:02<00:40,  1.34it/s]",
        {"phase": "compile", "progress": ("compile", 3, 58)},
    ),
    (
        "sglang",
        "Capturing num tokens (num_tokens=8192 avail_mem=117.35 GB):   2%|▏         | 1/58 [00:00<00:10,  "
        "5.40it/s]",
        {"phase": "cuda_graph", "progress": ("cuda_graph", 1, 58)},
    ),
    (
        "sglang",
        "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:02,  1.22it/s]",
        {"phase": "weights_loading", "progress": ("shards", 1, 4)},
    ),
    (
        "sglang",
        "Multi-thread loading shards:  11% Completed | 1/9 [00:00<00:06,  1.27it/s]",
        {"progress": ("shards", 1, 9)},
    ),
    (
        "sglang",
        "[2025-08-11 02:16:54] INFO:     Uvicorn running on http://127.0.0.1:36827 (Press CTRL+C to quit)",
        {"phase": "http_listening", "listening": True},
    ),
    (
        "sglang",
        '[2024-10-31 21:57:49] INFO:     127.0.0.1:43862 - "GET /get_model_info HTTP/1.1" 200 OK',
        {"phase": "warmup"},
    ),
    ("sglang", "[2025-08-11 02:16:56] The server is fired up and ready to roll!", {"ready": True}),
    (
        "sglang",
        "[2026-05-25 17:42:54 TP1] Scheduler hit an exception: Traceback (most recent call last):",
        {"failure": ("other", True)},
    ),
    (
        "sglang",
        "[2026-05-25 17:26:25] Received sigquit from a child process. It usually means the child failed.",
        {"failure": ("other", True)},
    ),
    ("sglang", "[23:17:08 TP4] Exception in run_tp_server:", {"failure": ("other", True)}),
    (
        "sglang",
        "[2025-06-01 10:02:11] Initialization failed. warmup error: Traceback (most recent call last):",
        {"failure": ("warmup_failed", True)},
    ),
    (
        "sglang",
        "[2025-06-01 10:00:06 TP1] The memory capacity is unbalanced. Some GPUs may be occupied by other "
        "processes. "
        "pre_model_load_memory=40.1",
        {"failure": ("gpu_occupied", True)},
    ),
    (
        "sglang",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        {"failure": ("kv_cache", True)},
    ),
    (
        "sglang",
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 "
        "(SIGKILL), "
        "a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.",
        {"failure": ("oom", True)},
    ),
    (
        "sglang",
        "Exception: Capture cuda graph failed: BatchDecodeWithPagedKVCache failed with error no kernel image "
        "is "
        "available for execution on the device. Possible solutions:",
        {"failure": ("kernel_image", True)},
    ),
    (
        "sglang",
        "ValueError: Quantization method specified in the model config (compressed-tensors) does not match "
        "the "
        "quantization method specified in the `quantization` argument (awq).",
        {"failure": ("quantization", True)},
    ),
    ("sglang", "KeyError: 'model.layers.0.mlp.experts.w2_qweight'", {"failure": ("corrupt_weights", False)}),
    (
        "sglang",
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        {"failure": ("nccl", True)},
    ),
    (
        "sglang",
        "[2025-08-11 02:16:56] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', "
        "30000): "
        "address already in use",
        {"failure": ("port_in_use", True)},
    ),
    ("sglang", "ModuleNotFoundError: No module named 'sgl_kernel'", {"failure": ("import_error", False)}),
    # non-failures that look like failures
    (
        "sglang",
        '[2026-05-25 17:26:18 TP1] Failed to import amdsmi with ModuleNotFoundError("No module named '
        "'amdsmi'\")",
        {},
    ),
    (
        "sglang",
        "[2025-08-11 02:15:10] Ignore import error when loading sglang.srt.models.glm4v_moe: No module",
        {},
    ),
    (
        "sglang",
        "2026-04-05 16:43:49,191 - CUTE_DSL - WARNING - [handle_import_error] - Unexpected error during "
        "package walk",
        {},
    ),
    (
        "sglang",
        "[2026-05-25 17:42:45] Tokenizer for /m loaded as generic TokenizersBackend. Set --trust-remote-code "
        "to load",
        {},
    ),
    # --- vLLM V0 and V1 ---
    (
        "vllm",
        "INFO 05-12 10:11:12 api_server.py:712] vLLM API server version 0.6.3.post1",
        {"phase": "process_start"},
    ),
    (
        "vllm",
        "(APIServer pid=1) INFO 09-28 15:47:20 [api_server.py:1896] vLLM API server version 0.10.2",
        {"phase": "process_start"},
    ),
    (
        "vllm",
        "INFO 05-12 10:11:20 [parallel_state.py:1004] vLLM is using nccl==2.21.5",
        {"phase": "distributed_init"},
    ),
    (
        "vllm",
        "(EngineCore_DP0 pid=1) INFO 09-28 15:47:24 [gpu_model_runner.py:1953] Starting to load model "
        "Qwen/Qwen3-8B...",
        {"phase": "weights_loading"},
    ),
    (
        "vllm",
        "INFO 05-12 10:11:30 model_runner.py:1067] Loading model weights took 14.9888 GB",
        {"phase": "weights_loaded", "phase_weak": True},
    ),
    (
        "vllm",
        "INFO 05-07 02:13:56 [backends.py:430] Dynamo bytecode transform time: 3.58 s",
        {"phase": "compile"},
    ),
    (
        "vllm",
        "INFO 05-07 02:14:18 [monitor.py:33] torch.compile takes 17.00 s in total",
        {"phase": "compile"},
    ),
    (
        "vllm",
        "INFO 05-12 10:11:40 [gpu_worker.py:227] Available KV cache memory: 51.2 GiB",
        {"phase": "kv_cache"},
    ),
    (
        "vllm",
        "INFO 05-12 10:11:40 gpu_executor.py:122] # GPU blocks: 27798, # CPU blocks: 2048",
        {"phase": "kv_cache"},
    ),
    (
        "vllm",
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  71%|███████   | 36/51 [00:22<00:01, "
        "11.70it/s]",
        {"phase": "cuda_graph", "progress": ("cuda_graph", 36, 51)},
    ),
    (
        "vllm",
        "INFO 05-12 10:11:45 model_runner.py:1394] Capturing cudagraphs for decoding. This may lead to "
        "unexpected",
        {"phase": "cuda_graph"},
    ),
    (
        "vllm",
        "(APIServer pid=1) INFO 09-28 15:48:10 [api_server.py:1967] Starting vLLM API server 0 on "
        "http://0.0.0.0:8000",
        {"phase": "http_listening"},
    ),
    ("vllm", "(APIServer pid=1) INFO:     Application startup complete.", {"ready": True, "listening": True}),
    (
        "vllm",
        "(EngineCore_DP0 pid=17374) ERROR 09-28 15:47:24 [core.py:718] ValueError: Free memory on device "
        "(3.22/4.0 "
        "GiB) on startup is less than desired GPU memory utilization (0.9, 3.6 GiB).",
        {"failure": ("gpu_occupied", True)},
    ),
    (
        "vllm",
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.",
        {"failure": ("kv_cache", True)},
    ),
    (
        "vllm",
        "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can "
        "be "
        "stored in KV cache (50000).",
        {"failure": ("kv_cache", True)},
    ),
    ("vllm", "ERROR 05-07 02:14:18 [core.py:396] EngineCore failed to start.", {"failure": ("other", True)}),
    (
        "vllm",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        {"failure": ("other", True)},
    ),
    (
        "vllm",
        "NotImplementedError: No compressed-tensors compatible scheme was found.",
        {"failure": ("quantization", True)},
    ),
    (
        "vllm",
        "ValueError: Failed to load the model config. If the model is a custom model not yet available in "
        "the "
        "HuggingFace transformers library, consider setting `trust_remote_code=True`",
        {"failure": ("trust_remote_code", True)},
    ),
    ("vllm", "OSError: [Errno 98] Address already in use", {"failure": ("port_in_use", True)}),
    (
        "vllm",
        "safetensors_rust.SafetensorError: Error while deserializing header: incomplete metadata, file not "
        "fully "
        "covered",
        {"failure": ("corrupt_weights", True)},
    ),
    (
        "vllm",
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url https://x",
        {"failure": ("model_not_found", True)},
    ),
    (
        "vllm",
        "[shm_broadcast.py:681] No available shared memory broadcast block found in 60 seconds.",
        {},
    ),
    # --- llama.cpp: JSON era (2024), main:/srv (2025), errors ---
    (
        "llamacpp",
        '{"tid":"1","timestamp":1729847060,"level":"INFO","function":"main","line":2980,"msg":"HTTP server '
        'listening","hostname":"127.0.0.1","port":"8080"}',
        {"phase": None, "listening": True},
    ),
    (
        "llamacpp",
        "main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 11",
        {"phase": None, "listening": True},  # llama-server listens before it loads: not a phase step
    ),
    ("llamacpp", "main: loading model", {"phase": "weights_loading"}),
    ("llamacpp", "srv    load_model: loading model 'model-CoT-Q4_K_M.gguf'", {"phase": "weights_loading"}),
    (
        "llamacpp",
        "llm_load_tensors: offloaded 33/33 layers to GPU",
        {"phase": "weights_loading", "progress": ("layers", 33, 33)},
    ),
    ("llamacpp", "llama_new_context_with_model: n_ctx      = 8192", {"phase": "kv_cache"}),
    (
        "llamacpp",
        "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to "
        "disable)",
        {"phase": "warmup"},
    ),
    ("llamacpp", "main: model loaded", {"ready": True}),
    ("llamacpp", "srv    llama_server: model loaded", {"ready": True}),
    (
        "llamacpp",
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
        {"ready": True, "listening": True},
    ),
    ("llamacpp", "srv  update_slots: all slots are idle", {"ready": True}),
    (
        "llamacpp",
        '{"function":"update_slots","level":"INFO","line":1,"msg":"all slots are '
        'idle","tid":"1","timestamp":1}',
        {"ready": True},
    ),
    ("llamacpp", "srv  llama_server: router server is listening on http://127.0.0.1:8080", {"ready": False}),
    (
        "llamacpp",
        "srv  log_server_r: request: GET /health 127.0.0.1 503",
        {"phase": "weights_loading", "listening": True},
    ),
    (
        "llamacpp",
        "gguf_init_from_file: failed to open GGUF file 'models/7B/ggml-model-f16.gguf'",
        {"failure": ("model_not_found", True)},
    ),
    (
        "llamacpp",
        "llama_model_load: error loading model: tensor 'blk.13.ffn_gate.weight' data is not within the file "
        "bounds, "
        "model is corrupted or incomplete",
        {"failure": ("corrupt_weights", True)},
    ),
    (
        "llamacpp",
        "gguf_init_from_file_impl: invalid magic characters: 'vers', expected 'GGUF'",
        {"failure": ("corrupt_weights", True)},
    ),
    (
        "llamacpp",
        "srv          init: couldn't bind HTTP server socket, hostname: 0.0.0.0, port: 8080",
        {"failure": ("port_in_use", True)},
    ),
    (
        "llamacpp",
        "llama_model_load: error loading model: error loading model vocabulary: unknown pre-tokenizer type: "
        "'x'",
        {"failure": ("other", True)},
    ),
    (
        "llamacpp",
        "0.00.100.000 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 20000 MiB on device 0: "
        "cudaMalloc "
        "failed: out of memory",
        {"failure": ("oom", True)},
    ),
    ("llamacpp", "main: exiting due to model loading error", {"failure": ("other", True)}),
    # --- TGI ---
    (
        "tgi",
        '2024-03-06T17:53:20.1Z  INFO text_generation_launcher: Args { model_id: "x", trust_remote_code: '
        "false }",
        {"phase": "process_start"},
    ),
    (
        "tgi",
        "2024-03-06T17:53:22.336246Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0",
        {"phase": "weights_loading"},
    ),
    (
        "tgi",
        "2024-03-06T17:53:40.1Z  INFO shard-manager: text_generation_launcher: Shard ready in 18.2s rank=0",
        {"phase": "weights_loaded"},
    ),
    (
        "tgi",
        "2025-01-10T12:00:18.4Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:125: Warming up "
        "model",
        {"phase": "warmup"},
    ),
    (
        "tgi",
        "2024-09-25T15:04:30.1Z  INFO text_generation_launcher: Cuda Graphs are enabled for sizes [32, 16, "
        "8, 4, 2, 1]",
        {"phase": "cuda_graph"},
    ),
    (
        "tgi",
        "2024-09-25T15:04:40.1Z  INFO text_generation_router::server: router/src/server.rs:1951: Connected",
        {"ready": True, "listening": True},
    ),
    ("tgi", "RuntimeError: CUDA error: out of memory", {"failure": ("oom", True)}),
    (
        "tgi",
        "2024-09-25T15:04:34.6Z ERROR warmup{max_input_length=500}:warmup: text_generation_client: "
        "router/client/src/lib.rs:46: Server error: CANCELLED",
        {"failure": ("warmup_failed", True)},
    ),
    (
        "tgi",
        "2024-03-06T17:53:31.0Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to "
        "shutdown "
        "with signal 4 rank=0",
        {"failure": ("other", True)},
    ),
    ("tgi", "Error: ShardCannotStart", {"failure": ("other", True)}),
    # --- TensorRT-LLM ---
    ("trtllm", "[11/20/2024-10:11:12] [TRT-LLM] [I] Starting TensorRT-LLM init.", {"phase": "process_start"}),
    ("trtllm", "INFO:     Application startup complete.", {"ready": True}),
    ("trtllm", "[11/20/2024-10:11:12] [TRT-LLM] [I] Server is ready to accept requests", {"ready": True}),
    (
        "trtllm",
        "RuntimeError: Failed to bind socket to localhost:8000: [Errno 98] Address already in use",
        {"failure": ("port_in_use", True)},
    ),
    # --- LMDeploy ---
    (
        "lmdeploy",
        "HINT:    Please open http://0.0.0.0:23333 in a browser for detailed api usage!!!",
        {"phase": "http_listening"},
    ),
    ("lmdeploy", "INFO:     Application startup complete.", {"ready": True}),
    # --- Ollama ---
    (
        "ollama",
        'time=2025-03-01T10:00:00.020Z level=INFO source=routes.go:1292 msg="Listening on [::]:11434 '
        '(version 0.6.0)"',
        {"phase": None, "listening": True},  # the daemon listens before any model loads
    ),
    (
        "ollama",
        'time=2025-03-01T10:00:07.900Z level=INFO source=server.go:619 msg="llama runner started in 2.70 '
        'seconds"',
        {"ready": True},
    ),
    (
        "ollama",
        'time=2025-03-01T10:00:08Z level=ERROR source=sched.go:455 msg="error loading llama server" '
        'error="llama runner process has terminated: cudaMalloc failed: out of memory"',
        {"failure": ("oom", True)},
    ),
    (
        "ollama",
        'time=2025-03-01T10:05:00Z level=ERROR source=sched.go:455 msg="error loading llama server" '
        'error="timed out waiting for llama runner to start - progress 0.28 - "',
        {"failure": ("other", True)},
    ),
    (
        "ollama",
        "Error: listen tcp 127.0.0.1:11434: bind: address already in use",
        {"failure": ("port_in_use", True)},
    ),
    # --- generic: common signatures, no ready marker ---
    (
        "generic",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        {"failure": ("oom", True)},
    ),
    ("generic", "INFO:     Application startup complete.", {"ready": False}),
    (
        "generic",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
        {"listening": True},
    ),
]
