"""What the launch command will use, read without running it: the command as the one command reader
(``firstlight.engines.command``) sees it (engine, model, host and port, tensor-parallel size, through ``env``,
``uv run``, ``torchrun``, ``docker run`` and shell wrappers), the model on disk, the GPUs (CUDA_VISIBLE_DEVICES),
vLLM's --gpu-memory-utilization, and the Python interpreter that will run the server (``python -m ...``, or the
shebang of a console script such as ``vllm``), so the checks read that interpreter's packages, not firstlight's
own.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from firstlight.engines import ServerCommand, get_profile, read_command
from firstlight.files import open_regular
from firstlight.samplers.weights import resolve_model_dir

GPU_UTIL_FLAGS = get_profile("vllm").flags.memory_share
VLLM_DEFAULT_GPU_UTIL = get_profile("vllm").flags.memory_share_default or 0.9  # the profile's, one place


@dataclass
class Target:
    """The launch command as the checks see it."""

    argv: list[str]  # the server's own command line (wrappers taken off)
    env: dict[str, str]
    engine: str | None
    model: str | None  # as written in the command
    model_path: Path | None  # on disk (a local path, or a Hugging Face id found in the hub cache)
    host: str | None
    port: int | None
    tp: int
    gpu_util: float | None  # vLLM only
    visible_devices: list[str] | None  # CUDA_VISIBLE_DEVICES entries, None when unset
    interpreter: str | None  # the Python that will run the server, None for a native binary
    interpreter_source: str = ""  # how it was found
    command: ServerCommand | None = None  # the whole reading

    @property
    def gpu_indices_hint(self) -> str:
        cvd = "unset" if self.visible_devices is None else ",".join(self.visible_devices) or "(empty)"
        return f"CUDA_VISIBLE_DEVICES={cvd}, TP {self.tp}"


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def shebang_interpreter(script: Path) -> str | None:
    """The Python a console script runs under: its ``#!`` line, or pip's ``/bin/sh`` trampoline for long
    paths (``'''exec' "/path/python" "$0" "$@"``); None when it is not a Python script."""
    try:
        with open_regular(script) as f:
            head = f.read(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    lines = head.decode("utf-8", "replace").splitlines()
    words = lines[0][2:].split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        if not words:
            return None
        found = shutil.which(words[0])
        return found if found and "python" in os.path.basename(words[0]) else None
    if "python" in os.path.basename(words[0]):
        return words[0]
    if os.path.basename(words[0]) == "sh" and len(lines) > 1:
        m = re.search(r"'''exec' (?:\"([^\"]*python[^\"]*)\"|(\S*python\S*))", lines[1])
        if m:
            return m.group(1) or m.group(2)
    return None


def find_interpreter(argv: Sequence[str], env: Mapping[str, str],
                     cmd: ServerCommand | None = None) -> tuple[str | None, str]:
    """(interpreter, how it was found) for the server's command line; (None, why) for a native binary, a server
    in a container, or one that ``uv`` starts in an environment it picks."""
    if cmd is not None and cmd.in_container:
        return None, f"the server runs in the container image {cmd.image}"
    if cmd is not None and {"uv run", "uvx"} & set(cmd.wrappers):
        return None, "uv picks the server's Python"
    if not argv:
        return None, "empty command"
    exe = argv[0]
    found = shutil.which(exe, path=env.get("PATH", os.defpath)) if os.sep not in exe else exe
    if os.path.basename(exe).startswith("python"):
        return (found, f"the command runs {exe}") if found else (None, f"{exe} not found on PATH")
    if found is None:
        return None, f"{exe} not found on PATH"
    interp = shebang_interpreter(Path(found))
    if interp is None:
        return None, f"{found} is not a Python script"
    return interp, f"shebang of {found}"


def read_target(command: Sequence[str], env: Mapping[str, str] | None = None, engine: str | None = None,
                model: str | None = None, reach: tuple[str | None, int | None] | None = None,
                server: ServerCommand | None = None) -> Target:
    """Everything the checks need from the command (``engine``/``model`` override what the command says;
    ``reach``, the host and port the watch will probe (``up --url``), overrides where the command says it
    listens: a command that names no port is not checked on its engine's default port). ``server``: the command as
    the run already read it (in ``env``, by ``engine``), not read again."""
    cmd = server or read_command(list(command), engine=engine, env=os.environ if env is None else env)
    argv, full_env = list(cmd.server), dict(cmd.env)
    local = model or cmd.model_local
    cvd = full_env.get("CUDA_VISIBLE_DEVICES")
    visible = None if cvd is None else [d.strip() for d in cvd.split(",") if d.strip()]
    interp, how = find_interpreter(argv, full_env, cmd)
    return Target(
        argv=argv, env=full_env, engine=cmd.engine, model=model or cmd.model,
        model_path=resolve_model_dir(local) if local else None, tp=cmd.tp or 1,
        host=reach[0] if reach else cmd.reach_host,  # on this machine: a container's published port
        port=reach[1] if reach else cmd.reach_port,
        gpu_util=(_float(cmd.value(*GPU_UTIL_FLAGS)) or VLLM_DEFAULT_GPU_UTIL) if cmd.engine == "vllm" else None,
        visible_devices=visible, interpreter=interp, interpreter_source=how, command=cmd,
    )
