"""The sources of one watch: the launched server (or the watched one), its output, its process tree, the GPUs,
the weights on disk and the readiness ladder. Each runs on its own clock and only observes: it puts
observations on the sink and decides nothing.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from firstlight.config import Config
from firstlight.engines import ServerCommand, read_command
from firstlight.engines.command import flag_value
from firstlight.engines.profile import Endpoints
from firstlight.preflight.disk import mount_of
from firstlight.preflight.pagecache import resident_bytes
from firstlight.probes.ladder import Ladder, split_url
from firstlight.probes.loop import LadderLoop
from firstlight.runner.launcher import LaunchError, ServerProcess
from firstlight.runner.serving import worker_listener
from firstlight.samplers.base import Backoff, Guard, Sampler, Source, idle_cap
from firstlight.samplers.gpu import GpuSampler
from firstlight.samplers.hub import HubCacheSampler, hub_cache, hub_id, model_folder
from firstlight.samplers.logs import FileFollower, PipeReader
from firstlight.samplers.models_sse import ModelsSSE, is_router
from firstlight.samplers.oom import OomTraces
from firstlight.samplers.ports import foreign_listener
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.samplers.weights import resolve_model_dir, total_weight_bytes
from firstlight.timeline import CollectorStat, Observation, Probe, SourceNote, WeightsTotal
from firstlight.wire.client import port_open

Sink = Callable[[Observation], None]
TAKEN_CHECK_S = 0.5  # a local port that does not accept a connection within this is not another server's
WEIGHTS_WAIT_S = 5.0  # ms on a healthy mount; seconds only for a machine so loaded that its threads wait their turn
Echo = Callable[[str, str], None]


def server_command(cfg: Config) -> ServerCommand:
    """The server's command as the one command reader sees it: the launched one, in this environment (the server
    inherits it), or the watched one (its environment unknown)."""
    if cfg.command:
        return read_command(cfg.command, engine=cfg.engine, env=os.environ)
    return read_command(cfg.watched_command, engine=cfg.engine, env={})


class Sources:
    def __init__(self, cfg: Config, sink: Sink, echo: Echo, identify: bool,
                 clock: Callable[[], float] = time.time, backlog: Callable[[], int] | None = None,
                 command: ServerCommand | None = None) -> None:
        """``backlog``: how many observations the session has not taken yet; log sources wait while it is high
        and drop (with a count) rather than block the server or flood the queue. ``command``: the server's
        command as the run's plan read it (else read here, when needed)."""
        self.cfg, self.sink, self.echo, self.clock = cfg, sink, echo, clock
        self.command = command
        self.backlog = backlog
        self.port_conflict: str | None = None  # evidence that another process holds the server's port
        self._port_owned = False
        self.identify = identify  # ask the server's endpoints which engine it is
        self.server: ServerProcess | None = None
        self.server_log: Path | None = None
        self.oom: OomTraces | None = None  # the server's OOM counters, read when the watch began
        self.samplers: list[Sampler] = []
        self.followers: list[FileFollower] = []
        self.readers: list[PipeReader] = []
        self.streams: list[ModelsSSE] = []  # the engine's own progress stream (llama.cpp's router)
        self.ladder_loop: LadderLoop | None = None
        self.running: list[Source] = []  # every source started, whatever its kind: stopped alike
        self._rungs: dict[int, bool] = {}  # probe level -> whether it answered last time

    @property
    def pid(self) -> int | None:
        return self.server.pid if self.server else self.cfg.pid

    def start(self) -> str | None:
        """Start everything; the launch error, if the command could not be started."""
        # the weights sized, and their page-cache residency read, before the launch: a C++ server maps them at
        # once; a hung mount holds the launch up by WEIGHTS_WAIT_S at most (the thread goes on by itself)
        sized = threading.Event()
        threading.Thread(target=self._weights, args=(sized,), name="firstlight-weights", daemon=True).start()
        if self.cfg.command:
            sized.wait(WEIGHTS_WAIT_S)
        if self.cfg.command and not self._port_taken():
            error = self._launch()
            if error is not None:
                return error
        if self.cfg.log_file is not None:
            self._follow(self.cfg.log_file, echo=False, from_start=self.cfg.log_from_start,
                         since=self._watched_start(), start_size=self.cfg.log_start_size)
        processes = self.process_sampler()
        if processes is not None:  # backs off while nothing moves; nudged back by a line or a probe's change
            processes.backoff = Backoff(self.cfg.sample_interval, idle_cap(self.cfg.judge.stall_timeout))
            self.samplers.append(processes)
        self.samplers.append(GpuSampler(self.cfg.sample_interval, clock=self.clock))
        hub = self.hub_sampler()
        if hub is not None:
            self.samplers.append(hub)
        for s in self.samplers:
            self._start(s)
        self._engine_streams()
        listener = worker_listener(self.cfg.judge, self.pid, self.cfg.probe.url)  # a worker: never connected to
        # the known answer wants the generation's log-probabilities; a worker generates nothing
        ladder = Ladder(self.cfg.probe, self.clock, listener=listener, logprobs=self.cfg.history.answers)
        self.ladder_loop = LadderLoop(ladder,
                                      self.cfg.probe.min_interval, self.cfg.probe.max_interval,
                                      identify=self.identify and listener is None)
        self._start(self.ladder_loop, self._probed)
        return None

    def _start(self, source: Source, sink: Sink | None = None) -> None:
        source.start(self.sink if sink is None else sink)
        self.running.append(source)

    def _engine_streams(self) -> None:
        """The engine's own model-load stream, where its command starts one (llama-server in router mode)."""
        argv = self.cfg.command or self.cfg.watched_command
        if is_router(argv, dict(os.environ) if self.cfg.command else None):
            parts = urlsplit(self.cfg.probe.url)
            stream = ModelsSSE(f"{parts.scheme}://{parts.netloc}", self.cfg.probe.api_key, self.clock)
            self._start(stream)
            self.streams.append(stream)

    def process_sampler(self) -> Sampler | None:
        """What samples the server's processes: its process tree (a unit's cgroup: firstlight.units)."""
        if self.pid is None:
            return None
        self.oom = OomTraces(self.server.pid if self.server is not None else self.pid)  # read again after READY
        if self.server is not None:  # the tree includes what firstlight adopted as the subreaper
            return ProcessTreeSampler(self.server.pid, self.cfg.sample_interval, self.server.poll, self.clock,
                                      self.server.descendants, self.server.note_left_group, self.oom)
        return ProcessTreeSampler(self.pid, self.cfg.sample_interval, None, self.clock, oom=self.oom)

    def hub_sampler(self) -> Sampler | None:
        """The model's folder in the Hugging Face hub cache, when the command names a hub id (not a path on this
        machine, nor a model inside a container): its growth is the download's progress."""
        cmd = self.command if self.command is not None else server_command(self.cfg)
        repo = hub_id(cmd.model) if not cmd.image and not self.cfg.model_path else None
        if repo is None:
            return None
        # vLLM's and SGLang's --download-dir is the cache huggingface_hub is given (its cache_dir)
        download_dir = flag_value(list(cmd.server), ("--download-dir",))
        cache = Path(download_dir).expanduser() if download_dir else hub_cache(cmd.env or os.environ)
        folder = model_folder(cache, repo)
        sampler = HubCacheSampler(folder, self.cfg.sample_interval, self.clock)
        sampler.backoff = Backoff(self.cfg.sample_interval, idle_cap(self.cfg.judge.stall_timeout))
        return sampler

    def oom_evidence(self) -> tuple[str, ...]:
        """The OOM-kill traces since the watch began (none without a process to watch)."""
        return self.oom.evidence() if self.oom is not None else ()

    def _launch(self) -> str | None:
        output = None
        if self.cfg.after_ready == "detach":  # the server outlives us: its output goes to a file, not our pipe
            fd, name = tempfile.mkstemp(prefix="firstlight-server-", suffix=".log")
            os.close(fd)
            output = self.server_log = Path(name)
        # --detach and --keep-on-failure may hand the server over: no parent-death signal for those
        self.server = self.make_server(output, self.cfg.after_ready == "detach" or self.cfg.keep_on_failure)
        try:
            self.server.start()
        except LaunchError as e:
            self.server = None
            return str(e)
        assert self.server.popen is not None
        if output is not None:
            self._follow(output, echo=self.cfg.echo_server_output, from_start=True)
            return None
        echo = self.echo if self.cfg.echo_server_output else None
        for pipe, name in ((self.server.popen.stdout, "stdout"), (self.server.popen.stderr, "stderr")):
            assert pipe is not None
            reader = PipeReader(pipe, name, echo, self.clock, backlog=self.backlog)
            self._start(reader)
            self.readers.append(reader)
        return None

    def make_server(self, output: Path | None, detachable: bool) -> ServerProcess:
        """The launched server's process (a container's CLI is one: firstlight.containers)."""
        return ServerProcess(self.cfg.command, output=output, detachable=detachable)

    def _follow(self, path: Path, echo: bool, from_start: bool = False, since: float | None = None,
                start_size: int | None = None) -> None:
        f = FileFollower(path, clock=self.clock, echo=self.echo if echo else None, from_start=from_start,
                         since=since, backlog=self.backlog, start_size=start_size)
        self._start(f)
        self.followers.append(f)

    def _watched_start(self) -> float | None:
        """When the watched process started: where its lines begin in an append-mode log."""
        if self.cfg.pid is None:
            return None
        try:
            return float(psutil.Process(self.cfg.pid).create_time())
        except psutil.Error:
            return None

    # -- the port belongs to the launched server -----------------------------------------------------------
    def _port_taken(self) -> bool:
        """Before the launch: a local port that already accepts connections is another server's. Nothing is
        launched; ``port_conflict`` says who holds it."""
        try:
            host, port = split_url(self.cfg.probe.url)
        except ValueError:
            return False
        if host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0") or not port_open(self.cfg.probe.url,
                                                                                  TAKEN_CHECK_S):
            return False
        held = foreign_listener([], port, self.clock() + 1)
        self.port_conflict = held or f"port {port} already accepts connections before the launch"
        return True

    def check_port_owner(self) -> str | None:
        """The port answers: it counts for the launched server only if its process tree listens on it (or the
        holder is newer than the launch, like a container's port proxy). The conflict's evidence, if any."""
        if self._port_owned or self.server is None or self.port_conflict is not None:
            return self.port_conflict
        try:
            _, port = split_url(self.cfg.probe.url)
        except ValueError:
            return None
        held = foreign_listener(self.server.tree(), port, self.server.launched_at)
        if held is None:
            self._port_owned = True
        self.port_conflict = held
        return held

    def _weights(self, sized: threading.Event) -> None:
        try:
            Guard("weights", "sizing the weights", clock=self.clock).run(self._size_weights, self.sink)
        finally:
            sized.set()

    def _size_weights(self) -> None:
        cmd = self.command if self.command is not None else server_command(self.cfg)
        model = str(self.cfg.model_path) if self.cfg.model_path else cmd.model_local
        if not model:
            if cmd.model and cmd.image:
                self.sink(SourceNote(self.clock(), "weights", f"model {cmd.model!r} is inside the container "
                                     f"{cmd.image} (no bind mount holds it); weights fraction unavailable"))
            return
        path = resolve_model_dir(model)
        if path is None:
            self.sink(SourceNote(self.clock(), "weights", f"model {model!r} is not a local path; "
                                                          "weights fraction unavailable"))
            return
        try:
            total, files = total_weight_bytes(path)
        except OSError as e:
            self.sink(SourceNote(self.clock(), "weights", f"cannot size {path}: {e.strerror}"))
            return
        if files:
            self.sink(WeightsTotal(self.clock(), total, files, str(path), resident_bytes(path), mount_of(path)[1]))

    # -- while running ---------------------------------------------------------------------------------
    def new_log_line(self) -> None:
        """Something happened: probe again soon, sample at the base rate."""
        if self.ladder_loop is not None:
            self.ladder_loop.wake.set()
        self._nudge()

    def _probed(self, obs: Observation) -> None:
        """A probe's result, on its way to the sink: a rung that answers differently from the last time is a
        change, and the samplers leave their idle back-off."""
        if isinstance(obs, Probe) and self._rungs.get(int(obs.level)) != obs.ok:
            self._rungs[int(obs.level)] = obs.ok
            self._nudge()
        self.sink(obs)

    def _nudge(self) -> None:
        for s in self.samplers:
            s.nudge()

    def collector_stats(self) -> list[CollectorStat]:
        """Each sampler's and each readiness rung's runs, failures and last duration (read at a scrape)."""
        ladder = self.ladder_loop.ladder.stats() if self.ladder_loop is not None else []
        return [*(s.stat() for s in list(self.samplers)), *ladder]

    def use_endpoints(self, endpoints: Endpoints) -> None:
        """The engine became known: its endpoints, for the options the user did not set."""
        if self.ladder_loop is not None:
            self.ladder_loop.use_endpoints(endpoints)

    def settle_logs(self, timeout: float = 2.0) -> None:
        """Wait (bounded) until the log sources have delivered what the exited process wrote."""
        for f in self.followers:
            f.writer_ended()
        logs: list[Source] = [*self.readers, *self.followers]
        for log in logs:
            log.sync(timeout)

    def requests(self) -> dict[str, int]:
        return dict(self.ladder_loop.ladder.requests) if self.ladder_loop else {}

    @property
    def model(self) -> str | None:
        return self.ladder_loop.ladder.model if self.ladder_loop else None

    def stop(self) -> None:
        """Stop observing (the server itself is the policy's business)."""
        for source in self.running:
            source.stop()
