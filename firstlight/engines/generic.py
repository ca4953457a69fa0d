"""Fallback profile for an unknown engine: common PyTorch/CUDA/NCCL/HF/uvicorn signatures only.

It has no ready marker of its own (a plain uvicorn "Application startup complete." precedes the bind on
some engines and follows it on others), so a generic log never reaches ``ready`` from text alone; the
generation probe decides.
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
    ready_markers=SERVED_MARKERS,  # an unknown server that answered a generation served
    listening_markers=(r"Uvicorn running on \S+",),
    port_flags=("--port",),
    host_flags=("--host",),
    frame_markers=FRAME_MARKERS,
)
