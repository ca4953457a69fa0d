"""Who listens on a TCP port: so that an open port counts for the server firstlight launched only when the
listening socket is that server's.

Another server already answering on the port would otherwise make a launched server that died of "address
already in use" look READY. ``tree_listens`` asks the launched processes themselves (always permitted for our
own children); ``holders`` asks the whole system (``psutil.net_connections``), which may be refused without
privileges (then it says so rather than guessing).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psutil

from firstlight.cputime import CLK_TCK
from firstlight.samplers.proctable import read_stat


@dataclass(frozen=True)
class Holder:
    pid: int | None  # None: the socket's owner is not visible to us (another user's process)
    name: str | None
    address: str

    def describe(self) -> str:
        who = f"pid {self.pid} ({self.name})" if self.pid is not None else "a process firstlight cannot see"
        return f"{who} on {self.address}"


def _listening_on(conns: Iterable[Any], port: int) -> list[Any]:
    """psutil's connections (``laddr`` an empty tuple for a socket not bound) that listen on ``port``."""
    return [c for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]


def tree_listens(procs: Iterable[psutil.Process], port: int) -> bool:
    """Whether one of these processes has a socket listening on ``port``."""
    for p in procs:
        try:
            if _listening_on(p.net_connections(kind="tcp"), port):
                return True
        except psutil.Error:
            continue
    return False


def _tree(pid: int) -> tuple[list[psutil.Process] | None, str]:
    """``pid`` and its descendants, or None with why a worker's check holds nothing: gone, or a process of it
    stopped (SIGSTOP, a debugger) or dead, which serves nothing whatever its sockets say."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None, f"pid {pid} is gone"
    for p in procs:
        try:
            status = p.status()
        except psutil.Error:
            continue
        if status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return None, f"pid {p.pid} is {status}: it serves nothing"
    return procs, ""


def worker_listening(pid: int, port: int) -> tuple[bool, str]:
    """A worker's readiness, observed in /proc without connecting (llama.cpp's RPC server serves one client with a
    listen backlog of one): whether ``pid``'s process tree listens on ``port``; a stopped process (SIGSTOP, a
    debugger) serves nothing, whatever its sockets say. (held, what was seen)."""
    procs, why = _tree(pid)
    if procs is None:
        return False, why if why.endswith("gone") else f"{why} (port {port} not checked)"
    if tree_listens(procs, port):
        return True, f"pid {pid} listens on port {port} (seen in /proc, no connection made)"
    return False, f"no process of pid {pid}'s tree listens on port {port}"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def worker_connected(pid: int, heads: Iterable[str]) -> tuple[bool, str]:
    """A worker that serves no port (vLLM --headless) observed in /proc: whether ``pid``'s process tree holds an
    established TCP connection to its head node (one of ``heads``; a head named by a host name, never resolved
    here: a lookup has no deadline, matches any peer). A stopped process serves nothing. (held, what was seen)."""
    heads = tuple(heads)
    procs, why = _tree(pid)
    if procs is None:
        return False, why
    ips = {"127.0.0.1", "::1"} if any(h == "localhost" for h in heads) else set()
    ips |= {str(ipaddress.ip_address(h)) for h in heads if _is_ip(h)}
    named = any(not _is_ip(h) and h != "localhost" for h in heads)
    for p in procs:
        try:
            conns = p.net_connections(kind="tcp")
        except psutil.Error:
            continue
        for c in conns:
            if c.status != psutil.CONN_ESTABLISHED or not c.raddr:
                continue
            ip = c.raddr.ip.removeprefix("::ffff:")
            if ip in ips or named:
                return True, (f"pid {p.pid} is connected to its head {ip}:{c.raddr.port} (seen in /proc, no "
                              f"connection made)")
    return False, f"no process of pid {pid}'s tree is connected to its head ({', '.join(heads) or 'any'})"


def holders(port: int) -> tuple[list[Holder], str | None]:
    """Processes listening on ``port`` system-wide, and why the answer may be incomplete (None if complete)."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return [], "listing the system's sockets needs privileges here"
    except (psutil.Error, OSError) as e:
        return [], f"cannot list sockets: {e}"
    out = []
    for c in _listening_on(conns, port):
        name = None
        if c.pid is not None:  # None: another user's socket, seen without privileges
            try:
                name = psutil.Process(c.pid).name()
            except psutil.Error:
                name = "?"
        out.append(Holder(c.pid, name, f"{c.laddr.ip}:{port}"))
    return out, None


def _started_at(pid: int) -> float | None:
    """When ``pid`` started, to the clock tick: its start in ticks after boot, and the boot's time from
    ``/proc/uptime`` (hundredths). psutil's ``create_time`` adds the boot time in whole seconds (``btime``), up to
    a second early: podman's conmon, started just after the launch, read as there before it."""
    st = read_stat(pid)
    if st is None:
        return None
    try:
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        try:
            return psutil.Process(pid).create_time()
        except psutil.Error:
            return None
    return time.time() - uptime + st.start_ticks / CLK_TCK


def foreign_listener(tree: Iterable[psutil.Process], port: int, launched_at: float) -> str | None:
    """Evidence for ``port_in_use`` when ``port`` is held by a process outside the launched tree that is older
    than the launch (a server that was there first); None when the tree listens, or when no such holder can
    be seen (a container's port proxy starts after the launch and is not in the tree: it is not foreign)."""
    procs = list(tree)
    if tree_listens(procs, port):
        return None
    mine = {p.pid for p in procs}
    found, _ = holders(port)
    older = []
    for h in found:
        if h.pid is None or h.pid in mine:
            continue
        started = _started_at(h.pid)
        if started is not None and started < launched_at:
            older.append(h)
    if not older:
        return None
    return f"port {port} is held by " + ", ".join(h.describe() for h in older) + \
        " (there before the launch), not by the launched server"
