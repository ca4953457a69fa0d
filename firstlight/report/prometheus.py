"""Prometheus exposition of what firstlight sees (``--metrics-port``): scrape a cold start like any target.

Gauges follow the live status line; the verdict and phase are prometheus-client ``Enum`` metrics (one series
per state, 1 for the current one). Under supervision after READY the endpoint stays up, so a dashboard can
show `firstlight_ready` and the measured cold start next to the engine's own metrics.
"""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Enum, Gauge, start_http_server

from firstlight.judge import Assessment, Event
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.serving import ServingStatus
from firstlight.vocab import FAILED, PHASES, SERVING_GAUGE, VERDICTS


def _num(v: float | int | None) -> float:
    return math.nan if v is None else float(v)


class PrometheusExporter(QuietReporter):
    def __init__(self, port: int, addr: str = "127.0.0.1") -> None:
        """Listens at once; raises OSError when the port is taken."""
        r = self.registry = CollectorRegistry()
        self.verdict_ = Enum("firstlight_verdict", "The verdict so far", states=list(VERDICTS), registry=r)
        self.phase = Enum("firstlight_phase", "The startup phase", states=[*PHASES, "serving"], registry=r)
        self.level = Gauge("firstlight_readiness_level", "Highest readiness level that holds: 0 none, 1 process, "
                           "2 port, 3 http, 4 health, 5 models, 6 generation", registry=r)
        self.ready = Gauge("firstlight_ready", "1 once a real generation returned and checked out", registry=r)
        self.elapsed = Gauge("firstlight_elapsed_seconds", "Seconds since firstlight started watching", registry=r)
        self.weights = Gauge("firstlight_weights_fraction", "Fraction of the weights read (0..1)", registry=r)
        self.read_rate = Gauge("firstlight_read_bytes_per_second", "Bytes read per second by the server's "
                               "process tree", registry=r)
        self.eta_weights = Gauge("firstlight_weights_eta_seconds", "Seconds until the weights are read",
                                 registry=r)
        self.eta_total = Gauge("firstlight_ready_eta_seconds", "Seconds until READY, from this deployment's "
                               "history", registry=r)
        self.since_log = Gauge("firstlight_seconds_since_last_log_line", "Seconds since the server's last log "
                               "line", registry=r)
        self.cpu = Gauge("firstlight_server_cpu_cores", "CPU used by the server's process tree, in cores",
                         registry=r)
        self.rss = Gauge("firstlight_server_rss_bytes", "Resident memory of the server's process tree", registry=r)
        self.gpu = Gauge("firstlight_gpu_memory_used_bytes", "GPU memory used, all devices", registry=r)
        self.cold_start = Gauge("firstlight_cold_start_seconds", "Seconds from the server's start to READY",
                                registry=r)
        self.first_gen = Gauge("firstlight_first_generation_seconds", "Latency of the generation that made "
                               "READY", registry=r)
        self.serving_ = Gauge("firstlight_serving", "After READY, the serving checks: 1 serving, 0.5 degraded, "
                              "0 not serving or hung (NaN before READY)", registry=r)
        self.serving_.set(math.nan)
        self.verdict_.state("starting")
        self.phase.state("process_start")
        self._server, self._thread = start_http_server(port, addr=addr, registry=r)

    def event(self, ev: Event, a: Assessment) -> None:
        if ev.type == "phase" and ev.message in PHASES:
            self.phase.state(ev.message)

    def status(self, a: Assessment) -> None:
        p = a.progress
        self.level.set(int(a.level))
        self.elapsed.set(a.elapsed_s)
        self.weights.set(_num(p.weights_fraction))
        self.read_rate.set(_num(p.read_rate))
        self.eta_weights.set(_num(p.eta_weights_s))
        self.eta_total.set(_num(p.eta_total_s))
        self.since_log.set(_num(p.since_last_log_s))
        self.cpu.set(_num(p.cpu_cores))
        self.rss.set(p.rss_bytes)
        self.gpu.set(_num(p.gpu_memory_bytes))

    def verdict(self, result: RunResult) -> None:
        self.summary(result)

    def summary(self, result: RunResult) -> None:
        self.verdict_.state(result.verdict if result.verdict in VERDICTS else FAILED)
        serving = result.serving and result.phase == "ready"
        self.ready.set(1 if serving else 0)
        if serving:
            self.phase.state("serving")
        self.cold_start.set(_num(result.cold_start_s))
        self.first_gen.set(_num((result.first_generation or {}).get("latency_s")))

    def serving(self, status: ServingStatus, changed: bool) -> None:
        self.serving_.set(SERVING_GAUGE.get(status.state, 0.0))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
