"""Watching a container start: its init process's tree, its log, and how it ended, as the runtime records it.

* ``watch --container NAME|ID``: the container exists (running, or starting); its init PID (``State.Pid``) is
  the root of the sampled tree, its log is ``RUNTIME logs --follow --since STARTED_AT``.
* ``up -- docker run ...`` / ``up -- podman run ...``: firstlight launches the CLI with a ``--cidfile`` it adds
  (or finds the container by its ``--name``), then watches the container, not the CLI: the CLI's own output is
  the container's when it runs attached, ``logs --follow`` when it was detached (``-d``). At the end the
  container is stopped with ``RUNTIME stop -t GRACE``, then the CLI.

How it ended comes from the runtime: ``State.ExitCode`` (128 + N: its init died of signal N) and
``State.OOMKilled``, beside the kernel's own traces for the init PID (:class:`firstlight.samplers.oom.OomTraces`).

Seam: the log is read as the runtime's ``logs`` command prints it, plain lines; the log file itself
(``LogPath``: Docker's json-file, podman's k8s-file) would need its framing peeled (``firstlight.framing``
knows those framings), and is only named in a note.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

from firstlight.config import Config
from firstlight.containers.command import RunCommand
from firstlight.containers.runtime import Container, ContainerGone, Runtime, RuntimeFailure, read_cidfile
from firstlight.engines.command import ServerCommand
from firstlight.framing import format_rfc3339, parse_rfc3339
from firstlight.logtext import LineEvent
from firstlight.runner.launcher import ServerProcess
from firstlight.runner.session import SourcesFactory
from firstlight.runner.sources import Echo, Sink, Sources
from firstlight.samplers.base import Backoff, Guard, Sampler, idle_cap
from firstlight.samplers.logs import PipeReader
from firstlight.samplers.oom import OomTraces, kernel_log_cgroup_kills, memory_dirs
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.timeline import Observation, ProcessSample, SourceNote
from firstlight.wire.content import clean_text

INSPECT_EVERY_S = 1.0  # at most one `inspect` a second, however often the state is asked
EXIT_SETTLE_S = 10.0  # after the init process is gone, how long the runtime may take to record the exit
LOGS_STOP_S = 5.0
NEXT_START_WAIT_S = 1.0  # how long a line stamped after its start's end waits for a restart to be on record


class Tracker:
    """One container as the runtime reports it: found by id, name or a cidfile, inspected at most once a
    second, its last known state kept (a ``--rm`` container is gone from ``inspect`` once it exited)."""

    def __init__(self, runtime: Runtime, ref: str | None = None, cidfile: Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runtime, self.ref, self.cidfile, self.clock = runtime, ref, cidfile, clock
        self.last: Container | None = None
        self.error: str | None = None
        self.gone = False  # seen, then the runtime said it has no such container (--rm after its end, rm -f)
        self.on_found: Callable[[Container], None] | None = None  # told once, when the container is first seen
        # the StartedAt of the start being watched, where the runtime may start the container again (a restart
        # policy): a later StartedAt means that start has ended, whatever the state says now
        self.watching: str | None = None
        self.known_at: float | None = None  # the wall time the last answer of `inspect` was asked at
        self._at = -1e9
        self._lock = threading.Lock()

    @property
    def id(self) -> str | None:
        if self.last is not None:
            return self.last.id
        if self.cidfile is not None:
            return read_cidfile(self.cidfile)
        return None

    def get(self, fresh: bool = False) -> Container | None:
        """The container's state now (or as of the last second); None while it cannot be found yet."""
        with self._lock:
            if not fresh and self.clock() - self._at < INSPECT_EVERY_S:
                return self.last
            ref = self.id or self.ref
            if ref is None:
                return self.last
            self._at, asked = self.clock(), time.time()
            try:
                found = self.runtime.inspect(ref)
            except RuntimeFailure as e:
                self.error = str(e)
                self.gone = self.last is not None and isinstance(e, ContainerGone)
                return self.last
            first, self.last, self.error, self.gone = self.last is None, found, None, False
            self.known_at = asked
        if first and self.on_found is not None:
            self.on_found(found)
        return found

    def later(self, c: Container | None) -> bool:
        """Is ``c`` a later start than the one watched (the runtime started the container again)?"""
        return c is not None and self.watching is not None and c.started_at != self.watching

    def ended(self, settle_s: float = EXIT_SETTLE_S) -> Container | None:
        """The state once the runtime has recorded the exit (waits up to ``settle_s``: conmon and containerd
        record it a moment after the init process is gone); the last known state otherwise."""
        until = time.monotonic() + settle_s
        while True:
            c = self.get(fresh=True)
            if c is not None and (not c.running or self.later(c)):
                return c
            if time.monotonic() >= until or (c is None and self.last is None):
                return c
            if self.error is not None and self.last is not None:  # gone (--rm): what was known is all there is
                return self.last
            time.sleep(0.25)


