"""The one reader of a server's launch command: what it starts (engine, model, host and port, parallelism,
quantization, llama.cpp's RPC workers), read without running it. Preflight, the live watch (weights, URL, history
key), the engine detection and the API all read a command through :func:`parse_command` (``read_command`` in
``firstlight.engines``), so they agree on every launch form.

The wrappers around the server are taken off first, outermost first and nested in any order: ``env A=1``,
``A=1 cmd``, ``exec``/``nohup``/``nice``/``sudo``/``taskset``/``numactl``/``stdbuf``, ``uv run``/``uvx``/``conda
run``, ``torchrun`` (and ``python -m torch.distributed.run``), ``docker``/``podman``/``nerdctl run`` (the image,
its ``-e``, ``-v``, ``-p``, ``--network host`` and ``--entrypoint``; the server's arguments follow the image), a
shell (``bash -c '...'``: the part of the script that names an engine, else its last command) and a shell script
file (its line that names an engine, ``"$@"`` replaced by the arguments). Then ``python [-u] -m MODULE`` or
``python script.py``, and the engine's own flags (``--flag V`` and ``--flag=V``; the last one wins, as in
argparse). Each engine's flags are data in its profile (``EngineProfile.flags``, ``port_flags``, ``host_flags``).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from firstlight.files import open_regular

from .profile import CommandFlags, EngineProfile

GENERIC_FLAGS = CommandFlags()  # the generic model flags are also the fallback of every engine
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)?)?(?:\.exe)?$")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
_CONTAINERS = frozenset({"docker", "podman", "nerdctl"})
_MAX_WRAPPERS = 16  # a command wrapped deeper than this is read as it stands
_SCRIPT_BYTES = 64 * 1024
_DETECT_CHARS = 2048

# docker/podman run options that take no value (every other option takes one, unless written --opt=V): the one
# list, read by this reader and by firstlight.containers' reader of the ``run`` it launches. (podman's
# ``--systemd`` takes one: true, false or always.)
CONTAINER_SWITCHES = frozenset({
    "--detach", "--interactive", "--tty", "--rm", "--privileged", "--init", "--publish-all", "--read-only",
    "--no-healthcheck", "--oom-kill-disable", "--sig-proxy", "--quiet", "--replace", "--tls-verify", "--help",
    "--disable-content-trust", "--rmi", "--http-proxy", "--no-hosts", "--no-hostname", "--env-host",
    "--read-only-tmpfs", "--passwd", "--rootfs", "--use-cgroupns", "--pull-always",
})
CONTAINER_SHORT_SWITCHES = frozenset("ditPq")  # -d -i -t -P -q, and their bundles: -it, -dit
# uv run / uvx options that take a value (the rest are switches).
_UV_VALUE = frozenset({
    "--with", "--with-editable", "--with-requirements", "--python", "-p", "--project", "--directory", "--package",
    "--env-file", "--extra", "--group", "--only-group", "--no-group", "--index", "--index-url",
    "--extra-index-url", "--default-index", "--find-links", "-f", "--from", "--cache-dir", "--config-file",
    "--script", "--exclude-newer", "--index-strategy", "--keyring-provider", "--resolution",
    "--prerelease", "--link-mode", "--python-platform", "--refresh-package", "--reinstall-package",
    "--upgrade-package", "-P", "--color", "--allow-insecure-host",
})
# torchrun options that take no value.
_TORCHRUN_BOOL = frozenset({"--standalone", "-m", "--module", "--no-python", "--no_python", "--run-path",
                            "--run_path"})
_PYTHON_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs"})


@dataclass(frozen=True)
class ServerCommand:
    """A launch command as read: the server's own command line and what it says. ``None``: not said (the
    engine's default port and host are filled in; parallelism and quantization are left unsaid)."""

    argv: tuple[str, ...]  # as given
    server: tuple[str, ...]  # the server's own command line, the wrappers taken off
    wrappers: tuple[str, ...] = ()  # what was taken off, outermost first: "env", "uv run", "docker run", "bash -c"
    # the environment the server will see, and what the command itself sets (env A=1, docker -e A=1); never in
    # the repr: it holds tokens
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    env_set: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    engine: str | None = None
    named_by_program: bool = False  # the engine is the program itself, not a word further on
    module: str | None = None  # python -m MODULE
    image: str | None = None  # the container image, when the server runs in one
    model: str | None = None  # as written in the command (a container path inside the container)
    model_local: str | None = None  # the same on this machine: a container path through its bind mount
    host: str | None = None
    port: int | None = None  # where the server listens (inside its container)
    reach_host: str | None = None  # where this machine reaches it: a container's published address
    reach_port: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    nnodes: int | None = None
    quantization: str | None = None
    rpc: tuple[str, ...] = ()  # llama.cpp --rpc HOST:PORT workers
    node_rank: int | None = None  # --node-rank of a multi-node start
    # "worker": a member of a multi-node start that serves no API of its own (llama.cpp's RPC server, an SGLang
    # node of rank >= 1, a vLLM --headless node): READY when its port is seen listening; "server" otherwise
    role: str = "server"
    # a worker that serves no port (vLLM --headless): the hosts of the head node it joins, each flag's value
    head: tuple[str, ...] = ()
    # the server's arguments without where it listens (its port and host flags): what changes the start, for
    # the history's deployment key (the same server on another port is the same deployment)
    start_flags: tuple[str, ...] = ()
    # what the wrappers said, kept so that the same reading can be done again under another engine's flags
    # (an engine learnt while the server starts) without taking the wrappers off again
    program: str = field(default="", repr=False)
    args: tuple[str, ...] = field(default=(), repr=False)
    mounts: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    publish: tuple[tuple[str | None, int, int], ...] = field(default=(), repr=False)
    host_network: bool = field(default=False, repr=False)
    launcher_nnodes: int | None = field(default=None, repr=False)

    def for_profile(self, profile: EngineProfile) -> ServerCommand:
        """The same command read by ``profile``'s flags: an engine learnt while the server starts reads the
        flags its own way, from the words already unwrapped (no second parse of the command)."""
        if profile.name == (self.engine or "generic"):
            return self
        return _read(self.argv, self.server, self.wrappers, self.env, self.env_set, self.module, self.image,
                     self.program, list(self.args), self.mounts, self.publish, self.host_network,
                     self.launcher_nnodes, profile.name, self.named_by_program, profile)

    @property
    def in_container(self) -> bool:
        return self.image is not None

    def value(self, *flags: str) -> str | None:
        """The value of the last of ``flags`` in the server's command line (``--flag V`` / ``--flag=V``)."""
        return flag_value(self.server, flags)

    @property
    def url(self) -> str | None:
        """Where to reach the server from this machine (a wildcard bind on 127.0.0.1); ``None`` when the port
        cannot be told (port 0 would silently become port 80)."""
        if not self.reach_port:
            return None
        host = self.reach_host or "127.0.0.1"
        if host in ("0.0.0.0", "::", "[::]", ""):
            host = "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.reach_port}"


