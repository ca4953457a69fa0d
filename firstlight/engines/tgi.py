"""Hugging Face Text Generation Inference (``text-generation-launcher``).

Wording from ``launcher/src/main.rs``, ``router/src/server.rs`` and the Python shard server, TGI 1.x-3.x.
The launcher downloads weights, starts one shard process per GPU ("Starting shard", "Waiting for shard to
be ready...", "Shard ready in ..."), then the router connects, runs the warmup (CUDA graph capture happens
on the shard side) and binds the port: "Connected" is logged just before the bind. The port stays closed
until then.
"""

from __future__ import annotations

from .common import FRAME_MARKERS, NCCL_PHASES, SERVED_MARKERS, TORCH_FAILURES
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
)
from .profile import SpecMetric as M

S = FailureSignature
P = PhaseMarker

TGI = EngineProfile(
    name="tgi",
    display_name="Text Generation Inference",
    default_port=3000,  # launcher default; the official Docker image sets PORT=80
    default_host="0.0.0.0",
    command_patterns=(
        r"(?:^|[\s/])text-generation-launcher(?:\s|$)",
        r"\bghcr\.io/huggingface/text-generation-inference\b",
        r"\btext-generation-inference:",
    ),
    endpoints=Endpoints(
        health="/health",
        models="/v1/models",
        metrics="/metrics",
        info=("/info",),
        lying_while_loading=(),  # nothing listens until warmup is done
        listens_before_ready=False,
    ),
    endpoint_rules=(
        EndpointRule("/info", json_all=("model_id",),
                     json_any=("max_total_tokens", "max_input_tokens", "max_input_length", "router", "docker_label",
                               "model_dtype", "validation_workers")),
        EndpointRule(("/health", "/v1/health"), json=(JsonValue("error_type", "healthcheck"),), ask=()),
        metric_prefix("tgi_"),
    ),
    images=(ImageEntrypoint(r"(?:^|/)huggingface/text-generation-inference(?::|@|$)", ("text-generation-launcher",)),),
    phase_markers=(
        P(r"(?:^|: |\")Args \{", "process_start"),
        P(r"Starting (?:check and )?download process", "process_start"),
        # the download step (server/text_generation_server/utils/hub.py): "Download file: model-00001-of-00002
        # .safetensors", then "Downloaded /data/models--.../model-00001-of-00002.safetensors in 0:00:21."
        # (corpus: b-tgi-llama2-k9s-download.log, https://github.com/huggingface/text-generation-inference/issues/653)
        P(r"\bDownload file: \S+", "download"),
        P(r"\bDownloaded \S+ in [\d:.]+", "download", weak=True),
        P(r"Successfully downloaded weights", "download", weak=True),
        P(r"\bStarting shard\b(?! rank=\d+ failed)", "weights_loading"),
        P(r"Waiting for shard to be ready", "weights_loading", weak=True),
        P(r"Server started at unix://", "weights_loaded", weak=True),
        P(r"Shard ready in [\d.]+", "weights_loaded", weak=True),
        P(r"KV-cache blocks: \d+, size: \d+", "kv_cache"),
        P(r"Starting Webserver", "warmup", weak=True),
        P(r"Warming up model", "warmup"),
        P(r"^warmup\{|\bwarmup\{", "warmup", weak=True),
        P(r"Cuda Graphs are enabled for sizes", "cuda_graph"),
        P(r"Setting max batch total tokens to \d+", "warmup", weak=True),
        *NCCL_PHASES,
    ),
    progress_markers=(
        ProgressMarker(
            r"Downloaded \S+ in [\d:.]+s?\. \((?P<done>\d+)/(?P<total>\d+)\)", "download", "download"
        ),
    ),
    failure_signatures=(
        S(
            r"Method Warmup encountered an error|warmup\{.*\}.*Server error|Error: Warmup\(",
            "warmup_failed",
            "the shard's warmup failed (often OOM during prefill or CUDA graph capture): lower "
            "--max-batch-prefill-tokens / --max-total-tokens or --cuda-graphs",
            True,
        ),
        S(
            # warmup allocates the KV cache blocks and runs the largest prefill: they do not fit together
            r"Not enough memory to handle \d+ (?:prefill |total )?tokens",
            "kv_cache",
            "the KV cache and the largest batch do not fit: lower --max-batch-prefill-tokens / --max-total-tokens "
            "/ --max-input-tokens, or raise --cuda-memory-fraction",
            True,
            phase="warmup",  # said in the warmup (corpus: b-tgi-awq-warmup-prefill-oom.log)
        ),
        S(r"Failed to bind to \S+", "port_in_use", "the port is already in use: change --port (PORT)", True),
        # its sharded layers split the heads between the shards (custom_modeling/*): --num-shard must divide them
        S(r"`num_heads` must be divisible by `num_shards`", "bad_argument",
          "the model's attention heads cannot be split between --num-shard shards: use a shard count that divides "
          "them", True),
        S(
            r"Shard process was signaled to shutdown with signal 9\b",
            "other",
            "a shard was SIGKILLed (signal 9): usually the host OOM killer; check dmesg and host RAM",
            True,
            15,
        ),
        S(  # SIGILL: the build needs CPU/GPU features this machine lacks (shared/logs labels it other|kernel_image)
            r"Shard process was signaled to shutdown with signal 4\b",
            "other",
            "a shard died with SIGILL (signal 4, illegal instruction): the binaries need CPU/GPU "
            "features this machine lacks (e.g. AVX-512 or a newer GPU arch); use a matching image",
            True,
            15,
        ),
        S(  # a native death (SIGSEGV, SIGABRT, ...); SIGKILL (above) is the OOM killer's, usually
            r"Shard process was signaled to shutdown with signal",
            "crashed",
            "a shard process was killed by a signal: see the shard's stderr above",
            True,
            10,
        ),
        S(
            r"Error: DownloadError|Download encountered an error",
            "other",
            "downloading the weights failed: check the model id, HF_TOKEN and network",
            True,
            12,
            "download",  # the launcher's download step, before any shard starts
        ),
        S(
            r"Error: ShardCannotStart|Shard \d+ failed to start|Error: ShardFailed|Shard \d+ crashed",
            "other",
            "a shard failed to start: see the shard's stderr above",
            True,
            WRAPPER_RANK,
            "weights_loading",  # a shard's start is its model's load (server.py serve -> get_model)
        ),
        S(
            r"Error: WebserverFailed|Error: WebserverCannotStart|Webserver Crashed",
            "other",
            "the router failed: see the error above",
            True,
            WRAPPER_RANK,
            "http_listening",  # the router starts once the shards are up (corpus: b-tgi-podman-webserver-failed)
        ),
        S(
            r"Error when initializing model",
            "other",
            "the shard failed to initialize the model: see the traceback",
            True,
            WRAPPER_RANK,
        ),
        S(
            r"Shard complete standard error output:",
            "other",
            "a shard exited: its stderr follows",
            True,
            WRAPPER_RANK,
        ),
        *TORCH_FAILURES,
    ),
    ready_markers=(
        r"(?:^|[:\s])Connected$|\"message\":\"Connected\"",
        # the router's span of a generation it answered: "generate{...}: text_generation_router::server: ...: Success"
        r"^(?:compat_)?(?:generate|generate_stream|chat_completions|completions)\{.{0,8192}\}: "
        r"text_generation_router::server: [\w/.]{1,200}:\d{1,6}: Success$",
        *SERVED_MARKERS,
    ),
    listening_markers=(
        r"(?:^|[:\s])Connected$|\"message\":\"Connected\"",
        r"Invalid hostname, defaulting to 0\.0\.0\.0",
    ),
    # router/src/server.rs, backends/v3: counters exposed without _total
    serving=ServingCounters(done=("tgi_request_success", "tgi_batch_inference_success"),
                            busy=("tgi_queue_size", "tgi_batch_current_size")),
    spec_decoding=(
        M("prometheus", "tgi_request_skipped_tokens", "histogram: speculated tokens accepted per request"),
    ),
    flags=CommandFlags(model=("--model-id",), model_env=("MODEL_ID",), tp=("--num-shard",), pp=(), dp=(), nnodes=(),
                       quantization=("--quantize",), context=("--max-total-tokens",),
                       context_env=("MAX_TOTAL_TOKENS",)),
    port_flags=("--port", "-p"),
    host_flags=("--hostname",),
    port_env=("PORT",),
    detect_patterns=(
        (r"text_generation_(?:launcher|router|client|server)", 4),
        (r"Shard ready in |Waiting for shard to be ready|Starting shard rank=", 4),
        (r"Error: ShardCannotStart|Error: WebserverFailed|Error: DownloadError", 4),
        (r"(?:^|: )Args \{ model_id:", 2),
        # TEI (text-embeddings-inference) shares TGI's router code and its "Args {" line, never its launcher: its
        # own crate names cancel them (corpus: h-generic-tei-qwen3-cpu-compose-download)
        (r"\btext_embeddings_(?:router|core|backend)\b", -5),
        (r"text-generation-launcher|text-generation-server", 3),
        (r"router/(?:client/)?src/\w+\.rs", 3),
    ),
    frame_markers=FRAME_MARKERS,
    notes="The router binds only after warmup: connection refused until 'Connected'.",
)
