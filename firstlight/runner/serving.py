"""After READY, under ``up`` (supervising) and the sidecar ``watch``: the serving checks, owned by the loop that
watches the serving server.

The observers (:mod:`firstlight.probes.serving`) run in their own threads and only put what they saw on this
object's queue; ``step()``, called by the supervising loop on its own thread, feeds it to the tracker
(:mod:`firstlight.serving`, the one that decides), sends an active check when the tracker says one is due, and
tells the reporters: ``serving(status, changed)`` on every step (systemd's watchdog is fed from it), a change
also as a ``serving`` message line for people.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

from firstlight.config import Config, JudgeConfig
from firstlight.engines import get_profile
from firstlight.engines.profile import EngineProfile
from firstlight.probes.ladder import Listener, split_url
from firstlight.probes.serving import CheckAnswer, CountersSample, ServingProbe
from firstlight.report.base import Reporter
from firstlight.result import RunResult
from firstlight.samplers.ports import worker_connected, worker_listening
from firstlight.serving import ServingConfig, ServingStatus, ServingTracker
from firstlight.timeline import Observation, SourceNote


def worker_listener(judge: JudgeConfig, pid: int | None, url: str) -> Listener | None:
    """A worker's readiness check (the run's ``JudgeConfig.role`` and ``head``, from the command reader), before
    READY and after: its process tree listening on the URL's port, or, for a worker that serves no port (vLLM
    --headless), connected to its head node, seen in /proc; None for a server (its checks are real generations) or
    a worker firstlight cannot see."""
    if judge.role != "worker" or pid is None:
        return None
    if judge.head:
        heads = judge.head
        return lambda: worker_connected(pid, heads)
    port = split_url(url)[1]
    return lambda: worker_listening(pid, port)


def worker_kind(judge: JudgeConfig) -> str:
    """What a worker's checks observe (``ServingTracker``'s ``worker``): "" for a server."""
    if judge.role != "worker":
        return ""
    return "head" if judge.head else "port"


def serving_config(cfg: Config) -> ServingConfig:
    return ServingConfig(interval=cfg.serving_interval, generation_timeout=cfg.probe.generation_timeout,
                         stall_timeout=cfg.judge.stall_timeout, cpu_busy_cores=cfg.judge.cpu_busy_cores)


class ServingWatch:
    def __init__(self, cfg: Config, result: RunResult, reporter: Reporter, *, profile: EngineProfile | None = None,
                 pid: int | None = None, model: str | None = None,
                 record: Callable[[ServingStatus], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.cfg, self.reporter, self.clock, self.record = serving_config(cfg), reporter, clock, record
        profile = profile or get_profile(result.engine)
        first = (result.first_generation or {}).get("latency_s")
        self.tracker = ServingTracker(self.cfg, result.ready_at or clock(), first, worker=worker_kind(cfg.judge))
        self.q: queue.Queue[Observation] = queue.Queue()
        self.probe = ServingProbe(cfg.probe, profile.endpoints, profile.serving, self.q.put, pid=pid, model=model,
                                  scrape_s=min(1.0, max(0.2, self.cfg.interval / 4)), clock=clock,
                                  listener=worker_listener(cfg.judge, pid, cfg.probe.url))
        self.started = False

    @property
    def status(self) -> ServingStatus:
        return self.tracker.status

    def start(self) -> None:
        if self.cfg.enabled:  # --serving-interval 0: no checks, no serving state (the process is watched)
            self.probe.start()
            self.started = True
            self._tell(self.tracker.status, True)

    def stop(self) -> None:
        self.probe.stop()  # joins only the threads that run; closes its HTTP clients in any case

    def step(self) -> ServingStatus:
        """Everything observed since the last step, into the tracker; a check when one is due."""
        if not self.started:  # checks off: the supervising loop's liveness still feeds systemd's watchdog
            self._tell(self.tracker.status, False)
            return self.tracker.status
        changes: list[ServingStatus | None] = []
        while True:
            try:
                obs = self.q.get_nowait()
            except queue.Empty:
                break
            if isinstance(obs, CountersSample):
                if obs.cpu_seconds is not None:
                    self.tracker.cpu_seen(obs.t, obs.cpu_seconds)
                if obs.done is not None:
                    changes.append(self.tracker.counters_seen(obs.t, obs.done, obs.busy))
            elif isinstance(obs, CheckAnswer):
                changes.append(self.tracker.check_answered(obs.t, obs.ok, obs.latency_s, obs.detail))
            elif isinstance(obs, SourceNote):  # what escaped the probe's threads (their guard): said, not lost
                self.reporter.message(f"{obs.source}: {obs.message}")
        now = self.clock()
        changes.append(self.tracker.tick(now))
        if self.tracker.want_check(now):
            self.tracker.check_sent(now)
            self.probe.request_check()
        real = [c for c in changes if c is not None]
        for c in real:
            self._tell(c, True)
            if self.record is not None:
                self.record(c)
        if not real:
            self._tell(self.tracker.status, False)
        return self.tracker.status

    def _tell(self, status: ServingStatus, changed: bool) -> None:
        self.reporter.serving(status, changed)