def flag_value(tokens: Sequence[str], flags: Sequence[str]) -> str | None:
    """The value of the last of ``flags`` in a command line (``--flag V`` or ``--flag=V``)."""
    names = set(flags)
    value: str | None = None
    for i, tok in enumerate(tokens):
        if tok in names:
            if i + 1 < len(tokens):
                value = tokens[i + 1]
        elif tok.startswith("--") and "=" in tok:
            name, _, given = tok.partition("=")
            if name in names:
                value = given
    return value


def drop_flags(tokens: Sequence[str], flags: Sequence[str]) -> list[str]:
    """``tokens`` without ``flags`` and their values (``--flag V`` and ``--flag=V``)."""
    names, out, skip = set(flags), [], False
    for tok in tokens:
        if skip:
            skip = False
        elif tok in names:
            skip = True
        elif not (tok.startswith("--") and "=" in tok and tok.partition("=")[0] in names):
            out.append(tok)
    return out


def split_words(argv: Sequence[str] | str) -> list[str]:
    """A command as words: a list as it is, one shell string split (an unbalanced quote: split on spaces)."""
    if not isinstance(argv, str):
        return [str(a) for a in argv]
    try:
        return shlex.split(argv)
    except ValueError:
        return argv.split()


# -- detection -----------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _compiled(patterns: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """One regex per engine: an alternation matches where its first alternative does (the stale-server check
    reads every process's command line)."""
    return tuple((name, re.compile("|".join(f"(?:{p})" for p in pats))) for name, pats in patterns if pats)


