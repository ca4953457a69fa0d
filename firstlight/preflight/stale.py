"""A stale server: another process of the same engine still running with the same model or the same port
(the field notes' start failed first on an old service still holding GPU 0). Same port: that start will
fail (``port_in_use``). Same model only: it may hold the GPU memory or RAM the new one needs (a warning).
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from firstlight.engines import ServerCommand, read_command
from firstlight.preflight.base import FAIL, OK, WARN, Check
from firstlight.preflight.procinfo import proc_info
from firstlight.preflight.target import Target
from firstlight.redact import Redactor

NAME = "stale_server"


def _ours() -> set[int]:
    out = {os.getpid()}
    try:
        out.update(p.pid for p in psutil.Process().parents())
    except psutil.Error:
        pass
    return out


def _same_path(a: str, b: Path | None, cwd: str | None) -> bool:
    if b is None:
        return False
    p = Path(a).expanduser()
    if not p.is_absolute() and cwd:
        p = Path(cwd) / p
    try:
        return p.exists() and os.path.samefile(p, b)
    except OSError:
        return False


def _is_firstlight(cmdline: list[str]) -> bool:
    """``firstlight up -- llama-server ...`` names the engine too; its child is the server to report."""
    head = [os.path.basename(t) for t in cmdline[:3]]
    return "firstlight" in head


def _matches(target: Target, cmd: ServerCommand, cwd: str | None) -> tuple[bool, bool]:
    """(same model, same port) for a process of the target's engine."""
    model = cmd.model
    same_model = model is not None and (model == target.model or _same_path(model, target.model_path, cwd))
    return same_model, cmd.port is not None and cmd.port == target.port


def check_stale(target: Target, redactor: Redactor | None = None) -> Check:
    if target.engine is None:
        return Check(NAME, OK, "other", "skipped: the engine is not known from the command")
    ours = _ours()
    found: dict[int, tuple[bool, bool]] = {}
    parents: dict[int, int] = {}
    # The engine must be the program itself (``llama-server``, ``python -m sglang...``, ``vllm serve``), not
    # a word further on (a build of llama-server, an editor with a file of that name).
    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
        cmdline = proc.info.get("cmdline")
        if proc.pid in ours or not cmdline or _is_firstlight(cmdline):
            continue
        cmd = read_command(cmdline, env={})
        if not cmd.named_by_program or cmd.engine != target.engine:
            continue
        try:
            cwd: str | None = proc.cwd()
        except psutil.Error:
            cwd = None
        model, port = _matches(target, cmd, cwd)
        if model or port:
            found[proc.pid] = (model, port)
            parents[proc.pid] = proc.info.get("ppid") or 0
    top = [pid for pid in found if parents[pid] not in found]  # a server's workers count as the server
    if not top:
        return Check(NAME, OK, "other", f"no other {target.engine} process with this model or port")
    same_port = [pid for pid in top if found[pid][1]]
    infos = {pid: proc_info(pid, redactor) for pid in top}
    said = "; ".join(f"{'same port' if found[pid][1] else 'same model'}: {infos[pid].describe()}" for pid in top)
    hint = " or ".join(infos[pid].stop_hint() for pid in top)
    if same_port:
        return Check(NAME, FAIL, "port_in_use", f"another {target.engine} still runs: {said}", hint)
    return Check(NAME, WARN, "gpu_occupied", f"another {target.engine} still runs: {said} (it may hold the GPU "
                 "memory or RAM this start needs)", hint)
