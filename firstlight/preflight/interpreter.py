"""Ask the server's own Python what it has installed, without importing anything heavy.

The versions come from ``importlib.metadata`` run in that interpreter (a subprocess with a timeout and the
command's environment): it reads the installed distributions' metadata files and imports neither torch nor
the engine, so it takes a Python start-up, not a CUDA initialisation. ``python -m pip --version`` tells
whether the environment can repair itself; the probe answers it the same way
(``importlib.util.find_spec("pip")`` and pip's installed version), without importing pip's command line,
which alone takes 0.3 s on a quiet machine and 2 s on a busy one: more than the whole preflight's budget.
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
    "import importlib.util\n"
    "from importlib import metadata\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        out[name] = metadata.version(name)\n"
    "    except metadata.PackageNotFoundError:\n"
    "        out[name] = None\n"
    "spec = importlib.util.find_spec('pip')\n"
    "pip = spec.origin if spec else None\n"
    "print(json.dumps({'python': sys.version.split()[0], 'prefix': sys.prefix, 'versions': out, 'pip': pip}))\n"
)
# Distributions worth naming in the evidence (only metadata is read).
DISTRIBUTIONS = ("compressed-tensors", "vllm", "sglang", "transformers", "torch", "bitsandbytes", "pip")


@dataclass
class InterpreterInfo:
    interpreter: str
    python: str | None = None
    prefix: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    pip: str | None = None  # where ``import pip`` would load from; None: no pip
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
        info.python, info.prefix, info.versions, info.pip = (data["python"], data["prefix"], data["versions"],
                                                              data["pip"])
    except (IndexError, ValueError, KeyError, TypeError):
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        info.error = f"{interpreter} exited {p.returncode}: {last[:200]}"
    return info