def _detect(text: str, profiles: Sequence[EngineProfile]) -> str | None:
    """The engine whose command pattern matches first in ``text`` (ties: the first profile)."""
    text = text[:_DETECT_CHARS]  # a server names itself early; a long argument list is no server's
    best: tuple[int, int, str] | None = None
    for order, (name, regex) in enumerate(_compiled(tuple((p.name, p.command_patterns) for p in profiles))):
        m = regex.search(text)
        if m is not None and (best is None or (m.start(), order) < best[:2]):
            best = (m.start(), order, name)
    return best[2] if best else None


def _flatten(tokens: Sequence[str]) -> str:
    """The words, with shell strings inside one argument opened (``bash -c "vllm serve m"``), joined."""
    out: list[str] = []
    for tok in tokens:
        out.extend(split_words(tok) if any(c.isspace() for c in tok) else [tok])
    return " ".join(out)


# -- taking the wrappers off ---------------------------------------------------------------------------------
@dataclass
class _Unwrapped:
    tokens: list[str]
    env: dict[str, str]
    env_set: dict[str, str] = field(default_factory=dict)
    wrappers: list[str] = field(default_factory=list)
    image: str | None = None
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (host, container)
    publish: list[tuple[str | None, int, int]] = field(default_factory=list)  # (host ip, host port, container)
    host_network: bool = False
    nnodes: int | None = None


def _assign(u: _Unwrapped, word: str) -> None:
    name, value = word.split("=", 1)
    u.env[name] = value
    u.env_set[name] = value


def _take_env(u: _Unwrapped, rest: list[str]) -> list[str]:
    """``env [-i] [-u NAME] [A=1 ...] cmd``."""
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag in ("-u", "--unset") and rest:
            name = rest.pop(0)
            u.env.pop(name, None)
            u.env_set.pop(name, None)
        elif flag.startswith("--unset="):
            u.env.pop(flag.split("=", 1)[1], None)
            u.env_set.pop(flag.split("=", 1)[1], None)
        elif flag in ("-i", "--ignore-environment", "-"):
            u.env = dict(u.env_set)
        elif flag in ("-C", "--chdir", "-S", "--split-string") and rest:
            value = rest.pop(0)
            if flag in ("-S", "--split-string"):
                rest = split_words(value) + rest
        elif flag == "--":
            break
    return rest


def _skip_options(rest: list[str], takes_value: frozenset[str]) -> list[str]:
    """Drop a launcher's options up to its command (``--`` ends them); those in ``takes_value`` take the next
    word (unless written ``--opt=V``)."""
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt == "--":
            break
        if opt in takes_value and rest:
            rest.pop(0)
    return rest


def _take_uv(rest: list[str]) -> list[str]:
    """``uv run [opts] CMD`` or ``uv run [opts] -m MODULE ARGS`` (python -m MODULE in uv's environment)."""
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt == "--":
            break
        if opt in ("-m", "--module") and rest:
            return ["python", "-m", *rest]
        if opt in _UV_VALUE and rest:
            rest.pop(0)
    return rest


def _int(text: str | None) -> int | None:
    """A count: ``2``, or torchrun's ``1:4`` range (its upper end)."""
    if text is None:
        return None
    text = text.strip().split(":")[-1]
    return int(text) if text.isdigit() and int(text) > 0 else None


def _take_torchrun(u: _Unwrapped, rest: list[str]) -> list[str]:
    """``torchrun [opts] (-m MODULE | script.py | --no-python PROGRAM) args``: the server as python runs it."""
    module = no_python = False
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        name, eq, value = opt.partition("=")
        if opt == "--":
            break
        if name in ("-m", "--module"):
            module = True
        elif name in ("--no-python", "--no_python"):
            no_python = True
        elif not eq and name not in _TORCHRUN_BOOL and rest:
            value = rest.pop(0)
        if name in ("--nnodes",):
            u.nnodes = _int(value)
    if not rest or no_python:
        return rest
    return ["python", "-m", *rest] if module else ["python", *rest]


