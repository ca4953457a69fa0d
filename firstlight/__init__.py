"""firstlight: tells the people who run LLM servers when their server really serves, and what it is doing
until then.

The Python API (``firstlight.api``; docs/python-api.md)::

    import firstlight

    with firstlight.up(["llama-server", "-m", "model.gguf", "--port", "8080"], timeout=300) as server:
        ...  # READY: a real generation returned; server.url, server.result (a RunResult)
    # the server's whole process group is stopped here

``up`` and ``watch`` enter at READY and raise ``NotReady`` (its ``result``: verdict, failure, evidence) when the
server fails, hangs or times out; ``run_preflight`` runs the checks before launch (not ``preflight``: that name is
the checks' package, ``firstlight.preflight``), ``replay`` judges a startup log. Every exception class firstlight
defines derives from ``FirstlightError`` (its tree: ``firstlight.errors``).
The pytest plugin (``firstlight.pytest_plugin``) starts a server for a test session.

Under them, the CLI's own pieces: ``firstlight.config.Config`` (what to watch), ``firstlight.runner.session``
(one watch, launch or attach), ``firstlight.judge`` (observations in, verdict out), ``firstlight.probes.ladder``
(the readiness probes), the samplers in ``firstlight.samplers`` and the engine profiles in ``firstlight.engines``.

The names are loaded on first use, so that ``import firstlight`` (and the pytest plugin, which every pytest
run in an environment with firstlight loads) costs nothing until the API is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from firstlight._version import __version__

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "up": "firstlight.api",
    "watch": "firstlight.api",
    "run_preflight": "firstlight.api",
    "replay": "firstlight.api",
    "Server": "firstlight.api",
    "NotReady": "firstlight.api",
    "FirstlightError": "firstlight.errors",
    "Config": "firstlight.config",
    "RunResult": "firstlight.result",
    "PreflightReport": "firstlight.preflight.base",
    "STARTING": "firstlight.vocab",
    "READY": "firstlight.vocab",
    "FAILED": "firstlight.vocab",
    "HUNG": "firstlight.vocab",
    "TIMEOUT": "firstlight.vocab",
    "INTERRUPTED": "firstlight.vocab",
    "REGRESSION": "firstlight.vocab",
}

__all__ = [
    "FAILED",
    "HUNG",
    "INTERRUPTED",
    "READY",
    "REGRESSION",
    "STARTING",
    "TIMEOUT",
    "Config",
    "FirstlightError",
    "NotReady",
    "PreflightReport",
    "RunResult",
    "Server",
    "__version__",
    "replay",
    "run_preflight",
    "up",
    "watch",
]

if TYPE_CHECKING:
    from firstlight.api import NotReady, Server, replay, run_preflight, up, watch
    from firstlight.config import Config
    from firstlight.errors import FirstlightError
    from firstlight.preflight.base import PreflightReport
    from firstlight.result import RunResult
    from firstlight.vocab import FAILED, HUNG, INTERRUPTED, READY, REGRESSION, STARTING, TIMEOUT


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'firstlight' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later reads do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
