"""How each engine words its startup, so that the simulator prints what the real engine prints.

Wordings are the engines' own (see shared/engines.md for where each was read); ``{}`` fields are filled by
the scenario. A dialect also says when the engine opens its port and what its endpoints answer meanwhile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Dialect:
    name: str
    default_port: int
    listens_early: bool  # the port opens before the model can serve (llama.cpp), or only at the end (vLLM)
    lines: dict[str, str] = field(default_factory=dict)
    prefix_style: str = "sglang"

    def line(self, key: str, **kw: object) -> str:
        text = self.lines[key].format(**kw)
        return f"{self.prefix()}{text}" if text else ""

    def prefix(self) -> str:
        now = time.time()
        if self.prefix_style == "sglang":
            return time.strftime("[%Y-%m-%d %H:%M:%S] ", time.localtime(now))
        if self.prefix_style == "vllm":
            return time.strftime("INFO %m-%d %H:%M:%S [sim.py:1] ", time.localtime(now))
        return ""


SGLANG = Dialect(
    "sglang", 30000, listens_early=False, prefix_style="sglang",
    lines={
        "wake": "",
        "args": "server_args=ServerArgs(model_path='{model}', tokenizer_path='{model}', host='{host}', "
                "port={port}, tp_size={tp}, api_key={api_key!r}, speculative_algorithm={spec!r})",
        "dist_init": "Init torch distributed begin.",
        "dist_end": "Init torch distributed ends. mem usage=0.00 GB",
        "weights_begin": "Load weight begin. avail mem=78.50 GB",
        "download_done": "",
        "shards": "Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{total} "
                  "[00:{elapsed:02d}<00:00,  1.00it/s]",
        "weights_end": "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=62.10 GB, "
                       "mem usage=16.40 GB.",
        "kv_cache": "KV Cache is allocated. #tokens: 411510, K size: 25.12 GB, V size: 25.12 GB",
        "kv_end": "Memory pool end. avail mem=11.30 GB",
        "graph_begin": "Capture cuda graph begin. This can take up to several minutes. avail mem=11.20 GB",
        "graph_progress": "Capturing batches (bs={bs} avail_mem=10.9 GB): {pct:3d}%|| {done}/{total}",
        "graph_end": "Capture cuda graph end. Time elapsed: {secs:.2f} s. mem usage=0.31 GB. avail mem=10.89 GB.",
        "scheduler_ready": "max_total_num_tokens=411510, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                           "max_running_requests=4097, context_len=131072",
        "http_start": "Started server process [{pid}]",
        "dummy_health": "Starting dummy health check server at {host}:{port}",  # a node of rank >= 1
        "lifespan": "Waiting for application startup.",
        "lifespan_done": "Application startup complete.",
        "listening": "Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)",
        "warmup": 'INFO:     127.0.0.1:40000 - "GET /model_info HTTP/1.1" 200 OK',
        "warmup_gen": 'INFO:     127.0.0.1:40002 - "POST /generate HTTP/1.1" 200 OK',
        "ready": "The server is fired up and ready to roll!",
        "oom": "Scheduler hit an exception: Traceback (most recent call last):",
        "oom_tb": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a "
                  "total capacity of 79.10 GiB of which 512.00 MiB is free.",
        "sigquit": "Received sigquit from a child process. It usually means the child failed.",
        "unbalanced": "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other "
                      "processes. pre_model_load_memory=[76.1, 2.3] min_per_gpu_memory=2.3 "
                      "local_gpu_memory=76.1 local_gpu_memory * 0.9=68.5",
        "access": 'INFO:     127.0.0.1:{cport} - "{method} {path} HTTP/1.1" {status} {reason}',
        "decode": "Decode batch. #running-req: 1, #token: {tokens}, token usage: 0.00, accept len: {accept:.2f}, "
                  "gen throughput (token/s): {rate:.2f}, #queue-req: 0",
    },
)

VLLM = Dialect(
    "vllm", 8000, listens_early=False, prefix_style="vllm",
    lines={
        "args": "vLLM API server version 0.11.0",
        "wake": "It took 2.512345 seconds to wake up tags {{'weights', 'kv_cache'}}.",  # vllm/v1/engine/core.py
        "dist_init": "world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:45678 backend=nccl",
        "dist_end": "vLLM is using nccl==2.21.5",
        "weights_begin": "Starting to load model {model}...",
        "download_done": "Time spent downloading weights for {model}: {secs:.6f} seconds",
        "shards": "Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{total} "
                  "[00:{elapsed:02d}<00:00,  1.00it/s]",
        "weights_end": "Loading weights took {secs:.2f} seconds",
        "kv_cache": "Available KV cache memory: 55.70 GiB",
        "kv_end": "GPU KV cache size: 456,272 tokens",
        "graph_begin": "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67",
        "graph_progress": "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): {pct:3d}%|| {done}/{total}",
        "graph_end": "Graph capturing finished in {secs:.0f} secs, took 0.48 GiB",
        "scheduler_ready": "init engine (profile, create kv cache, warmup model) took {secs:.2f} s",
        # a --headless node (vllm/entrypoints/cli/serve.py run_headless), and its handshake that never came
        # (v1/engine/core.py)
        "headless": "Launching 1 data parallel engine(s) in headless mode, with head node address "
                    "tcp://{head}.",
        "no_head": "RuntimeError: Did not receive response from front-end process within 5 minutes",
        "http_start": "Starting vLLM API server 0 on http://{host}:{port}",
        "lifespan": "Waiting for application startup.",
        "lifespan_done": "Application startup complete.",
        "listening": "",
        "warmup": "",
        "warmup_gen": "",
        "ready": "",
        "oom": "EngineCore failed to start.",
        "oom_tb": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a "
                  "total capacity of 79.10 GiB of which 512.00 MiB is free.",
        "sigquit": "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}",
        "unbalanced": "ValueError: Free memory on device cuda:0 (2.31/79.10 GiB) on startup is less than desired "
                      "GPU memory utilization (0.9, 71.19 GiB). Decrease GPU memory utilization or reduce GPU "
                      "memory used by other processes.",
        "access": 'INFO:     127.0.0.1:{cport} - "{method} {path} HTTP/1.1" {status} {reason}',
        "decode": "SpecDecoding metrics: Mean acceptance length: {accept:.2f}, Accepted: 0 tokens, Drafted: 0 tokens",
    },
)

LLAMACPP = Dialect(
    "llamacpp", 8080, listens_early=True, prefix_style="none",
    lines={
        "args": "main: build = 11434 (sim) with cc for x86_64-linux-gnu",
        "wake": "",
        "dist_init": "system info: n_threads = 2, n_threads_batch = 2, total_threads = 2",
        "listening": "main: HTTP server is listening, hostname: {host}, port: {port}, http threads: 2",
        "weights_begin": "load_model: loading model '{model}'",
        "shards": "llama_model_loader: loaded meta data with 33 key-value pairs and 272 tensors from {model}",
        "weights_end": "load_tensors:   CPU_Mapped model buffer size =  {mb:.2f} MiB",
        "kv_cache": "llama_kv_cache:        CPU KV buffer size =    45.00 MiB",
        "kv_end": "llama_context:        CPU compute buffer size =    70.51 MiB",
        "graph_begin": "common_init_from_params: warming up the model with an empty run - please wait ... "
                       "(--no-warmup to disable)",
        "graph_progress": "",
        "graph_end": "srv          init: initializing slots, n_slots = 1",
        "scheduler_ready": "main: model loaded",
        "http_start": "",
        "lifespan": "",
        "lifespan_done": "",
        "warmup": "",
        "warmup_gen": "",
        "ready": "main: server is listening on http://{host}:{port} - starting the main loop",
        "oom": "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc "
               "failed: out of memory",
        "oom_tb": "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
        "sigquit": "main: exiting due to model loading error",
        "unbalanced": "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: "
                      "cudaMalloc failed: out of memory",
        "access": "srv  log_server_r: request: {method} {path} 127.0.0.1 {status}",
        "decode": "draft acceptance rate = {accept:.5f}",
    },
)

DIALECTS = {d.name: d for d in (SGLANG, VLLM, LLAMACPP)}
