"""The container runtime's CLI (``docker`` or ``podman``): ``inspect``, ``stop`` and the ``logs`` command line.

Every call has a timeout (a runtime whose daemon hangs must not hang the watch) and fails as
:class:`RuntimeFailure` with the runtime's own last line of stderr. ``inspect``'s JSON is read into a
:class:`Container`: the fields Docker and podman share (``State.Pid``, ``State.OOMKilled``, ``State.ExitCode``,
``State.Health.Status``, ``LogPath``, ``HostConfig.LogConfig.Type``), the same in both since Docker's API 1.2x
and podman 1.x.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firstlight.deaths import signal_name
from firstlight.errors import FirstlightError
from firstlight.framing import parse_rfc3339
from firstlight.wire.content import clean_text

RUNTIMES = ("docker", "podman")
INSPECT_TIMEOUT_S = 30.0  # a loaded machine and a busy daemon: seconds, never for ever
STOP_EXTRA_S = 30.0  # the runtime's own stop takes its timeout, then its SIGKILL and cleanup on top


class RuntimeFailure(FirstlightError):
    """The runtime could not answer (not installed, its daemon down, no such container, a timeout)."""


class ContainerGone(RuntimeFailure):
    """The runtime answered that it has no such container (removed by ``--rm`` or ``rm -f``, or never made): an
    answer, unlike a daemon that is down or slow."""


# How docker ("No such container: X", "No such object: X") and podman ("no such container X", "no container
# with name or ID X found") say a container does not exist.
_NO_SUCH = re.compile(r"no such (?:container|object)|no container with (?:name or )?id", re.I)


@dataclass(frozen=True)
class Container:
    """What ``inspect`` says about one container."""

    id: str
    name: str
    status: str  # created, running, paused, restarting, exited, dead (Docker); podman adds configured, stopped
    running: bool
    pid: int | None  # the init process, as a host PID; None when it does not run
    exit_code: int | None  # State.ExitCode once it ran and stopped
    oom_killed: bool
    health: str | None  # starting, healthy, unhealthy; None without a health check
    started_at: str | None  # RFC 3339, as the runtime wrote it
    log_path: str | None
    log_driver: str | None
    image: str | None
    command: tuple[str, ...] = ()  # entrypoint + cmd: what the container runs (the engine's command line)
    network_mode: str | None = None
    ports: Mapping[int, int] = field(default_factory=dict)  # container TCP port -> host port
    cgroup: str | None = None  # State.CgroupPath (podman), relative to the controllers' mounts
    monitor_pid: int | None = None  # State.ConmonPid (podman): the monitor that holds its published ports
    restart_policy: str = ""  # HostConfig.RestartPolicy.Name: no (""), always, unless-stopped, on-failure
    max_retries: int = 0  # its MaximumRetryCount (on-failure; 0: no limit)
    restart_count: int = 0  # RestartCount: restarts the policy has made so far
    # State.FinishedAt: when the last start ended; while a restart runs, the earlier start's end (both runtimes
    # keep it, and reset ExitCode to 0)
    finished_at: str | None = None

    @classmethod
    def from_inspect(cls, data: Mapping[str, Any]) -> Container:
        state = data.get("State") or {}
        pid = state.get("Pid")
        running = bool(state.get("Running"))
        health = (state.get("Health") or state.get("Healthcheck") or {}).get("Status") or None
        started = state.get("StartedAt") or None
        if isinstance(started, str) and started.startswith("0001-01-01"):
            started = None  # never started
        finished = state.get("FinishedAt") or None
        if not isinstance(finished, str) or finished.startswith("0001-01-01"):
            finished = None  # never ended
        host = data.get("HostConfig") or {}
        config = data.get("Config") or {}
        command = [*_words(config.get("Entrypoint")), *_words(config.get("Cmd"))]
        ended = state.get("Status") in ("exited", "stopped", "dead") or (not running and started is not None)
        # every word the runtime wrote is printed (the start line, evidence, --json): made printable first
        return cls(
            id=_text(data.get("Id")), name=_text(data.get("Name")).lstrip("/"),
            status=_text(state.get("Status")), running=running,
            pid=int(pid) if isinstance(pid, int) and pid > 0 and running else None,
            exit_code=int(state["ExitCode"]) if ended and isinstance(state.get("ExitCode"), int) else None,
            oom_killed=bool(state.get("OOMKilled")), health=_text(health) or None,
            started_at=started, log_path=data.get("LogPath") or (host.get("LogConfig") or {}).get("Path") or None,
            log_driver=_text((host.get("LogConfig") or {}).get("Type")) or None,
            image=_text(data.get("ImageName") or config.get("Image")) or None, command=tuple(command),
            network_mode=_text(host.get("NetworkMode")) or None, ports=_ports(data),
            cgroup=state.get("CgroupPath") or None,
            monitor_pid=state["ConmonPid"] if isinstance(state.get("ConmonPid"), int) and state["ConmonPid"] > 0
            else None,
            restart_policy=_text((host.get("RestartPolicy") or {}).get("Name")),
            max_retries=_count((host.get("RestartPolicy") or {}).get("MaximumRetryCount")),
            restart_count=_count(data.get("RestartCount")), finished_at=finished)

    def restart_due(self) -> bool:
        """Will the runtime start it again by its restart policy? Restarting now, or stopped with a policy that
        restarts this exit and retries left (Docker's and podman's rules; ``on-failure``: a non-zero exit)."""
        if self.status == "restarting":
            return True
        if self.running or self.exit_code is None:
            return False
        if self.restart_policy in ("always", "unless-stopped"):
            return True
        return (self.restart_policy == "on-failure" and self.exit_code != 0
                and (self.max_retries == 0 or self.restart_count < self.max_retries))

    @property
    def short_id(self) -> str:
        return self.id[:12]

    def ended(self) -> str:
        """How it ended, from the runtime's own record: ``exited with code 1``, ``killed by SIGKILL (exit
        code 137)``, ``OOM-killed (State.OOMKilled)``."""
        if self.exit_code is None:
            return f"status {self.status or 'unknown'}"
        how = f"exited with code {self.exit_code}"
        if self.exit_code > 128:  # the runtime's 128 + N: its init process died of signal N
            how = f"killed by {signal_name(self.exit_code - 128)} (exit code {self.exit_code})"
        return how + ("; State.OOMKilled true" if self.oom_killed else "")

    def popen_exit_code(self) -> int | None:
        """The exit in Popen's convention (``-N``: died of signal N), as firstlight's samplers report it."""
        if self.exit_code is None:
            return None
        if 128 < self.exit_code < 128 + 65:
            return -(self.exit_code - 128)
        return self.exit_code


def _text(value: Any) -> str:
    """A word of the runtime's inspect output, as it is printed: escapes, controls and bidi marks out, bounded."""
    return clean_text(str(value), 256) if value else ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _words(value: Any) -> list[str]:
    """Entrypoint or Cmd: a list, a string (podman writes ``"Entrypoint": ""`` for none), or null."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, Sequence):
        return [str(v) for v in value]
    return []


def _ports(data: Mapping[str, Any]) -> dict[int, int]:
    """Published TCP ports: NetworkSettings.Ports (a running container), else HostConfig.PortBindings."""
    out: dict[int, int] = {}
    network, host = data.get("NetworkSettings") or {}, data.get("HostConfig") or {}
    for source in (network.get("Ports"), host.get("PortBindings")):
        if not isinstance(source, Mapping):
            continue
        for key, bindings in source.items():
            port, _, proto = str(key).partition("/")
            if proto not in ("", "tcp") or not port.isdigit() or not bindings:
                continue
            for b in bindings:
                host_port = str((b or {}).get("HostPort") or "")
                if host_port.isdigit() and int(port) not in out:
                    out[int(port)] = int(host_port)
    return out


class Runtime:
    """One runtime's CLI: ``docker`` or ``podman`` (``binary``: its path, else the name on PATH)."""

    def __init__(self, name: str, binary: str | None = None, timeout: float = INSPECT_TIMEOUT_S) -> None:
        if name not in RUNTIMES:
            raise ValueError(f"unknown container runtime {name!r} (docker or podman)")
        self.name = name
        self.binary = binary or shutil.which(name) or name
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Runtime({self.name!r})"

    def _run(self, args: Sequence[str], timeout: float) -> str:
        verb = " ".join(args[:2]) if args[0] == "container" else args[0]  # `podman container inspect: ...`
        try:
            done = subprocess.run([self.binary, *args], stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout, check=False)
        except FileNotFoundError:
            raise RuntimeFailure(f"{self.name}: not found on PATH") from None
        except subprocess.TimeoutExpired:
            raise RuntimeFailure(f"{self.name} {verb}: no answer within {timeout:g}s") from None
        except OSError as e:
            raise RuntimeFailure(f"{self.name}: cannot run it ({e.strerror or e})") from None
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = err[-1] if err else f"exit status {done.returncode}"
            gone = args[:2] == ["container", "inspect"] and _NO_SUCH.search(why) is not None
            raise (ContainerGone if gone else RuntimeFailure)(f"{self.name} {verb}: {why[:300]}")
        return done.stdout.decode("utf-8", "replace")

    def inspect(self, ref: str) -> Container:
        """The container named or numbered ``ref`` (a name, an id or its prefix)."""
        if not ref or ref.startswith("-"):
            raise RuntimeFailure(f"not a container name or id: {ref!r}")
        out = self._run(["container", "inspect", "--", ref], self.timeout)
        try:
            data = json.loads(out)
        except json.JSONDecodeError:
            raise RuntimeFailure(f"{self.name} inspect {ref}: not JSON") from None
        if not isinstance(data, list) or not data or not isinstance(data[0], Mapping):
            raise ContainerGone(f"{self.name} inspect {ref}: no such container")
        return Container.from_inspect(data[0])

    def stop(self, ref: str, grace: float) -> str:
        """``RUNTIME stop -t GRACE``: the runtime's SIGTERM (or the image's StopSignal), SIGKILL after grace
        (``-t`` is ``--time`` to podman and ``--timeout`` to Docker, which deprecates ``--time``)."""
        seconds = max(0, round(grace))
        self._run(["stop", "-t", str(seconds), ref], grace + STOP_EXTRA_S)
        return f"{self.name} stop -t {seconds} {ref[:12]}"

    def died(self, ref: str, since: str, until: str) -> int | None:
        """The exit code of the container's last death between ``since`` and ``until`` (RFC 3339), as the
        runtime's event stream recorded it (podman's ``died`` event carries ``ContainerExitCode``, Docker's
        ``die`` its ``exitCode`` attribute); None when no such event is on record."""
        if self.name == "podman":  # its --until drops every event before it too (podman 4.3, file events)
            args = ["events", "--stream=false", "--filter", f"container={ref}", "--filter", "event=died",
                    "--since", since, "--format", "json"]
        else:  # with --until, Docker's events end instead of following
            args = ["events", "--filter", f"container={ref}", "--filter", "event=die", "--since", since,
                    "--until", until, "--format", "{{json .}}"]
        end = parse_rfc3339(until)
        code = None
        for line in self._run(args, self.timeout).splitlines():
            with contextlib.suppress(json.JSONDecodeError, TypeError, ValueError, AttributeError):
                event = json.loads(line)
                if "ContainerExitCode" in event:  # podman
                    value, at = event["ContainerExitCode"], parse_rfc3339(str(event.get("Time")))
                else:
                    value = ((event.get("Actor") or {}).get("Attributes") or {}).get("exitCode")
                    at = int(event["timeNano"]) / 1e9 if "timeNano" in event else float(event.get("time"))
                if value is not None and not isinstance(value, bool) and (end is None or at is None or at < end):
                    code = int(value)
        return code

    def logs_argv(self, ref: str, since: str | None = None) -> list[str]:
        """``RUNTIME logs --follow --timestamps``: the container's output as plain lines (the runtime takes its
        own log framing off), stdout to stdout and stderr to stderr, each after the time the runtime read it
        (peeled as the ``timestamps`` framing: it tells a start's lines from the next start's)."""
        argv = [self.binary, "logs", "--follow", "--timestamps"]
        if since:
            argv += ["--since", since]
        return [*argv, ref]


def runtime_of(argv0: str) -> str | None:
    """``docker`` or ``podman`` when ``argv0`` is that CLI (a path or a name), else None."""
    name = Path(argv0).name
    return name if name in RUNTIMES else None


def read_cidfile(path: Path) -> str | None:
    """The container id a ``--cidfile`` holds once the runtime has written it (None before)."""
    with contextlib.suppress(OSError):
        text = path.read_text().strip()
        if text:
            return text
    return None