def _mount(spec: str) -> tuple[str, str] | None:
    """``-v HOST:CONTAINER[:opts]`` or ``--mount type=bind,source=H,target=C``; named volumes are not paths."""
    if "=" in spec:
        parts = dict(p.split("=", 1) for p in spec.split(",") if "=" in p)
        src = parts.get("source") or parts.get("src")
        dst = parts.get("target") or parts.get("destination") or parts.get("dst")
    else:
        bits = spec.split(":")
        src, dst = (bits[0], bits[1]) if len(bits) >= 2 else (None, None)
    if not src or not dst or not src.startswith(("/", ".", "~")):
        return None
    return os.path.expanduser(src), dst


def _publish(spec: str) -> tuple[str | None, int, int] | None:
    """``-p [IP:]HOST:CONTAINER[/proto]``; a container port alone (a random host port) tells nothing."""
    spec = spec.split("/", 1)[0]
    ip: str | None = None
    if spec.startswith("["):  # [::1]:8080:80
        ip, _, spec = spec[1:].partition("]:")
    bits = spec.split(":")
    if len(bits) == 3:
        ip, bits = bits[0] or None, bits[1:]
    if len(bits) != 2 or not (bits[0].isdigit() and bits[1].isdigit()):
        return None
    return ip, int(bits[0]), int(bits[1])


def _take_container(u: _Unwrapped, rest: list[str], base_env: Mapping[str, str],
                    profiles: Sequence[EngineProfile]) -> list[str]:
    """``docker run [opts] IMAGE [ARGS]``: the container's own environment, mounts and published ports; the
    server is the image's entrypoint given ARGS (an engine's ``images``), or ARGS as a command."""
    u.env = {}  # a container starts from its image's environment, not this one's
    u.env_set = {}
    entrypoint: list[str] = []
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt == "--":
            break
        name, eq, value = opt.partition("=")
        if not eq:
            if is_container_switch(name):
                continue  # --rm, -it, -dit
            if not rest:
                break
            value = rest.pop(0)
        if name in ("-e", "--env"):
            if "=" in value:
                _assign(u, value)
            elif value in base_env:  # -e NAME passes this environment's value
                _assign(u, f"{value}={base_env[value]}")
        elif name in ("-v", "--volume", "--mount"):
            m = _mount(value)
            if m is not None:
                u.mounts.append(m)
        elif name in ("-p", "--publish"):
            p = _publish(value)
            if p is not None:
                u.publish.append(p)
        elif name in ("--network", "--net"):
            u.host_network = value == "host"
        elif name == "--entrypoint":
            entrypoint = split_words(value)
    if not rest:
        return []
    u.image = rest.pop(0)
    if entrypoint:
        return entrypoint + rest
    for image in (image for p in profiles for image in p.images):
        if re.search(image.pattern, u.image):
            return [*image.entrypoint, *(rest or image.cmd)]
    return rest


def is_container_switch(option: str) -> bool:
    """A ``docker run``/``podman run`` option that takes no value: ``--rm``, ``--detach=false``, ``-d``, ``-dit``."""
    name = option.partition("=")[0]
    if name.startswith("--"):
        return name in CONTAINER_SWITCHES
    return len(name) > 1 and name.startswith("-") and all(c in CONTAINER_SHORT_SWITCHES for c in name[1:])


def _segments(line: str) -> list[list[str]]:
    """The simple commands of a line of shell: split at ``;``, ``&&``, ``||``, ``|`` and ``&``."""
    out: list[list[str]] = []
    if line:
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        lex.commenters = "#"
        words: list[str] = []
        try:
            for w in lex:
                if w and set(w) <= set(";&|"):
                    out.append(words)
                    words = []
                else:
                    words.append(w)
        except ValueError:  # an unbalanced quote
            words = line.split()
        out.append(words)
    return [s for s in out if s]


def _shell_args(args: list[str]) -> tuple[str, list[str], bool]:
    """(script, its arguments, whether it is inline: ``-c``) of ``sh [opts] (-c SCRIPT [$0 ARGS] | FILE ARGS)``."""
    inline = False
    i = 0
    while i < len(args) and args[i][:1] in ("-", "+") and args[i] not in ("-", "--"):
        if not args[i].startswith("--") and "c" in args[i][1:]:
            inline = True
        i += 2 if args[i] in ("-o", "+o", "-O", "+O") else 1
    if i < len(args) and args[i] in ("-", "--"):  # bash(1): "A - is equivalent to --"
        i += 1
    tail = args[i:]
    if not tail:
        return "", [], inline
    return tail[0], tail[2:] if inline else tail[1:], inline


