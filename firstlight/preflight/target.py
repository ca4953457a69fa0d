"""What the launch command will use, read from the command line and the environment without running it:
the engine, the model path, the host and port, the tensor-parallel size, the GPUs (CUDA_VISIBLE_DEVICES),
vLLM's --gpu-memory-utilization, and the Python interpreter that will run the server (``python -m ...``,
or the shebang of a console script such as ``vllm``), so the checks read that interpreter's packages,
not firstlight's own.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from firstlight.engines import command_host, command_port, detect_from_command, get_profile
from firstlight.engines.detect import flag_value
from firstlight.files import open_regular
from firstlight.samplers.weights import model_path_from_command, resolve_model_dir

TP_FLAGS = ("--tp", "--tp-size", "--tensor-parallel-size", "-tp")
GPU_UTIL_FLAGS = ("--gpu-memory-utilization",)
VLLM_DEFAULT_GPU_UTIL = 0.9  # vllm/config/cache.py CacheConfig.gpu_memory_utilization
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass
class Target:
    """The launch command as the checks see it."""

    argv: list[str]
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

    @property
    def gpu_indices_hint(self) -> str:
        cvd = "unset" if self.visible_devices is None else ",".join(self.visible_devices) or "(empty)"
        return f"CUDA_VISIBLE_DEVICES={cvd}, TP {self.tp}"


def split_env_prefix(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """``env A=1 B=2 cmd ...`` and ``A=1 cmd ...``: the command proper and the environment it will get."""
    out_env = dict(env)
    rest = list(argv)
    if rest and os.path.basename(rest[0]) == "env":
        rest = rest[1:]
        while rest and rest[0].startswith("-"):  # env -i / -u NAME: rare; drop the flag (and -u's argument)
            flag = rest.pop(0)
            if flag in ("-u", "--unset") and rest:
                out_env.pop(rest.pop(0), None)
            elif flag in ("-i", "--ignore-environment", "-"):
                out_env = {}
    while rest and _ENV_ASSIGN.match(rest[0]):
        name, value = rest.pop(0).split("=", 1)
        out_env[name] = value
    return rest, out_env


def _positive_int(text: str | None, default: int) -> int:
    try:
        n = int(text) if text is not None else default
    except ValueError:
        return default
    return n if n > 0 else default


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


def find_interpreter(argv: Sequence[str], env: Mapping[str, str]) -> tuple[str | None, str]:
    """(interpreter, how it was found) for the command; (None, why) for a native binary."""
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
                model: str | None = None) -> Target:
    """Everything the checks need from the command (``engine``/``model`` override what the command says)."""
    argv, full_env = split_env_prefix(list(command), os.environ if env is None else env)
    engine = engine or detect_from_command(argv)
    profile = get_profile(engine or "generic")
    model = model or model_path_from_command(argv)
    model_path = resolve_model_dir(model) if model else None
    cvd = full_env.get("CUDA_VISIBLE_DEVICES")
    visible = None if cvd is None else [d.strip() for d in cvd.split(",") if d.strip()]
    interp, how = find_interpreter(argv, full_env)
    return Target(
        argv=argv, env=full_env, engine=engine, model=model, model_path=model_path,
        host=command_host(argv, profile, full_env), port=command_port(argv, profile, full_env),
        tp=_positive_int(flag_value(argv, TP_FLAGS), 1),
        gpu_util=(_float(flag_value(argv, GPU_UTIL_FLAGS)) or VLLM_DEFAULT_GPU_UTIL) if engine == "vllm" else None,
        visible_devices=visible, interpreter=interp, interpreter_source=how,
    )
