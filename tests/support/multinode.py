"""Helpers shared by tests/e2e/runner/test_multinode.py and tests/e2e/llama/test_rpc_group.py."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any


def free_port_on(host: str) -> int:
    """A free port on one loopback address (each simulated node has its own 127.0.1.N)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def readyz(url: str) -> tuple[int, dict[str, Any]]:
    """A node's /readyz: its status and JSON body (any status); (0, {}) when nothing answers."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except OSError:
        return 0, {}
