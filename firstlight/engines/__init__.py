"""Engine profiles (as data) and detection.

>>> from firstlight.engines import get_profile
>>> get_profile("sglang").classify("[2025-08-11 02:16:56] The server is fired up and ready to roll!").ready
True

Layout: ``profile`` (dataclasses, PHASES, FAILURE_CATEGORIES, the classifier), ``common`` (PyTorch/CUDA/NCCL/
HF signatures shared by engines), one data module per engine (``sglang``, ``vllm``, ``llamacpp``, ``tgi``,
``trtllm``, ``lmdeploy``, ``ollama``, ``generic``), ``command`` (the one reader of a launch command: engine,
model, host and port, parallelism), ``detect`` (log and endpoint detection) and ``words`` (the engines' word
table learned from the corpus, ``words.json``: detection where no pattern names the engine). Pure data and matching:
nothing here drives the judge (``firstlight.drive`` does).

Adding an engine is a data change in one module: an :class:`EngineProfile` (markers, signatures, endpoints, flags,
``detect_patterns``, ``endpoint_rules``, container ``images``, ``ignore_eos``, ``clock_endpoints``), added to
``PROFILES`` below or given to :func:`register_profile`. Everything that reads an engine (the command reader, the
log and endpoint detection, the probes, ``--engine``) reads the registered profiles; docs/engines.md shows how.
Adding a message is one more tuple in the engine's module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from . import command as _command
from . import detect as _detect
from .command import ServerCommand
from .detect import EngineDetector
from .generic import GENERIC
from .llamacpp import LLAMACPP
from .llamarpc import LLAMA_RPC
from .lmdeploy import LMDEPLOY
from .ollama import OLLAMA
from .profile import (
    FAILURE_CATEGORIES,
    PHASES,
    ClockEndpoint,
    EndpointRule,
    Endpoints,
    EngineProfile,
    Failure,
    FailureSignature,
    ImageEntrypoint,
    JsonValue,
    LineMatch,
    PhaseMarker,
    Progress,
    ProgressMarker,
    SpecMetric,
    clean_line,
)
from .sglang import SGLANG
from .tgi import TGI
from .trtllm import TRTLLM
from .vllm import VLLM

PROFILES: dict[str, EngineProfile] = {
    p.name: p for p in (SGLANG, VLLM, LLAMACPP, LLAMA_RPC, TGI, TRTLLM, LMDEPLOY, OLLAMA, GENERIC)
}


def register_profile(profile: EngineProfile) -> None:
    """Add (or replace) an engine profile; a new engine is a data module plus this call. Its place in the registry
    breaks ties: a profile registered later is weighed after those before it."""
    PROFILES[profile.name] = profile


def unregister_profile(name: str) -> None:
    """Take a registered profile away (a test's, a plugin's); the built-in ``generic`` stays."""
    if name != "generic":
        PROFILES.pop(name, None)


def get_profile(name: str) -> EngineProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; valid engines: {', '.join(PROFILES)}") from None


def _engines() -> list[EngineProfile]:
    return [p for n, p in PROFILES.items() if n != "generic"]


def read_command(argv: Sequence[str] | str, *, engine: str | None = None,
                 env: Mapping[str, str] | None = None) -> ServerCommand:
    """The one reading of a launch command (argv list, or one shell string): engine, model, host and port,
    parallelism, quantization, through every wrapper (``env``, ``uv run``, ``torchrun``, ``docker run``, a shell).
    ``engine`` overrides the one the command names; ``env`` is the environment it will be started in."""
    return _command.parse_command(argv, PROFILES, engine=engine, env=env)


def detect_from_command(argv: Sequence[str] | str) -> str | None:
    """Engine name from a launch command (argv list, or one shell string), or ``None``."""
    return read_command(argv).engine


def detect_from_endpoint(path: str, status: int, body: str) -> str | None:
    """Engine name from one HTTP answer (path, status, body text), by the registered profiles' ``endpoint_rules``,
    or ``None`` when it says nothing."""
    return _detect.detect_from_endpoint(path, status, body, _engines())


def detection_paths() -> list[str]:
    """The paths identification asks a server, in the order their answers are weighed."""
    return _detect.detection_paths(_engines())


def detect_from_lines(lines: Iterable[str], max_lines: int = 5000) -> str | None:
    """Engine name from log lines (reads at most ``max_lines``), or ``None``."""
    return _detect.detect_from_lines(lines, _engines(), max_lines=max_lines)


def new_detector() -> EngineDetector:
    """An incremental detector over the registered engines (for live log readers)."""
    return EngineDetector(_engines())


__all__ = [
    "FAILURE_CATEGORIES",
    "PHASES",
    "PROFILES",
    "ClockEndpoint",
    "EndpointRule",
    "Endpoints",
    "EngineDetector",
    "EngineProfile",
    "Failure",
    "FailureSignature",
    "ImageEntrypoint",
    "JsonValue",
    "LineMatch",
    "PhaseMarker",
    "Progress",
    "ProgressMarker",
    "ServerCommand",
    "SpecMetric",
    "clean_line",
    "detect_from_command",
    "detect_from_endpoint",
    "detect_from_lines",
    "detection_paths",
    "get_profile",
    "new_detector",
    "read_command",
    "register_profile",
    "unregister_profile",
]