LOG_SINCE_SLACK_S = 1.0  # the log of a watched container is read from this long before its StartedAt


def start_boundary(c: Container) -> float | None:
    """Where the log of the start ``c`` begins (POSIX time): a second before its StartedAt, since podman may
    stamp ``StartedAt`` after the init process printed its first lines; but where the runtime restarted it, no
    earlier than halfway between the start before's end (``FinishedAt``, kept while the new start runs) and
    this StartedAt: the earlier start's last lines are stamped around its end, this one's first around its
    start. None when the time cannot be read."""
    started = parse_rfc3339(c.started_at) if c.started_at else None
    if started is None:
        return None
    before = parse_rfc3339(c.finished_at) if c.finished_at else None
    if before is not None and before < started:
        return max(started - LOG_SINCE_SLACK_S, (before + started) / 2)
    return started - LOG_SINCE_SLACK_S


def log_since(c: Container) -> str | None:
    """``logs --since`` for the start ``c``: its :func:`start_boundary` in RFC 3339 (its StartedAt as written
    when that cannot be read)."""
    t = start_boundary(c)
    return c.started_at if t is None else format_rfc3339(t)


def launched(runtime: Runtime, cidfile: Path) -> Tracker:
    """The container a ``run`` command starts: found by the id its CLI writes to ``cidfile``, never by its
    ``--name``: a name another container holds is refused by the runtime, and that container is not ours to watch,
    inspect or stop."""
    return Tracker(runtime, ref=None, cidfile=cidfile)


class ContainerOom(OomTraces):
    """The kernel's traces for the init process, and the runtime's own record: ``State.OOMKilled``."""

    def __init__(self, pid: int, tracker: Tracker) -> None:
        super().__init__(pid, directories=memory_dirs(pid))
        self.tracker = tracker

    def evidence(self, pids: Iterable[int] = ()) -> tuple[str, ...]:
        return container_oom(self.tracker, super().evidence(pids))


def container_oom(tracker: Tracker, traces: Iterable[str] = ()) -> tuple[str, ...]:
    """The OOM-kill traces of the tracked container: the runtime's ``State.OOMKilled``, ``traces`` (the init
    PID's), and the kernel log's kills in the container's cgroup (named by its id)."""
    out = list(traces)
    c = tracker.last
    if c is not None and c.oom_killed:
        out.insert(0, f"{tracker.runtime.name} inspect {c.short_id}: State.OOMKilled true, {c.ended()}")
    ref = tracker.id
    if ref is not None:
        out += [f"kernel log: {line}" for line in kernel_log_cgroup_kills(ref) if f"kernel log: {line}" not in out]
    return tuple(out)


