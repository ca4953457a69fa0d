"""Fallback profile for an unknown engine: common PyTorch/CUDA/NCCL/HF/uvicorn signatures only.

Its ready line is the last word a server it does not know says of its start: uvicorn's "Uvicorn running on", which
uvicorn prints once the app's own startup is done and the socket is bound (not "Application startup complete.",
which precedes the bind on some engines and follows it on others), a server's own "Serving on host:port" /
"Listening on host:port", Triton's HTTP service (started once its models have loaded, whatever their backend), or
a served generation. Live, such a line is only the engine's claim: READY still needs the judge's own generation.
"""

from __future__ import annotations

from .common import (
    FRAME_MARKERS,
    NCCL_PHASES,
    SERVED_MARKERS,
    SHARD_PROGRESS,
    TORCH_FAILURES,
    TRITON_PHASES,
    UVICORN_PHASES,
)
from .profile import Endpoints, EngineProfile, FailureSignature, PhaseMarker

P = PhaseMarker
S = FailureSignature

GENERIC = EngineProfile(
    name="generic",
    display_name="Unknown engine",
    default_port=0,
    command_patterns=(),
    endpoints=Endpoints(
        health="/health",
        models="/v1/models",
        metrics="/metrics",
        info=(),
        lying_while_loading=("/v1/models",),
        listens_before_ready=True,
    ),
    phase_markers=(
        P(
            r"\b(?:init_process_group|Initializing distributed|torch\.distributed)\b",
            "distributed_init",
            weak=True,
        ),
        P(r"\bLoading (?:model )?weights\b|\bLoading model\b", "weights_loading", weak=True),
        P(r"\b[Mm]odel weights loaded\b|\bSuccessfully loaded \w+ model\b", "weights_loaded", weak=True),
        P(r"\b[Cc]apturing (?:CUDA|cuda) ?graphs?\b", "cuda_graph", weak=True),
        P(r"\b(?:[Ww]arming up|[Ww]armed up)\b", "warmup", weak=True),
        P(r"\bStarting HTTP (?:server|service)\b", "http_listening", weak=True),
        # a model file being read ("I rkllm: loading rkllm model from /root/...rkllm"), an HTTP framework's workers
        # starting (actix: "starting 8 workers"), a REST or gRPC front end up before its models are (OpenVINO Model
        # Server: "REST server listening on port 8000", "Started gRPC server on port 9178")
        P(r"\bloading \w+ model from \S", "weights_loading", weak=True),
        P(r"\bstarting \d+ workers$", "http_listening", weak=True),
        # Fiber's start-up banner (LocalAI), printed as it binds, its box's edge perhaps peeled as a frame (corpus:
        # h-generic-localai-compose-fiber-banner-cut)
        P(r"^(?:\s*│)?\s*Fiber v\d+\.\d+\.\d+\s+│", "http_listening", weak=True),
        # a Rust server's hub fetch: TEI's download of its artifacts, mistral.rs's indicatif bar of a file
        # (corpus: h-generic-tei-qwen3-cpu-compose-download, h-generic-mistralrs-gguf-config-null-usize)
        P(r"\bdownload(?:_artifacts)?: .*\bStarting download$|^[\w.-]{1,200}\.(?:json|safetensors|gguf|model) "
          r"\[\d\d:\d\d:\d\d\] \[", "download", weak=True),
        P(r"\b(?:REST|gRPC) server listening on port \d+|\bStarted (?:REST|gRPC) server (?:at|on) ", "http_listening",
          weak=True),
        *UVICORN_PHASES,
        *TRITON_PHASES,
        *NCCL_PHASES,
    ),
    progress_markers=SHARD_PROGRESS,
    failure_signatures=(
        *TORCH_FAILURES,
        # a program's last word as it exits on an error (a Rust main's Err, a Go CLI's): "Error: Could not create
        # backend" (corpus: f-generic-tei-compose-distilbert-missing-tensor)
        S(r"^Error: \S", "other", "the server exited at start: the error and the lines before it say why", True, 15),
    ),
    # an unknown server that answered a generation served; Triton (server/src/http_server.cc) once its models loaded;
    # uvicorn bound after the app's startup; a server's own word that it serves on an address (corpus: f-generic-
    # fastchat-model-worker-uvicorn-ready, f-generic-gpustack-docker-server-serving-tools-download)
    ready_markers=(*SERVED_MARKERS, r"^\"?Started HTTPService at \S+", r"Uvicorn running on \S+",
                   r"\b(?:Serving|Listening) on (?:https?://)?[\w.\-\[\]:]+:\d+\.?$",
                   # a desktop server's word that its HTTP server listens (LM Studio: "Success! HTTP server listening
                   # on port 1234"), and a launcher's that its model is ready (OpenLLM: "Model is ready")
                   r"\bHTTP server listening on port \d+$", r"^Model is ready$",
                   # Fiber's banner says where it is bound once it has bound (LocalAI; corpus: c-generic-localai-
                   # fiber-banner-ready)
                   r"^(?:\s*│)?\s*\(bound on host \S+ and port \d+\)\s+│"),
    listening_markers=(r"Uvicorn running on \S+",),
    port_flags=("--port",),
    host_flags=("--host",),
    frame_markers=FRAME_MARKERS,
)