def _shell_script(path: str) -> str | None:
    """The text of a shell script file (a ``#!`` line naming a shell, or a ``.sh`` without one), else None."""
    try:
        with open_regular(path) as f:
            head = f.read(2)
            if head != b"#!" and not path.endswith(".sh"):
                return None  # a binary, or not a script: read no further
            text = (head + f.read(_SCRIPT_BYTES)).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    first = text.split("\n", 1)[0]
    if not first.startswith("#!"):
        return text if path.endswith(".sh") else None
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env":  # ``#!/usr/bin/env [-S] [A=1] bash [-e]``: env's program
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    shell = os.path.basename(words[0]) if words else ""
    if "\n'''exec' " in text[:512]:  # pip's sh trampoline of a Python console script: Python, not shell
        return None
    return text if shell in _SHELLS else None


def _script_command(script: str, args: list[str], profiles: Sequence[EngineProfile], inline: bool) -> list[str]:
    """The command of a script that starts the server: the one that names an engine, else (``-c`` only) the
    last one; ``"$@"`` is the script's arguments. [] when there is none."""
    lines = [line for line in script.replace("\\\n", " ").splitlines() if line.strip()]
    # only a line that names an engine as written is split into words (scripts can be long)
    named = [seg for line in lines if _detect(line, profiles) for seg in _segments(line)
             if _detect(_flatten(seg), profiles)]
    last = _segments(lines[-1]) if lines and inline else []
    seg = named[0] if named else last[-1] if last else []
    out: list[str] = []
    for w in seg:
        out.extend(args if w in ("$@", "$*", "${@}", "${*}") else [w])
    return out


def _unwrap(tokens: list[str], base_env: Mapping[str, str], profiles: Sequence[EngineProfile]) -> _Unwrapped:
    u = _Unwrapped(tokens=list(tokens), env=dict(base_env))
    rest = u.tokens
    for _ in range(_MAX_WRAPPERS):
        while rest and _ENV_ASSIGN.match(rest[0]):
            _assign(u, rest.pop(0))
        if not rest:
            break
        prog = os.path.basename(rest[0])
        if prog == "env":
            u.wrappers.append("env")
            rest = _take_env(u, rest[1:])
        elif prog in ("exec", "nohup", "time", "setsid"):
            rest = _skip_options(rest[1:], takes_value=frozenset({"-a"}))
        elif prog == "sudo":
            rest = _skip_options(rest[1:], takes_value=frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t",
                                                                  "-U", "-T"}))
        elif prog == "conda" and rest[1:2] == ["run"]:
            u.wrappers.append("conda run")
            rest = _skip_options(rest[2:], takes_value=frozenset({"-n", "--name", "-p", "--prefix", "--cwd"}))
        elif prog == "nice":
            rest = _skip_options(rest[1:], takes_value=frozenset({"-n"}))
        elif prog == "stdbuf":
            rest = _skip_options(rest[1:], takes_value=frozenset({"-i", "-o", "-e"}))
        elif prog == "taskset":
            rest = _skip_options(rest[1:], takes_value=frozenset())
            rest = rest[1:]  # the mask, or -c's list
        elif prog == "numactl":
            rest = _skip_options(rest[1:], takes_value=frozenset({"-N", "-m", "-C", "-p", "-i", "-P"}))
        elif prog == "uv" and len(rest) > 1 and rest[1] == "run":
            u.wrappers.append("uv run")
            rest = _take_uv(rest[2:])
        elif prog == "uvx" or (prog == "uv" and rest[1:3] == ["tool", "run"]):
            u.wrappers.append("uvx")
            rest = _skip_options(rest[1:] if prog == "uvx" else rest[3:], takes_value=_UV_VALUE)
        elif prog == "torchrun" or (_PYTHON.match(prog) and rest[1:2] == ["-m"]
                                    and rest[2:3] in (["torch.distributed.run"], ["torch.distributed.launch"])):
            u.wrappers.append("torchrun")
            rest = _take_torchrun(u, rest[1:] if prog == "torchrun" else rest[3:])
        elif prog in _CONTAINERS and len(rest) > 1 and rest[1] in ("run", "create", "container"):
            skip = 3 if rest[1] == "container" and rest[2:3] in (["run"], ["create"]) else 2
            if rest[1] == "container" and skip == 2:
                break
            u.wrappers.append(f"{prog} run")
            rest = _take_container(u, rest[skip:], u.env, profiles)
        elif prog in _SHELLS:
            script, args, inline = _shell_args(rest[1:])
            text = script if inline else _shell_script(script if os.sep in script else os.path.join(".", script))
            command = _script_command(text, args, profiles, inline) if text is not None else None
            if not command:
                break
            u.wrappers.append(f"{prog} -c" if inline else f"{prog} {os.path.basename(script)}")
            rest = command
        else:  # a shell script file that starts the server, unless the program is the engine itself
            is_script = os.sep in rest[0] and _detect(" ".join(rest[:3]), profiles) is None
            text = _shell_script(rest[0]) if is_script else None
            command = _script_command(text, rest[1:], profiles, False) if text is not None else None
            if not command:
                break
            u.wrappers.append(os.path.basename(rest[0]))
            rest = command
    u.tokens = rest
    return u