class ContainerSampler(ProcessTreeSampler):
    """The container's init process and its descendants (host PIDs), sampled as ``--pid`` samples a tree; the
    root is found once the container runs. ``launcher_exit``: the CLI that was to start it, so that a run that
    never made a container (an unknown image, a bad option) ends with the CLI's exit code."""

    name = "container"

    def __init__(self, tracker: Tracker, interval: float = 1.0, clock: Callable[[], float] = time.time,
                 launcher_exit: Callable[[], int | None] | None = None) -> None:
        super().__init__(0, interval, self._container_exit, clock)
        self.tracker = tracker
        self.launcher_exit = launcher_exit
        self._found = False
        self._restarted: tuple[int | None, str] | None = None  # the watched start's end, read once it restarted

    def _container_exit(self) -> int | None:
        c = self.tracker.ended()
        if self.tracker.later(c):
            assert c is not None
            return self._restarted_exit(c)[0]
        if c is None:
            return self.launcher_exit() if self.launcher_exit is not None else None
        code = c.popen_exit_code()
        if code is None and self.launcher_exit is not None:  # removed before its exit was read (--rm)
            until = time.monotonic() + EXIT_SETTLE_S
            while self.launcher_exit() is None and time.monotonic() < until:
                time.sleep(0.1)  # the attached CLI passes the status on as it exits
            return _from_cli(self.launcher_exit())
        return code

    def _restarted_exit(self, later: Container) -> tuple[int | None, str]:
        """The watched start's exit once the runtime has started the container again (its state is now the later
        start's, its ExitCode reset): the runtime's event of that death, and how it is known."""
        if self._restarted is None:
            runtime, since = self.tracker.runtime, self.tracker.watching or ""
            try:
                code = runtime.died(later.id, since, later.started_at or format_rfc3339(time.time()))
                why = (f"{runtime.name} events: died with exit code {code}" if code is not None
                       else f"{runtime.name} events: no record of its death")
            except RuntimeFailure as e:
                code, why = None, str(e)
            self._restarted = (_from_cli(code),
                               f"{runtime.name} container {later.short_id}: the start of {since} ended, the runtime "
                               f"started it again at {later.started_at} (restart {later.restart_count}, policy "
                               f"{later.restart_policy or 'no'}); {why}")
        return self._restarted

    def _sample(self) -> list[Observation]:
        out = super().sample()
        if any(isinstance(o, ProcessSample) and not o.alive for o in out):  # the runtime's record of the end
            c = self.tracker.last
            if self._restarted is not None:
                out.insert(0, SourceNote(self.clock(), "container", self._restarted[1]))
            elif c is not None and c.exit_code is not None:
                out.insert(0, SourceNote(self.clock(), "container", f"{self.tracker.runtime.name} inspect "
                                                                    f"{c.short_id}: {c.ended()}"))
        return out

    def sample(self) -> list[Observation]:
        if self._found or self._dead:
            return self._sample()
        c = self.tracker.get()
        if self.tracker.later(c):  # the watched start ended before its processes were seen
            assert c is not None
            self._dead = True
            code, why = self._restarted_exit(c)
            return [SourceNote(self.clock(), "container", why),
                    ProcessSample(self.clock(), alive=False, exit_code=code,
                                  oom=container_oom(self.tracker) if code is None or code < 0 else ())]
        if c is not None and c.pid is not None:
            self._found = True
            self.pid = c.pid
            self._oom = ContainerOom(c.pid, self.tracker)
            return [SourceNote(self.clock(), "container", describe(c, self.tracker.runtime)), *self._sample()]
        launcher = self.launcher_exit() if self.launcher_exit is not None else None
        if c is None and launcher is None:
            return []  # the CLI is still creating it, or the runtime has not answered yet
        if launcher is not None:  # the CLI is done (-d exits at once): what the runtime says now, not a second ago
            c = self.tracker.get(fresh=True)
            if c is not None and c.pid is not None:
                return self.sample()
        if c is not None and c.exit_code is None and (c.running or launcher is None):
            return []  # created, not started yet
        self._dead = True
        oom: tuple[str, ...] = ()
        if c is None:
            code = _from_cli(launcher)
            why = (f"{self.tracker.runtime.name} exited with code {launcher} before a container ran"
                   if self.tracker.id is None else
                   f"container {self.tracker.id[:12]} is gone ({self.tracker.error}); the CLI exited with {launcher}")
        else:
            code = c.popen_exit_code() if c.exit_code is not None else _from_cli(launcher)
            why = f"container {c.short_id} ended before its processes were seen: {c.ended()}"
        if code is None or code < 0:
            oom = container_oom(self.tracker)
        return [SourceNote(self.clock(), "container", why),
                ProcessSample(self.clock(), alive=False, exit_code=code, oom=oom)]


