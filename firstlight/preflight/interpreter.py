"""Ask the server's own Python what it has installed, without importing anything heavy.

The versions come from ``importlib.metadata`` run in that interpreter (a subprocess with a timeout and the
command's environment): it reads the installed distributions' metadata files and imports neither torch nor
the engine, so it takes a Python start-up, not a CUDA initialisation. ``python -m pip --version`` tells
whether the environment can repair itself.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

TIMEOUT_S = 15.0
# One line of JSON: the interpreter's version and, per distribution asked for, its version or null.
_SCRIPT = (
    "import json, sys\n"
    "from importlib import metadata\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        out[name] = metadata.version(name)\n"
    "    except metadata.PackageNotFoundError:\n"
    "        out[name] = None\n"
    "print(json.dumps({'python': sys.version.split()[0], 'prefix': sys.prefix, 'versions': out}))\n"
)
# Distributions worth naming in the evidence (only metadata is read).
DISTRIBUTIONS = ("compressed-tensors", "vllm", "sglang", "transformers", "torch", "bitsandbytes")


@dataclass
class InterpreterInfo:
    interpreter: str
    python: str | None = None
    prefix: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    error: str | None = None


def _run(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=dict(env),
                          stdin=subprocess.DEVNULL)


def probe_interpreter(interpreter: str, env: Mapping[str, str], distributions: Sequence[str] = DISTRIBUTIONS,
                      timeout: float = TIMEOUT_S) -> InterpreterInfo:
    info = InterpreterInfo(interpreter)
    try:
        p = _run([interpreter, "-c", _SCRIPT, *distributions], env, timeout)
    except subprocess.TimeoutExpired:
        info.error = f"{interpreter} did not answer within {timeout:.0f}s"
        return info
    except OSError as e:
        info.error = f"cannot run {interpreter}: {e.strerror or e}"
        return info
    try:
        data = json.loads(p.stdout.strip().splitlines()[-1])
        info.python, info.prefix, info.versions = data["python"], data["prefix"], data["versions"]
    except (IndexError, ValueError, KeyError, TypeError):
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        info.error = f"{interpreter} exited {p.returncode}: {last[:200]}"
    return info


def pip_version(interpreter: str, env: Mapping[str, str], timeout: float = TIMEOUT_S) -> tuple[bool, str]:
    """(pip works, what ``python -m pip --version`` said)."""
    try:
        p = _run([interpreter, "-m", "pip", "--version"], env, timeout)
    except subprocess.TimeoutExpired:
        return False, f"`{interpreter} -m pip --version` did not answer within {timeout:.0f}s"
    except OSError as e:
        return False, f"cannot run {interpreter}: {e.strerror or e}"
    text = (p.stdout.strip() or p.stderr.strip() or f"exit {p.returncode}").splitlines()[-1]
    return p.returncode == 0, text[:200]