# -- reading the server's own command line -------------------------------------------------------------------
def _python(tokens: list[str]) -> tuple[str | None, list[str]]:
    """(module, the words after ``python [opts] -m MODULE`` or after the script); (None, tokens) otherwise."""
    if not tokens or not _PYTHON.match(os.path.basename(tokens[0])):
        return None, tokens[1:] if tokens else []
    rest = tokens[1:]
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt == "-m":
            return (rest[0], rest[1:]) if rest else (None, [])
        if opt == "-c":  # python -c CODE ARGS: ARGS are the code's
            return None, rest[1:]
        if opt in _PYTHON_VALUE and rest:
            rest.pop(0)
    return None, rest[1:]  # a script: its arguments


def _leading(words: Sequence[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        if w.startswith("-"):
            break
        out.append(w)
    return out


def _model(program: str, args: list[str], flags: CommandFlags, env: Mapping[str, str]) -> str | None:
    found = flag_value(args, flags.model)
    if found:
        return found
    if flags.model_after:
        leading = [program, *_leading(args)]
        for before, word in itertools.pairwise(leading):
            if before in flags.model_after and word not in flags.model_after:
                return word
    for name in flags.model_env:
        if env.get(name):
            return env[name]
    return flag_value(args, GENERIC_FLAGS.model) or None


_HOSTPORT_RE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?P<host>\[[^\]]*\]|[^:/]*)?(?::(?P<port>\d+))?/?$")


def _split_hostport(value: str) -> tuple[str | None, int | None]:
    m = _HOSTPORT_RE.match(value.strip())
    if m is None:
        return None, None
    return m.group("host") or None, int(m.group("port")) if m.group("port") else None


def _port(value: str | None) -> int | None:
    """A flag value: a plain port number (a "8080:80" docker publish mapping is not one)."""
    if value is None or not value.strip().isdigit():
        return None
    number = int(value)
    return number if 0 < number < 65536 else None


def _listen(args: list[str], profile: EngineProfile, env: Mapping[str, str]) -> tuple[str | None, int | None]:
    """(host, port) the server binds: the last flag, else the profile's environment variables, else the
    engine's defaults."""
    port = _port(flag_value(args, profile.port_flags))
    for name in profile.port_env:
        if port is None and name in env:
            port = _port(env[name]) if env[name].strip().isdigit() else _split_hostport(env[name])[1]
    host = flag_value(args, profile.host_flags) or None
    for name in profile.host_env:
        if host is None and env.get(name, "").strip():
            h = _split_hostport(env[name])[0]
            host = h.strip("[]") if h else None
    return host or profile.default_host, port or profile.default_port or None


def _on_host(model: str | None, mounts: list[tuple[str, str]]) -> str | None:
    """A container path through the longest bind mount that holds it (None when no mount does); a model id
    (``org/name``) as it is."""
    if model is None or not model.startswith(("/", ".", "~")):
        return model
    best: tuple[int, str] | None = None
    for src, dst in mounts:
        dst = dst.rstrip("/") or "/"
        inside = model == dst or model.startswith(dst + "/") or dst == "/"
        if inside and (best is None or len(dst) > best[0]):
            best = (len(dst), os.path.normpath(os.path.join(src, os.path.relpath(model, dst))))
    return best[1] if best else None