def _from_cli(code: int | None) -> int | None:
    """The CLI passes the container's status on: 128 + N is its init's death by signal N."""
    if code is not None and 128 < code < 128 + 65:
        return -(code - 128)
    return code


def describe(c: Container, runtime: Runtime) -> str:
    parts = [f"{runtime.name} container {c.name or c.short_id} ({c.short_id}), image {c.image or '?'}: "
             f"init pid {c.pid}"]
    cgroups = memory_dirs(c.pid) if c.pid else []
    if c.cgroup or cgroups:
        parts.append(f"cgroup {clean_text(str(c.cgroup or cgroups[0]), 256)}")
    if c.log_driver or c.log_path:
        parts.append(f"log {c.log_driver or '?'} {clean_text(c.log_path or '', 256)}".rstrip())
    if c.health:
        parts.append(f"health {c.health}")
    return "; ".join(parts)


def _stamped_after_end(c: Container | None, ts: float) -> bool:
    """Was a line stamped after the start ``c`` ended, as the runtime recorded its end?"""
    if c is None or c.running or not c.finished_at:
        return False
    end = parse_rfc3339(c.finished_at)
    return end is not None and ts > end


class ContainerLog:
    """``RUNTIME logs --follow --timestamps [--since T] ID`` as a child process, its stdout and stderr read as
    the server's lines. Started once the container's id is known; stopped (TERM, then KILL) with the watch.

    Where a restart policy starts the container again, ``logs --follow`` may read on into the next start before
    it ends: a line the runtime stamped at or after the next start's :func:`start_boundary` is that start's, and
    is left to its own watch (as a line stamped before ``since`` is the start before's)."""

    def __init__(self, tracker: Tracker, sink: Sink, echo: Echo | None, clock: Callable[[], float],
                 backlog: Callable[[], int] | None, since: str | None = None) -> None:
        self.tracker, self.sink, self.echo, self.clock, self.backlog = tracker, sink, echo, clock, backlog
        self.since = since
        self.since_t = parse_rfc3339(since) if since else None  # lines stamped earlier: the start before's
        self.until: float | None = None  # lines stamped from here on: the next start's, once it is seen
        self._init: int | None = None  # the watched start's init process (a host PID)
        self._waited = False  # asked the runtime for a restart not on record yet
        self.popen: subprocess.Popen[bytes] | None = None
        self.readers: list[PipeReader] = []
        self._stop = threading.Event()
        self._guard = Guard("container", "the container's log reader", clock=clock)
        self.thread = threading.Thread(target=self._guard.run, args=(self._run, sink), name="firstlight-container-logs",
                                       daemon=True)  # not started again: the runtime's logs would be read twice

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ref = self.tracker.id
            if ref is not None:
                break
            self._stop.wait(0.2)
        else:
            return
        argv = self.tracker.runtime.logs_argv(ref, self.since)
        try:
            self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE)
        except OSError as e:
            self.sink(SourceNote(self.clock(), "container", f"cannot run {argv[0]} logs: {e.strerror or e}"))
            return
        for pipe, name in ((self.popen.stdout, "stdout"), (self.popen.stderr, "stderr")):
            assert pipe is not None
            reader = PipeReader(pipe, name, self.echo, self.clock, backlog=self.backlog, keep=self._ours)
            reader.start(self.sink)
            self.readers.append(reader)

    def _ours(self, line: LineEvent) -> bool:
        """Is the line of the watched start? Judged by the time the runtime stamped it. A line stamped after
        what the runtime last said is the start's while its init process still runs (no later start can have
        begun); once that process is gone the runtime is asked afresh, else at most once a second. A line
        stamped after the start's recorded end may be a restart's the runtime has not recorded yet: it is asked
        again for up to ``NEXT_START_WAIT_S`` (once per log)."""
        if line.ts is None:
            return True
        if self.since_t is not None and line.ts < self.since_t:
            return False
        if self.until is None and self.tracker.watching is not None:
            known = self.tracker.known_at
            if known is not None and line.ts <= known:
                c = self.tracker.last
            else:
                alive = self._init_alive()
                if alive:
                    return True
                c = self.tracker.get(fresh=alive is False)
            if not self.tracker.later(c) and _stamped_after_end(c, line.ts) and not self._waited:
                c = self._next_start()
            if self.tracker.later(c):
                assert c is not None
                self.until = start_boundary(c)
        return self.until is None or line.ts < self.until

    def _next_start(self) -> Container | None:
        self._waited = True
        until = time.monotonic() + NEXT_START_WAIT_S
        while True:
            c = self.tracker.get(fresh=True)
            if self.tracker.later(c) or time.monotonic() >= until or self._stop.wait(0.1):
                return c

    def _init_alive(self) -> bool | None:
        """Does the watched start's init process run? None where it cannot be told (not known yet, or in a
        PID namespace this host does not see); False once the runtime recorded its end."""
        c = self.tracker.last
        if c is not None and not c.running and not self.tracker.later(c):
            return False
        if self._init is None and c is not None and c.pid is not None and not self.tracker.later(c):
            self._init = c.pid
        if self._init is None:
            return None
        try:
            return psutil.Process(self._init).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
        except psutil.Error:
            return None

    def settle(self, timeout: float) -> None:
        """Bounded: the lines the runtime had when the container ended (``logs --follow`` ends with it)."""
        self.thread.join(timeout)
        p = self.popen
        if p is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout)
        for r in self.readers:
            r.thread.join(timeout)

    def stop(self) -> None:
        self._stop.set()
        p = self.popen
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(LOGS_STOP_S)
        except subprocess.TimeoutExpired:
            p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(LOGS_STOP_S)


