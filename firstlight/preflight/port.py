"""Is the server's port free? Bind it the way servers do (SO_REUSEADDR, never SO_REUSEPORT, which would let
us share a port vLLM holds with SO_REUSEPORT), and when it is taken, say who holds it (psutil).
A refused connection does not prove a port free; only a bind does.
"""

from __future__ import annotations

import errno
import socket

import psutil

from firstlight.preflight.base import FAIL, OK, WARN, Check
from firstlight.preflight.procinfo import ProcInfo, proc_info
from firstlight.preflight.target import Target
from firstlight.redact import Redactor

NAME = "port"
CATEGORY = "port_in_use"


def try_bind(host: str, port: int) -> OSError | None:
    """None when ``host:port`` could be bound right now, else the error."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        return OSError(errno.EADDRNOTAVAIL, f"cannot resolve {host!r}: {e}")
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as e:
            return e
    return None


def holders(port: int, redactor: Redactor | None = None) -> list[ProcInfo]:
    """The processes listening on ``port`` (empty when the kernel will not say)."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, OSError):
        return []
    pids = sorted({c.pid for c in conns if c.pid and c.laddr and c.laddr.port == port
                   and c.status == psutil.CONN_LISTEN})
    return [proc_info(pid, redactor) for pid in pids]


def check_port(target: Target, redactor: Redactor | None = None) -> Check:
    if target.port is None:
        return Check(NAME, OK, CATEGORY, "skipped: no port in the command and no engine default")
    host = target.host or "0.0.0.0"
    err = try_bind(host, target.port)
    where = f"{host}:{target.port}"
    if err is None:
        return Check(NAME, OK, CATEGORY, f"{where} is free (bind succeeded)")
    if err.errno != errno.EADDRINUSE:
        return Check(NAME, WARN, CATEGORY, f"cannot bind {where}: {err.strerror or err}",
                     "check --host: it must be an address of this machine")
    held = holders(target.port, redactor)
    who = "; ".join(p.describe() for p in held) if held else "a process this user cannot see"
    hint = " or ".join(p.stop_hint() for p in held) + " (or choose another --port)" if held else "choose another --port"
    return Check(NAME, FAIL, CATEGORY, f"{where} is in use by {who}", hint)