def parse_command(argv: Sequence[str] | str, profiles: Mapping[str, EngineProfile], *, engine: str | None = None,
                  env: Mapping[str, str] | None = None) -> ServerCommand:
    """Read a launch command (an argv list or one shell string). ``engine`` overrides the one the command names;
    ``env`` is the environment the command will be started in (default: none, only what the command sets)."""
    given = tuple(split_words(argv))
    engines = [p for n, p in profiles.items() if n != "generic"]
    u = _unwrap(list(given), dict(env or {}), engines)
    tokens = u.tokens
    module, args = _python(tokens)
    program = module or (os.path.basename(tokens[0]) if tokens else "")
    # The engine the program is: its name (python -m MODULE, a subcommand), or the container's image.
    words = ["python", "-m", module, *_leading(args)[:2]] if module else tokens[:3]
    head = " ".join(([u.image] if u.image else []) + words)
    anywhere = _detect(" ".join(([u.image] if u.image else []) + tokens), engines)
    named = _detect(head, engines) if anywhere else None  # the head is in the whole: no match there, none here
    detected = named or anywhere
    name = engine or detected
    profile = profiles.get(name or "generic") or profiles["generic"]
    return _read(given, tuple(tokens), tuple(u.wrappers), MappingProxyType(dict(u.env)), tuple(u.env_set.items()),
                 module, u.image, program, args, tuple(u.mounts), tuple(u.publish), u.host_network, u.nnodes, name,
                 named is not None, profile)


def _read(given: tuple[str, ...], server: tuple[str, ...], wrappers: tuple[str, ...], env: Mapping[str, str],
          env_set: tuple[tuple[str, str], ...], module: str | None, image: str | None, program: str,
          args: list[str], mounts: tuple[tuple[str, str], ...], publish: tuple[tuple[str | None, int, int], ...],
          host_network: bool, launcher_nnodes: int | None, name: str | None, named_by_program: bool,
          profile: EngineProfile) -> ServerCommand:
    """The server's own command line, unwrapped, read by ``profile``'s flags."""
    flags = profile.flags
    model = _model(program, args, flags, env)
    host, port = _listen(args, profile, env)
    reach_host, reach_port = host, port
    if image is not None and not host_network:
        mapped = [(ip, hp) for ip, hp, cp in publish if cp == port]
        reach_host, reach_port = mapped[0] if mapped else (None, port)
    nnodes = _int(flag_value(args, flags.nnodes)) if flags.nnodes else None
    rpc = flag_value(args, flags.rpc) if flags.rpc else None
    rank = flag_value(args, flags.node_rank) if flags.node_rank else None
    node_rank = int(rank) if rank is not None and rank.isdigit() else None  # rank 0 is the leader's
    worker = (profile.role == "worker" or any(tok in flags.worker_flags for tok in args)
              or (not flags.worker_flags and (node_rank or 0) > 0))
    heads: tuple[str, ...] = ()
    if worker and flags.head:
        said = [v for f in flags.head if (v := flag_value(args, (f,)))]
        heads = tuple(dict.fromkeys(said)) or ((flags.head_default,) if flags.head_default else ())
    return ServerCommand(
        argv=given, server=server, wrappers=wrappers, env=env, env_set=env_set, engine=name,
        named_by_program=named_by_program, module=module,
        image=image, model=model, model_local=_on_host(model, list(mounts)) if image else model,
        host=host, port=port, reach_host=reach_host, reach_port=reach_port,
        tp=_int(flag_value(args, flags.tp)) if flags.tp else None,
        pp=_int(flag_value(args, flags.pp)) if flags.pp else None,
        dp=_int(flag_value(args, flags.dp)) if flags.dp else None,
        nnodes=nnodes or launcher_nnodes,
        quantization=flag_value(args, flags.quantization) if flags.quantization else None,
        rpc=tuple(w for w in (rpc or "").split(",") if w),
        node_rank=node_rank, role="worker" if worker else "server", head=heads,
        start_flags=tuple(drop_flags(args, (*profile.port_flags, *profile.host_flags))),
        program=program, args=tuple(args), mounts=mounts, publish=publish, host_network=host_network,
        launcher_nnodes=launcher_nnodes,
    )