class ContainerServer(ServerProcess):
    """The CLI that runs the container (``docker run ...``), whose server is the container: it lives while the
    container runs (a ``-d`` CLI exits at once), and stopping it stops the container first."""

    def __init__(self, argv: list[str], tracker: Tracker, output: Path | None = None,
                 detachable: bool | None = None) -> None:
        super().__init__(argv, output=output, detachable=detachable)
        self.tracker = tracker
        self.container_stop: str | None = None
        self._stopping = False
        # the watchdog stops the container too if firstlight dies without stopping it (SIGKILL, the OOM killer)
        tracker.on_found = lambda c: self._tell_watchdog(f"container {tracker.runtime.binary} {c.id}")

    @property
    def how_to_stop(self) -> str:
        ref = self.tracker.id
        return f"{self.tracker.runtime.name} stop {ref[:12] if ref else '(the container)'}"

    def poll(self) -> int | None:
        cli = super().poll()
        if self._stopping:  # the launcher's own stop reads the CLI's status
            return cli
        c = self.tracker.get()
        if c is not None:
            if self.tracker.gone:  # removed (rm -f, or --rm once it ended): not running, whatever it last said
                code = None if c.running else c.popen_exit_code()
                return code if code is not None else cli  # an attached CLI exits with it, at once
            if c.running or (c.exit_code is None and c.status in ("created", "configured", "initialized")):
                return None
            code = c.popen_exit_code()
            return code if code is not None else cli
        if cli is not None and self.tracker.id is not None and self.tracker.error is None:
            return None  # the id is written, inspect has not answered yet
        return cli

    def cli_exit(self) -> int | None:
        """The CLI's own exit status (None while it runs)."""
        return super().poll()

    def adopted(self) -> list[psutil.Process]:
        super().adopted()  # reaps what firstlight adopted (podman's conmon double-forks) ...
        return []  # ... but the runtime's own processes are stopped by the runtime, never signalled here

    def tree(self) -> list[psutil.Process]:
        """The CLI, the container's processes, and podman's conmon, which holds the ports ``-p`` publishes (so
        a published port is the server's, not another server's)."""
        procs = super().tree()
        c = self.tracker.get()  # asked now if not known yet: the port may answer before the sampler found it
        for pid in (c.monitor_pid, c.pid) if c is not None else ():
            if pid is None:
                continue
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(pid)
                procs += [root, *root.children(recursive=True)]
        return list(dict.fromkeys(procs))

    def stop(self, grace: float) -> str:
        with self._stop_lock:
            if self._stopped is None:
                how = self._stop_container(grace)
                self._stopping = True
                self._stopped = how + f"; the {self.tracker.runtime.name} CLI: " + self._stop(grace)
            return self._stopped

    def _stop_container(self, grace: float) -> str:
        ref = self.tracker.id
        if ref is None:
            return "no container was started"
        c = self.tracker.get(fresh=True)
        if self.tracker.error is not None and c is not None:
            return f"container {c.short_id} already ended and is gone (--rm)"
        if c is not None and not c.running:
            return f"container {c.short_id} already ended: {c.ended()}"
        try:
            self.container_stop = self.tracker.runtime.stop(ref, grace)
        except RuntimeFailure as e:
            return f"could not stop container {ref[:12]}: {e}"
        c = self.tracker.get(fresh=True)
        after = "removed (--rm)" if self.tracker.error is not None else c.ended() if c is not None else "?"
        return f"container stopped ({self.container_stop}): {after}"


