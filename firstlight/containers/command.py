"""A ``docker run`` / ``podman run`` command line, read as the runtime reads it: its options, the image, and the
command the container runs (the engine's, for the engine, the port and the model).

Only what firstlight needs is understood: ``--name``, ``--cidfile``, ``-d``, ``--rm``, ``-p``/``--publish``,
``--network host``. Every other option is skipped with its value: the options that take none are the command
reader's one list (``firstlight.engines.command.CONTAINER_SWITCHES``), so the image is the first word that is
neither an option nor an option's value, here as where the reader finds the server's command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from firstlight.containers.runtime import runtime_of
from firstlight.engines.command import is_container_switch


@dataclass(frozen=True)
class RunCommand:
    """``RUNTIME [global options] run|container run [options] IMAGE [COMMAND...]``."""

    argv: tuple[str, ...]
    runtime: str  # docker or podman
    run_at: int  # index of "run" in argv
    image_at: int  # index of the image in argv
    name: str | None = None
    cidfile: Path | None = None
    detach: bool = False
    remove: bool = False
    network_host: bool = False
    publish: tuple[tuple[int, int], ...] = field(default=())  # (host port, container port), TCP

    @property
    def image(self) -> str:
        return self.argv[self.image_at]

    @property
    def inner(self) -> list[str]:
        """The command the container runs, as written after the image (empty: the image's own CMD)."""
        return list(self.argv[self.image_at + 1:])

    def host_port(self, container_port: int) -> int | None:
        """Where the container's port is reached from this machine: itself on the host's network, else the
        host port ``-p`` publishes it on; None when it is not reachable."""
        if self.network_host:
            return container_port
        for host, inside in self.publish:
            if inside == container_port:
                return host
        return None

    def with_cidfile(self, path: Path) -> RunCommand:
        """The same command with ``--cidfile PATH`` added after ``run``: the runtime writes the container's id
        there, which is how firstlight finds the container this command starts."""
        argv = [*self.argv[: self.run_at + 1], "--cidfile", str(path), *self.argv[self.run_at + 1:]]
        return parse_run(argv) or self


def _value_of(tok: str, following: str | None) -> tuple[str | None, int]:
    """An option's value and how many words it took (1: ``--opt=V``, ``-pV``; 2: ``--opt V``)."""
    if tok.startswith("--"):
        if "=" in tok:
            return tok.split("=", 1)[1], 1
        return following, 2
    if len(tok) > 2:
        return tok[2:], 1
    return following, 2


def _publish(value: str) -> tuple[int, int] | None:
    """``-p`` specs with a host port: ``8080:8000``, ``127.0.0.1:8080:8000``, ``8080:8000/tcp``."""
    spec, _, proto = value.partition("/")
    if proto not in ("", "tcp"):
        return None
    parts = spec.split(":")  # the host's port and the container's are the last two, whatever the address ([::1])
    if len(parts) < 2:
        return None
    host, inside = parts[-2:]
    if host.isdigit() and inside.isdigit():
        return int(host), int(inside)
    return None


def parse_run(argv: Sequence[str]) -> RunCommand | None:
    """The ``run`` command line of docker or podman; None for any other command (or one without an image)."""
    argv = list(argv)
    if not argv:
        return None
    runtime = runtime_of(argv[0])
    if runtime is None:
        return None
    i = 1
    while i < len(argv) and argv[i].startswith("-"):  # global options: `podman --log-level debug run`
        tok = argv[i]
        i += 1 if "=" in tok or tok in ("--debug", "-D", "--help", "--version") else 2
    if i < len(argv) and argv[i] == "container":
        i += 1
    if i >= len(argv) or argv[i] != "run":
        return None
    run_at = i
    i += 1
    name = cidfile = None
    detach = remove = network_host = False
    publish: list[tuple[int, int]] = []
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            i += 1
            break
        if not tok.startswith("-") or tok == "-":
            break
        flag = tok.partition("=")[0]
        if is_container_switch(tok):  # `--rm`, `--detach=false`, `-dit` (a `--flag=false` is one word either way)
            on = not tok.endswith("=false")
            if flag == "--detach" or (not tok.startswith("--") and "d" in tok):
                detach = on
            if flag == "--rm":
                remove = on
            i += 1
            continue
        value, used = _value_of(tok, argv[i + 1] if i + 1 < len(argv) else None)
        if value is None:
            return None
        if flag == "--name":
            name = value
        elif flag == "--cidfile":
            cidfile = Path(value)
        elif flag in ("--network", "--net"):
            network_host = value == "host"
        elif flag == "--publish" or flag.startswith("-p"):  # `-p SPEC`, `-pSPEC` (no long option starts `-p`)
            found = _publish(value)
            if found is not None:
                publish.append(found)
        i += used
    if i >= len(argv):
        return None
    return RunCommand(tuple(argv), runtime, run_at, i, name, cidfile, detach, remove, network_host, tuple(publish))
