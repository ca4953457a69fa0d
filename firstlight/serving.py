"""After READY: does the server still serve? The one place that decides it (like the judge before READY).

It is told what the serving checks observed (``firstlight.probes.serving``): the engine's own counters, the
server's CPU, the answer of a 1-token check; it says when an active check is due and which state holds:

- ``serving``: requests complete (the engine's counters rise) or the last check answered in time;
- ``degraded``: one check failed (``/readyz`` 503 at once: the bound is --serving-interval + the generation
  timeout), or a check answered but slower than ``SLOW_FACTOR`` x the first generation's latency (still ready);
- ``not_serving``: two checks failed in a row, or requests in flight and nothing completed for --stall-timeout;
- ``hung``: not serving, and nothing completed nor did the process use CPU for --stall-timeout (``/livez`` 503,
  systemd's watchdog is no longer fed).

An active check is due only when nothing completed (by the counters or a check) for --serving-interval: a busy
server gets no extra request. Every change is a new ``ServingStatus`` with its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from firstlight.cputime import rate_reaches
from firstlight.vocab import DEGRADED, HUNG, NOT_SERVING, SERVING

SLOW_FACTOR = 10.0  # a check slower than this many times the first generation is "degraded: slow"
SLOW_FLOOR_S = 2.0  # ... and never below this: a 50 ms first answer must not make 0.5 s on a busy host "slow"


@dataclass(frozen=True)
class ServingConfig:
    interval: float = 10.0  # --serving-interval: an active check when nothing completed for this long; 0: off
    generation_timeout: float = 120.0  # a check that has no answer by then failed
    stall_timeout: float = 120.0  # --stall-timeout: requests in flight with nothing completed; no CPU either
    cpu_busy_cores: float = 0.10  # CPU use of at least this (in cores, counted in ticks) is progress of the process

    @property
    def enabled(self) -> bool:
        return self.interval > 0


@dataclass(frozen=True)
class ServingStatus:
    state: str  # one of vocab.SERVING_STATES
    reason: str
    since: float
    ready: bool  # what /readyz says
    live: bool  # what /livez says; systemd's watchdog is fed only while live and not not_serving
    evidence: tuple[dict[str, object], ...] = ()

    @property
    def feeds_watchdog(self) -> bool:
        return self.live and self.state not in (NOT_SERVING, HUNG)

    def to_dict(self) -> dict[str, object]:
        return {"state": self.state, "reason": self.reason, "since": self.since, "ready": self.ready,
                "live": self.live, "evidence": list(self.evidence)}


def _ev(signal: str, value: str, t: float) -> dict[str, object]:
    return {"signal": signal, "value": value, "since": t}


WORKER_READY = {"port": "READY: the worker's port listens",
                "head": "READY: the worker's engines are up and it holds its connection to its head"}


class ServingTracker:
    def __init__(self, cfg: ServingConfig, ready_at: float, first_latency_s: float | None,
                 worker: str = "") -> None:
        """``worker``: a member that generates nothing itself, and what its READY and its checks observe: "port"
        (its port listening), "head" (its connection to its head node: vLLM --headless); "": a server."""
        self.cfg = cfg
        self.slow_s = max(SLOW_FLOOR_S, SLOW_FACTOR * (first_latency_s or 0.0))
        self.status = ServingStatus(SERVING, WORKER_READY.get(worker, "READY: a real generation returned"),
                                    ready_at, True, True)
        self.last_done = ready_at  # the last evidence that work completed (counters rose, a check answered)
        self.last_check = ready_at  # when the last active check was sent
        self.in_flight = False
        self.failures = 0  # checks failed in a row
        self.counters: dict[str, float] | None = None
        self.busy = 0.0
        self._cpu: tuple[float, float] | None = None  # (t, cpu seconds) of the last sample
        self.cpu_moved_at: float = ready_at
        self.cpu_known = False
        self.checks_sent = 0
        self.last_failed: dict[str, object] | None = None  # the last failed check's evidence, kept for a hung state

    # -- what to do ---------------------------------------------------------------------------------------
    def want_check(self, now: float) -> bool:
        """An active check is due: on, none in flight, and nothing completed for the interval."""
        return (self.cfg.enabled and not self.in_flight
                and now - max(self.last_done, self.last_check) >= self.cfg.interval)

    def check_sent(self, now: float) -> None:
        self.in_flight, self.last_check = True, now
        self.checks_sent += 1

    # -- what was observed --------------------------------------------------------------------------------
    def counters_seen(self, t: float, done: dict[str, float], busy: float) -> ServingStatus | None:
        """The engine's counters (``done``: counters that rise as work completes) and its in-flight gauges."""
        rose = {k: v - self.counters[k] for k, v in done.items()
                if self.counters is not None and k in self.counters and v > self.counters[k]}
        self.counters, self.busy = dict(done), busy
        if not rose:
            return self.tick(t)
        self.last_done = t
        self.failures = 0
        shown = ", ".join(f"{k} +{v:g}" for k, v in sorted(rose.items()))
        return self._to(SERVING, f"the engine's counters rose: {shown}", t, True, True,
                        _ev("metrics", shown, t))

    def cpu_seen(self, t: float, cpu_seconds: float) -> None:
        if self._cpu is not None:
            t0, s0 = self._cpu
            if t > t0 and cpu_seconds > s0 and rate_reaches(cpu_seconds - s0, t - t0, self.cfg.cpu_busy_cores):
                self.cpu_moved_at = t
        self._cpu = (t, cpu_seconds)
        self.cpu_known = True

    def check_answered(self, t: float, ok: bool, latency_s: float | None, detail: str) -> ServingStatus | None:
        self.in_flight = False
        if ok:
            self.failures = 0
            self.last_done = t
            if latency_s is not None and latency_s > self.slow_s:
                why = f"slow: the check took {latency_s:.2f}s, over {self.slow_s:.2f}s " \
                      f"({SLOW_FACTOR:g}x the first generation)"
                return self._to(DEGRADED, why, t, True, True, _ev("probe:serving", detail, t))
            return self._to(SERVING, "the serving check answered", t, True, True, _ev("probe:serving", detail, t))
        self.failures += 1
        self.last_failed = _ev("probe:serving", detail, t)
        if self.status.state == HUNG:  # only progress ends hung: another failed check adds nothing
            return None
        if self.failures == 1:
            return self._to(DEGRADED, "one serving check failed", t, False, True, _ev("probe:serving", detail, t))
        return self._to(NOT_SERVING, f"{self.failures} serving checks failed in a row", t, False, True,
                        _ev("probe:serving", detail, t))

    def tick(self, now: float) -> ServingStatus | None:
        """What time alone changes: requests in flight with nothing completed; no progress of any kind."""
        quiet = now - self.last_done
        stalled = quiet >= self.cfg.stall_timeout
        failing = self.status.state in (NOT_SERVING, HUNG) or (self.status.state == DEGRADED and not self.status.ready)
        if stalled and (failing or self.busy > 0):
            idle_cpu = now - self.cpu_moved_at >= self.cfg.stall_timeout
            if idle_cpu or not self.cpu_known:
                cpu = "its process used no CPU" if self.cpu_known else "its process is not known"
                return self._to(HUNG, f"nothing completed for {quiet:.0f}s and {cpu}", now, False, False,
                                _ev("serving", f"no request completed for {quiet:.0f}s; {cpu}", now),
                                *([self.last_failed] if self.last_failed is not None else []))
            if self.busy > 0:
                return self._to(NOT_SERVING, f"{self.busy:g} requests in flight, nothing completed for {quiet:.0f}s",
                                now, False, True, _ev("metrics", f"{self.busy:g} in flight, none completed", now))
        return None

    def _to(self, state: str, reason: str, t: float, ready: bool, live: bool,
            *evidence: dict[str, object]) -> ServingStatus | None:
        """The new status when what it says changed (state, ready, live); None when it holds as it was."""
        old = self.status
        if (old.state, old.ready, old.live) == (state, ready, live):
            return None
        self.status = ServingStatus(state, reason, t, ready, live, evidence)
        return self.status
