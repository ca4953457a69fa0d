"""Fallback profile for an unknown engine: common PyTorch/CUDA/NCCL/HF/uvicorn signatures only.

It has no uvicorn ready marker (a plain "Application startup complete." precedes the bind on some engines and
follows it on others): a generic log reaches ``ready`` from text alone only by a served generation, or by Triton's
HTTP service starting, which it does once its models have loaded, whatever their backend.
"""

from __future__ import annotations

from .common import FRAME_MARKERS, NCCL_PHASES, SERVED_MARKERS, SHARD_PROGRESS, TORCH_FAILURES, UVICORN_PHASES
from .profile import Endpoints, EngineProfile, PhaseMarker

P = PhaseMarker

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
        P(r"\b[Cc]apturing (?:CUDA|cuda) ?graphs?\b", "cuda_graph", weak=True),
        *UVICORN_PHASES,
        *NCCL_PHASES,
    ),
    progress_markers=SHARD_PROGRESS,
    failure_signatures=TORCH_FAILURES,
    # an unknown server that answered a generation served; Triton (server/src/http_server.cc) once its models loaded
    ready_markers=(*SERVED_MARKERS, r"^\"?Started HTTPService at \S+"),
    listening_markers=(r"Uvicorn running on \S+",),
    port_flags=("--port",),
    host_flags=("--host",),
    frame_markers=FRAME_MARKERS,
)