class ContainerSources(Sources):
    def __init__(self, cfg: Config, sink: Sink, echo: Echo, identify: bool, clock: Callable[[], float],
                 backlog: Callable[[], int] | None, command: ServerCommand | None, *, tracker: Tracker,
                 run: RunCommand | None, since: str | None) -> None:
        super().__init__(cfg, sink, echo, identify, clock, backlog, command)
        self.tracker, self.run = tracker, run
        self.log: ContainerLog | None = None
        self.since = since

    def make_server(self, output: Path | None, detachable: bool) -> ServerProcess:
        argv = list(self.run.argv) if self.run is not None else self.cfg.command  # with the --cidfile added
        return ContainerServer(argv, self.tracker, output=output, detachable=detachable)

    def process_sampler(self) -> Sampler | None:
        cli = self.server.cli_exit if isinstance(self.server, ContainerServer) else None
        sampler = ContainerSampler(self.tracker, self.cfg.sample_interval, self.clock, cli)
        sampler.backoff = Backoff(self.cfg.sample_interval, idle_cap(self.cfg.judge.stall_timeout))
        return sampler

    def start(self) -> str | None:
        error = super().start()
        if error is not None:
            return error
        # attached, the CLI's output is the container's; detached (or watched), the runtime's logs command
        if self.run is None or self.run.detach:
            self.log = ContainerLog(self.tracker, self.sink, self.echo if self.cfg.echo_server_output else None,
                                    self.clock, self.backlog, self.since)
            self.log.start()
        return None

    @property
    def pid(self) -> int | None:
        c = self.tracker.last
        if self.server is None and c is not None and c.pid is not None:
            return c.pid
        return super().pid

    def _size_weights(self) -> None:
        if self.cfg.model_path is not None:  # a path in the container is sized only where the host has it too
            super()._size_weights()

    def settle_logs(self, timeout: float = 2.0) -> None:
        super().settle_logs(timeout)
        if self.log is not None:
            self.log.settle(timeout)

    def stop(self) -> None:
        super().stop()
        if self.log is not None:
            self.log.stop()


def container_sources(tracker: Tracker, run: RunCommand | None = None, since: str | None = None) -> SourcesFactory:
    """The sources of a session whose server is a container: ``watch --container`` (``run`` None) or ``up --
    RUNTIME run``; ``since``: where the runtime's logs of a watched container begin."""
    return functools.partial(ContainerSources, tracker=tracker, run=run, since=since)
