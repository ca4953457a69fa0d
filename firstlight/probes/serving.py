"""The serving checks' observers, after READY: they only observe and put what they saw on the caller's sink.

- passive, every ``scrape_s``: the engine's own counters (``EngineProfile.serving``) from its metrics endpoint,
  through the one HTTP layer with its read timeout (a wedged llama.cpp loop blocks its /metrics: the timeout
  ends it), and the CPU of the server's process tree;
- active, only when asked (``request_check``): one 1-token generation with the generation timeout, by one
  thread, so never more than one in flight.

Whether a check is due and what the answers mean is :mod:`firstlight.serving`'s to say.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from firstlight.config import ProbeConfig
from firstlight.engines.profile import Endpoints, ServingCounters
from firstlight.probes.ladder import Ladder, Listener
from firstlight.samplers.base import Guard
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.timeline import Level, Observation, ProcessSample
from firstlight.wire import NotJSON, Wire, WireError, clean_text
from firstlight.wire.content import parse_prometheus


@dataclass(frozen=True)
class CountersSample(Observation):
    """One scrape: the engine's ``done`` counters and the sum of its ``busy`` gauges (None: not scraped)."""

    done: dict[str, float] | None = None
    busy: float = 0.0
    error: str | None = None
    cpu_seconds: float | None = None  # the server's process tree, when known
    kind: ClassVar[str] = "serving_counters"


@dataclass(frozen=True)
class CheckAnswer(Observation):
    """The answer to one active check (a 1-token generation)."""

    ok: bool = False
    latency_s: float | None = None
    detail: str = ""
    kind: ClassVar[str] = "serving_check"


Sink = Callable[[Observation], None]
SLOT_TOKENS = "slots:n_decoded"  # the busy slots' tokens so far, a "done" counter (a rise: tokens still come)


class ServingProbe:
    def __init__(self, probe: ProbeConfig, endpoints: Endpoints, counters: ServingCounters, sink: Sink, *,
                 pid: int | None = None, model: str | None = None, scrape_s: float = 1.0,
                 clock: Callable[[], float] = time.time, listener: Listener | None = None) -> None:
        self.sink, self.clock, self.scrape_s = sink, clock, scrape_s
        self.counters = counters
        self.metrics_path = endpoints.metrics if counters.done or counters.busy else None
        self.slots_path = counters.slots
        one_token = dataclasses.replace(probe, max_tokens=1, model=probe.model or model)
        self.ladder = Ladder(one_token, clock, endpoints, listener=listener)  # a worker: its port, observed
        self.wire = Wire(probe.url, api_key=probe.api_key, connect_timeout=probe.connect_timeout)
        self.read_timeout = probe.read_timeout
        self.sampler = ProcessTreeSampler(pid, interval=scrape_s, clock=clock) if pid is not None else None
        self.stop_event = threading.Event()
        self._due = threading.Event()
        self._guard = Guard("serving", "the serving probe", clock=clock)  # both threads: one source of signals
        self._threads = [threading.Thread(target=self._guarded, args=(self._scrape_loop,),
                                          name="firstlight-serving-scrape", daemon=True),
                         threading.Thread(target=self._guarded, args=(self._check_loop,),
                                          name="firstlight-serving-check", daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self.stop_event.set()
        self._due.set()
        for t in self._threads:
            if t.is_alive() and t is not threading.current_thread():
                t.join(timeout=0.5)  # a request in flight ends by its own deadline; daemon threads
        self.ladder.close()
        self.wire.close()

    def request_check(self) -> None:
        """Ask for one active check; the checker thread sends it when the previous one has ended."""
        self._due.set()

    # -- threads ------------------------------------------------------------------------------------------
    def _guarded(self, loop: Callable[[], None]) -> None:
        self._guard.run(loop, self._emit, stop=self.stop_event, again_s=self.scrape_s)

    def _emit(self, obs: Observation) -> None:
        if not self.stop_event.is_set():
            self.sink(obs)

    def _scrape_loop(self) -> None:
        while not self.stop_event.is_set():
            self._emit(self.scrape())
            self.stop_event.wait(self.scrape_s)

    def scrape(self) -> CountersSample:
        cpu = None
        if self.sampler is not None:
            samples = [s for s in self.sampler.sample() if isinstance(s, ProcessSample) and s.alive]
            cpu = samples[0].cpu_seconds if samples else None
        slots = self._slots()
        t = self.clock()
        if self.metrics_path is None:
            if slots is not None:
                return CountersSample(self.clock(), {SLOT_TOKENS: slots[0]}, slots[1], None, cpu)
            return CountersSample(t, None, 0.0, None, cpu)
        try:
            r = self.wire.get(self.metrics_path, read_timeout=self.read_timeout)
        except WireError as e:
            return CountersSample(self.clock(), None, 0.0, f"GET {self.metrics_path}: {e}", cpu)
        if r.status in (404, 405, 501):  # no metrics (llama-server without --metrics): only active checks
            self.metrics_path = None
            return CountersSample(self.clock(), None, 0.0, f"GET {r.status}: no metrics; active checks only", cpu)
        if r.status != 200:
            return CountersSample(self.clock(), None, 0.0, f"GET {self.metrics_path} -> {r.status}", cpu)
        values = parse_prometheus(r.body.decode("utf-8", "replace"))
        done = {k: values[k] for k in self.counters.done if k in values}
        busy = sum(values.get(k, 0.0) for k in self.counters.busy)
        if slots is not None:  # llama's counters move only at a request's end or now and then: the slots per token
            done[SLOT_TOKENS] = slots[0]
            busy = max(busy, slots[1])
        return CountersSample(self.clock(), done, busy, None, cpu)

    def _slots(self) -> tuple[float, float] | None:
        """Tokens decoded so far by the busy slots, and how many are busy; None without a slots endpoint."""
        if self.slots_path is None:
            return None
        try:
            r = self.wire.get(self.slots_path, read_timeout=self.read_timeout)
        except WireError:
            return None
        if r.status in (404, 405, 501):  # --no-slots: the metrics and the checks tell
            self.slots_path = None
            return None
        try:
            data = r.json() if r.status == 200 else None
        except NotJSON:
            return None
        if not isinstance(data, list):
            return None
        decoded, busy = 0.0, 0.0
        for slot in data:
            if not isinstance(slot, dict) or slot.get("is_processing") is not True:
                continue
            busy += 1
            for nt in slot.get("next_token") or ():
                n = nt.get("n_decoded") if isinstance(nt, dict) else None
                if isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n):
                    decoded += n
        return decoded, busy

    def _check_loop(self) -> None:
        while not self.stop_event.is_set():
            self._due.wait()
            self._due.clear()
            if self.stop_event.is_set():
                return
            self._emit(self.check())

    def check(self) -> CheckAnswer:
        if self.ladder.listener is None and self.ladder.model is None and self.ladder.paths.models:
            # the model name, once, for the request body
            self.ladder.climb(Level.MODELS)
        p = self.ladder.generate()
        return CheckAnswer(self.clock(), p.ok, p.latency_s, clean_text(p.detail, 200))
