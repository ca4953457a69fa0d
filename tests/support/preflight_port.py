"""Helpers shared by tests/e2e/preflight/test_port.py, tests/unit/preflight/test_port.py."""

from __future__ import annotations

from firstlight.preflight.base import Check
from firstlight.preflight.port import check_port as _check_port
from firstlight.preflight.target import Target, read_target
from firstlight.redact import Redactor


def check_port(target: Target, redactor: Redactor | None = None) -> Check:
    c = _check_port(target, redactor)
    assert c.name == "port" and c.category == "port_in_use", c
    return c


def target(port: int | None, host: str | None = "127.0.0.1") -> Target:
    argv = ["llama-server", "-m", "m.gguf"]
    if host is not None:
        argv += ["--host", host]
    t = read_target(argv + (["--port", str(port)] if port is not None else []))
    return t
