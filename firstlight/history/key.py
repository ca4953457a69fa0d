"""What identifies a deployment in the history: the engine, the model, the parallelism, the quantization, the GPU
count and the flags that change the start, read from the launch command by the one command reader
(``firstlight.engines.read_command``). Where the server listens (its port and host flags, a container's published
port, the wrappers around it) is not part of it: the same server on another port is the same deployment.

``hash`` is stable across processes and machines for the same fields. Keys of schema 1 hashed the whole masked
command (port included): :func:`legacy_hash` computes those, for the migration (``firstlight.history.db``).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from firstlight.engines import ServerCommand, read_command
from firstlight.redact import Redactor


@dataclass(frozen=True)
class DeploymentKey:
    """A deployment: ``command`` is the launch command as given (secrets masked), for display only; what is
    hashed is the rest."""

    engine: str | None
    model: str | None
    command: str | None = None
    gpu_count: int | None = None
    parallelism: str | None = None  # "tp=2 pp=1 dp=1 nnodes=1", the parts the command says
    quantization: str | None = None
    start_flags: str | None = None  # the server's arguments without its port and host (secrets masked)

    @classmethod
    def create(cls, engine: str | None, model: str | None, command: Sequence[str] | str | None = None,
               gpu_count: int | None = None, redactor: Redactor | None = None,
               server: ServerCommand | None = None) -> DeploymentKey:
        """``server``: the command as the run already read it (by ``engine``'s flags); else it is read here."""
        r = redactor or Redactor()
        argv: Sequence[str] | None = command if not isinstance(command, str) else None
        if isinstance(command, str):
            try:
                argv = shlex.split(command)
            except ValueError:  # unbalanced quotes: mask what the text patterns can see
                model = r.text(model) if model else model
                return cls(engine, model, r.text(command), gpu_count, start_flags=r.text(command))
        if argv:  # learnt first: the model's path may hold the value given to --api-key, as the command does
            r.add_from_argv(argv)
        model = r.text(model) if model else model  # a path or id may hold a token, as the command may
        if not argv:
            return cls(engine, model, None, gpu_count)
        sc = server if server is not None else read_command(list(argv), engine=engine)
        parts = [f"{n}={v}" for n, v in (("tp", sc.tp), ("pp", sc.pp), ("dp", sc.dp), ("nnodes", sc.nnodes))
                 if v is not None]
        return cls(engine, model, shlex.join(r.argv(argv)), gpu_count, " ".join(parts) or None, sc.quantization,
                   shlex.join(r.argv(list(sc.start_flags))))

    @property
    def hash(self) -> str:
        raw = json.dumps(["v2", self.engine, self.model, self.gpu_count, self.parallelism, self.quantization,
                          self.start_flags], separators=(",", ":"))
        return hashlib.sha256(raw.encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        return {"hash": self.hash, **asdict(self)}


def legacy_hash(engine: str | None, model: str | None, command: str | None, gpu_count: int | None) -> str:
    """The deployment hash of schema 1 (the masked command, port included)."""
    raw = json.dumps([engine, model, command, gpu_count], separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def key_hash(deployment: DeploymentKey | str) -> str:
    return deployment.hash if isinstance(deployment, DeploymentKey) else deployment
