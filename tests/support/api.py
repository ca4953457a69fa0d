"""Helpers shared by tests/e2e/api/test_api.py, tests/unit/api/test_api.py."""

from __future__ import annotations

import sys

from tests.support.llama_server import llama, server_cmd  # noqa: F401  (llama: the fixture)

SECRET = "sk-apitest-7f3a9c1e5b"


def _crash_cmd() -> list[str]:
    """A server that dies of a CUDA OOM before it listens, with a secret on its command line."""
    code = ("import sys; print('loading weights', flush=True); "
            "print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB', file=sys.stderr); "
            "sys.exit(1)")
    return [sys.executable, "-c", code, "--api-key", SECRET]
