"""LMDeploy ``lmdeploy serve api_server`` (TurboMind and PyTorch engines).

``serve/openai/api_server.py`` builds the pipeline (engine, weights, KV cache) before ``uvicorn.run``, and
prints "HINT:    Please open http://... in a browser for detailed api usage!!!" three times just before it.
``/health`` answers 503 ("initializing") until the health monitor's first probe, then 200.
"""

from __future__ import annotations

from .common import FRAME_MARKERS, NCCL_PHASES, SERVED_MARKERS, SHARD_PROGRESS, TORCH_FAILURES, UVICORN_PHASES
from .profile import (
    WRAPPER_RANK,
    CommandFlags,
    Endpoints,
    EngineProfile,
    FailureSignature,
    PhaseMarker,
    metric_prefix,
    owned_by,
)

S = FailureSignature
P = PhaseMarker

LMDEPLOY = EngineProfile(
    name="lmdeploy",
    display_name="LMDeploy",
    default_port=23333,
    default_host="0.0.0.0",
    command_patterns=(
        r"(?:^|[\s/])lmdeploy\s+serve\s+api_server\b",
        r"-m\s+lmdeploy\.serve\.openai\.api_server\b",
        r"\bopenmmlab/lmdeploy\b",
    ),
    endpoints=Endpoints(
        health="/health",
        models="/v1/models",
        metrics="/metrics",  # --enable-metrics
        info=(),
        lying_while_loading=(),
        listens_before_ready=False,
    ),
    endpoint_rules=(*owned_by("lmdeploy"), metric_prefix("lmdeploy")),
    ignore_eos=True,
    phase_markers=(
        P(r"^model_source: |^input backend=|^Build <\w+> pipeline", "process_start"),
        # its gradio and API servers' address, said before they bind (corpus: h-lmdeploy-gradio-bind-ipv6-errno99)
        P(r"^server is gonna mount on: https?://", "http_listening"),
        # TurboMind's forward passes at DEBUG before the server is up: its warm-up (corpus: h-lmdeploy-v100-tp8-
        # debug-forward-stall)
        P(r"^\[TM\]\[DEBUG\] .*::Forward\(", "warmup", weak=True),
        P(
            r"^model_config:|get \d+ model params|Loading weights from safetensor|^Checking model\.\.\.|"
            r"turbomind::.*(?:load|Load)|"
            # the PyTorch engine sharding its model over its TP ranks (corpus: f-lmdeploy-pytorch-tp2-baichuan-rank1-
            # failed-dist-model)
            r"\bdistribute model parameters\.$",
            "weights_loading",
        ),
        # TurboMind's GEMM tuning file, looked for as it builds the model's weights on the GPUs
        # (corpus: b-lmdeploy-turbomind-pointer-mapping-abort)
        P(r"^\[WARNING\] gemm_config\.in is not found; using default GEMM algo", "weights_loading", weak=True),
        # TurboMind tuning its GEMM kernels for the batch sizes it will run ("[Gemm2] Tuning sequence: 8, 16, ...")
        P(r"\[Gemm2\] Tuning sequence: ", "compile", weak=True),
        # the setting's mention, not its value in a config dump ("cache_max_entry_count = 0.8" in TurboMind's
        # model_config, corpus: b-lmdeploy-turbomind-tp2-34b-config; its JSON form, h-lmdeploy-internlm-chat-7b-tp4-
        # turbomind-config-cut)
        P(r"build CacheEngine|\bcache_max_entry_count\b(?! ?=|\": )|num_gpu_blocks", "kv_cache", weak=True),
        # TurboMind's block manager sizing the KV cache's blocks (models/llama/BlockManager.cc)
        P(r"\[BlockManager\] (?:block_size|max_block_count) = ", "kv_cache"),
        P(r"[Ww]arming up|warmup", "warmup", weak=True),
        P(r"^HINT: +Please open .* in a browser for detailed api usage", "http_listening"),
        *UVICORN_PHASES,
        *NCCL_PHASES,
    ),
    progress_markers=SHARD_PROGRESS,
    failure_signatures=(
        S(
            r"\[TM\]\[ERROR\].*out of memory|CUDA runtime error: out of memory",
            "oom",
            "not enough GPU memory: lower --cache-max-entry-count or --session-len, or add --tp",
            True,
        ),
        S(r"\[TM\]\[ERROR\]|\[TM\]\[FATAL\]", "other", "TurboMind reported an error: see the line", True, 5),
        # the PyTorch engine's TP process manager: a rank died while starting (pytorch/engine/model_agent.py)
        S(r"_start_tp_process - \d+ - Rank\[\d+\] failed\.", "other",
          "a tensor-parallel rank failed while starting: its traceback below names the cause", True, WRAPPER_RANK),
        S(
            r"Engine (?:main loop|loop) (?:failed|stopped)|EngineHealthMonitor.*unhealthy",
            "other",
            "the engine loop died: see the traceback above",
            True,
            WRAPPER_RANK,
        ),
        *TORCH_FAILURES,
    ),
    # ... and its gradio server's (corpus: h-lmdeploy-gradio-turbomind-tp4-peer-access-ready)
    ready_markers=(r"^Application startup complete\.", r"Uvicorn running on \S+", r"^Running on local URL: +https?://",
                   *SERVED_MARKERS),
    listening_markers=(r"Uvicorn running on \S+",),
    flags=CommandFlags(model=(), model_after=("api_server",), tp=("--tp",), pp=("--pp",), dp=("--dp",),
                       quantization=("--model-format",), context=("--session-len",)),
    port_flags=("--server-port",),
    host_flags=("--server-name",),
    detect_patterns=(
        (r" - lmdeploy - (?:INFO|WARNING|ERROR|DEBUG)", 4),
        (r"\[TM\]\[(?:INFO|WARNING|ERROR|DEBUG|FATAL)\]", 4),
        # its model source (corpus: h-lmdeploy-internlm-chat-7b-tp4-turbomind-config-cut), its servers' address line
        # (h-lmdeploy-gradio-bind-ipv6-errno99)
        (r"^model_source: \w+$", 4),
        (r"^server is gonna mount on: https?://", 4),
        (r"^\[WARNING\] gemm_config\.in is not found; using default GEMM algo", 4),  # TurboMind's
        (r"Please open .* in a browser for detailed api usage", 4),
        (r"^usage: lmdeploy ", 4),  # its CLI's argparse usage
        (r"lmdeploy", 2),
        (r"\blmdeploy serve (?:api_server|gradio|proxy)\b", 4),  # its command line, as a shell echoed it
        (r"^\s*File \"[^\"]*[/\\]lmdeploy[/\\][\w/\\]+\.py\", line \d+, in ", 2),  # a traceback frame of its own
    ),
    frame_markers=(
        *FRAME_MARKERS,
        # TurboMind's model instance, made once its weights are on the GPUs: it allocates the KV cache and the
        # buffers (turbomind/turbomind.py _create_model_instance)
        P(r"^\s*File \"[^\"]*[/\\]turbomind[/\\]turbomind\.py\", line \d+, in _create_model_instance$", "kv_cache"),
    ),
    notes="The engine is built before uvicorn starts; /health is 503 'initializing' right after start.",
)
