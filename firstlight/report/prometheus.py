"""Prometheus exposition of what firstlight sees (``--metrics-port``): scrape a cold start like any target.

Two kinds of series. The state of the current (or last) start: gauges that follow the live status line, the
verdict and phase as prometheus-client ``Enum`` metrics (one series per state, 1 for the current one), the
time spent in each phase, the serving state. And what a fleet counts across starts: ``firstlight_starts_total``
and the time-to-READY histogram, kept by this one exporter for as long as the process lives, so the sidecar's
re-watch loop (one exporter, many sessions) counts every start it watched.

Who the target is comes from ``firstlight_info{engine, model, deployment, version}`` (Prometheus' info-metric
pattern: join it ``on(instance, job)``), never from labels repeated on every series. The model label is the
last component of the (masked) model path or id: a home directory or a secret never becomes a label.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from firstlight._version import __version__
from firstlight.assessment import Assessment, Event
from firstlight.report import listener
from firstlight.report.base import QuietReporter, ReadCollectors
from firstlight.result import RunResult
from firstlight.serving import ServingStatus
from firstlight.vocab import (
    ALL_FAILURES,
    ALL_PHASES,
    FAILED,
    FINAL_VERDICTS,
    NOT_SERVING,
    PHASES,
    REGRESSION,
    SERVING,
    SERVING_GAUGE,
    SERVING_PHASE,
    STARTING,
    TIMEOUT,
    VERDICTS,
)

# Seconds to an hour: a llama.cpp start on a small model takes seconds, a large vLLM start with a cold
# torch.compile cache tens of minutes. Above 10 s the steps are at most 1.5x apart, so that a quantile read from
# the buckets is within 1.5x of the truth (the slow-start alert's factor); below, seconds hardly matter.
COLD_START_BUCKETS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800, 2700,
                      3600)
PREFLIGHT_STATUSES = ("ok", "warn", "fail")


def _num(v: float | int | None) -> float:
    return math.nan if v is None else float(v)


def member_label(url: str) -> str:
    """A member as a label: its ``host:port``, never a user, password, path or query the URL may carry."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        return f"[{host}]:{parts.port}" if ":" in host and parts.port else f"{host}:{parts.port}" if parts.port \
            else host
    except ValueError:
        return ""


def model_label(model: str | None) -> str:
    """A short, secret-free model label: the last path component of the (already masked) model path or id."""
    if not model:
        return ""
    return PurePosixPath(model).name or model  # PurePosixPath drops a trailing "/" itself


# (kind, label, what its success is about, what success means, (counter name, help), the failures' help)
_COLLECTOR_KINDS = (
    ("sampler", "sampler", "sampler's last sample", "worked", ("samples", "Samples the sampler took in this start"),
     "Samples of the sampler that raised in this start"),
    ("probe", "rung", "readiness rung's last check", "held", ("checks", "Checks of the readiness rung in this start"),
     "Checks of the readiness rung that did not hold in this start"),
)


class CollectorsCollector(Collector):
    """Each collector of the watch, read at the scrape (node_exporter's ``node_scrape_collector_success`` and
    ``_duration_seconds``, blackbox_exporter's ``probe_success``): the samplers by ``sampler``, the readiness
    rungs by ``rung``. A sampler that stopped working shows ``success 0`` and a rising failure count, never
    silence; a rung that does not hold yet shows ``success 0`` too, and its errors count only the checks that
    failed inside firstlight."""

    def __init__(self) -> None:
        self.read: ReadCollectors | None = None

    def collect(self) -> Iterator[Any]:
        read, ok = self.read, True
        try:
            stats = read() if read is not None else []
        except Exception:  # a collector's state being replaced under the scrape: say so, serve the rest
            stats, ok = [], False
        read_ok = GaugeMetricFamily("firstlight_collectors_read_success", "1 when this scrape could read the "
                                    "samplers' and rungs' state")
        read_ok.add_metric([], 1.0 if ok else 0.0)
        yield read_ok
        for kind, label, what, held, runs_help, failed_help in _COLLECTOR_KINDS:
            mine = [s for s in stats if s.kind == kind]
            success = GaugeMetricFamily(f"firstlight_{kind}_success", f"1 when the {what} {held}, 0 when not, NaN "
                                        "before the first", labels=[label])
            duration = GaugeMetricFamily(f"firstlight_{kind}_duration_seconds", f"Wall time of the {what}",
                                         labels=[label])
            runs = CounterMetricFamily(f"firstlight_{kind}_{runs_help[0]}", runs_help[1], labels=[label])
            failures = CounterMetricFamily(f"firstlight_{kind}_failures", failed_help, labels=[label])
            for st in mine:
                success.add_metric([st.name], math.nan if st.success is None else float(st.success))
                duration.add_metric([st.name], _num(st.duration_s))
                runs.add_metric([st.name], st.runs)
                failures.add_metric([st.name], st.failures)
            yield from (success, duration, runs, failures)
            if kind == "probe":
                errors = CounterMetricFamily("firstlight_probe_errors", "Checks of the rung that failed inside "
                                             "firstlight (a bug, or an answer nobody foresaw), not because of the "
                                             "server, in this start", labels=[label])
                for st in mine:
                    errors.add_metric([st.name], st.errors)
                yield errors


class PrometheusExporter(QuietReporter):
    def __init__(self, port: int, addr: str = "127.0.0.1", deployment: str | None = None) -> None:
        """Listens at once; raises OSError when the port is taken."""
        r = self.registry = CollectorRegistry()
        self._deployment = deployment
        self._info = {"engine": "", "model": "", "deployment": deployment or "", "version": __version__}
        self.info = Info("firstlight", "Who is watched: engine, model (last path component), deployment, "
                         "firstlight's version", registry=r)
        self.info.info(self._info)
        self.verdict_ = Enum("firstlight_verdict", "The verdict so far", states=list(VERDICTS), registry=r)
        self.phase = Enum("firstlight_phase", "The startup phase (serving after READY)", states=list(ALL_PHASES),
                          registry=r)
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
        self.budget = Gauge("firstlight_phase_budget_seconds", "The current phase's budget learned from this "
                            "deployment's good starts; NaN without one", registry=r)
        self.budget_used = Gauge("firstlight_phase_budget_used_ratio", "Share of the current phase's learned budget "
                                 "used (above 1: past it); NaN without one", registry=r)
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
        # -- for a fleet ----------------------------------------------------------------------------------------
        self.start_time = Gauge("firstlight_start_time_seconds", "When the current start began (Unix time)",
                                registry=r)
        self.ready_time = Gauge("firstlight_ready_time_seconds", "When the current start reached READY (Unix "
                                "time); NaN before", registry=r)
        self.phase_seconds = Gauge("firstlight_phase_seconds", "Seconds the current or last start spent in each "
                                   "phase so far", ["phase"], registry=r)
        self.starts = Counter("firstlight_starts", "Starts watched to a verdict, by verdict and failure category",
                              ["verdict", "failure"], registry=r)
        self.time_to_ready = Histogram("firstlight_time_to_ready_seconds", "Cold-start time of the starts that "
                                       "reached READY", buckets=COLD_START_BUCKETS, registry=r)
        self.baseline = Gauge("firstlight_cold_start_baseline_seconds", "This deployment's baseline cold start, "
                              "from firstlight's history; NaN when none", registry=r)
        # 0 before READY too: a fleet sums it (NaN would poison the sum); the alert pairs it with the READY time
        self.serving_gauge = Gauge("firstlight_serving", "Serving state: 1 serving, 0.5 degraded, 0 not serving "
                                   "(hung, or not READY yet)", registry=r)
        self.spec_rate = Gauge("firstlight_spec_decoding_acceptance_rate", "Speculative decoding: accepted / "
                               "drafted tokens in the after-READY benchmark; NaN when not measured", registry=r)
        self.spec_length = Gauge("firstlight_spec_decoding_mean_acceptance_length", "Speculative decoding: mean "
                                 "tokens per verify step in the after-READY benchmark; NaN when not measured",
                                 registry=r)
        self.bench_tps = Gauge("firstlight_bench_output_tokens_per_second", "Output tokens per second of the "
                               "after-READY benchmark; NaN when none ran", registry=r)
        self.forecast = Gauge("firstlight_forecast_seconds", "The whole start as forecast before it began "
                              "(firstlight.forecast); NaN when nothing forecast it", registry=r)
        self.forecast_error = Gauge("firstlight_forecast_error_ratio", "The last start's time to READY against its "
                                    "forecast: (taken - forecast) / forecast; NaN before READY or without one",
                                    registry=r)
        self.forecast_phase_error = Gauge("firstlight_forecast_phase_error_seconds", "Each phase's seconds taken "
                                          "minus its forecast, for the last start", ["phase"], registry=r)
        self.preflight = Gauge("firstlight_preflight_checks", "Preflight checks of the last start, by status",
                               ["status"], registry=r)
        # Every known (verdict, failure) pair exists from the first scrape at 0: a counter series that first
        # appears at 1 is invisible to increase() and rate(), so the first failure would never alert.
        for v in (*FINAL_VERDICTS, REGRESSION):
            if v != FAILED:
                self.starts.labels(v, "")
        for category in ALL_FAILURES:
            self.starts.labels(FAILED, category)
        for status in PREFLIGHT_STATUSES:
            self.preflight.labels(status).set(0)
        self._collectors = CollectorsCollector()
        r.register(self._collectors)
        # a group's leader only (group_update): created with the first update
        self.group_verdict: Enum | None = None
        self.group_serving: Gauge | None = None
        self._restarts_told: dict[tuple[str, str], int] = {}  # each member's restarts already counted
        self.member_ready: Gauge | None = None
        self.member_progress: Gauge | None = None
        self.member_unreachable: Gauge | None = None
        self.member_restarts: Counter | None = None
        self._phases: list[tuple[str, float]] = []  # (name, start) of the current start
        self._t0: float | None = None
        self._pending = False  # a verdict was given and its start is not counted yet
        self._timeout_counts = True  # a --timeout ends the start (False: the sidecar watches the same start on)
        self._reset_start()
        self.verdict_.state("starting")
        self.phase.state("process_start")
        self._server, self._thread = start_http_server(port, addr=addr, registry=r)

    def _reset_start(self) -> None:
        for g in (self.ready_time, self.cold_start, self.first_gen, self.baseline, self.spec_rate, self.spec_length,
                  self.bench_tps, self.forecast, self.forecast_error):
            g.set(math.nan)
        self.forecast_phase_error.clear()
        self.ready.set(0)
        self.serving_state(NOT_SERVING)
        self.phase_seconds.clear()

    # -- the Reporter protocol -------------------------------------------------------------------------------
    def started(self, info: dict[str, Any]) -> None:
        self._t0 = info.get("started_at")
        self._timeout_counts = info.get("timeout_is_verdict", True) is not False
        self._phases = [("process_start", self._t0)] if self._t0 is not None else []
        self.start_time.set(_num(self._t0))
        self._reset_start()
        self.verdict_.state("starting")
        self.phase.state("process_start")
        self._set_info(engine=info.get("engine"), model=model_label(info.get("model")))

    def event(self, ev: Event, a: Assessment) -> None:
        if ev.type == "phase" and ev.message in PHASES:
            self.phase.state(ev.message)
            if ev.data.get("relabel") and self._phases and self._phases[-1][0] == ev.data["relabel"]:
                self._phases[-1] = (ev.message, self._phases[-1][1])  # the same span, renamed from where it began
            else:
                self._phases.append((ev.message, ev.t))

    def status(self, a: Assessment) -> None:
        p = a.progress
        self.level.set(int(a.level))
        self.elapsed.set(a.elapsed_s)
        self.weights.set(_num(p.weights_fraction))
        self.read_rate.set(_num(p.read_rate))
        self.eta_weights.set(_num(p.eta_weights_s))
        self.eta_total.set(_num(p.eta_total_s))
        pb = p.phase_budget or {}
        self.budget.set(_num(pb.get("budget_s")))
        self.budget_used.set(_num(pb.get("used")))
        self.since_log.set(_num(p.since_last_log_s))
        self.cpu.set(_num(p.cpu_cores))
        self.rss.set(p.rss_bytes)
        self.gpu.set(_num(p.gpu_memory_bytes))
        if self._t0 is not None:
            self._render_phases([(n, s, None) for n, s in self._phases], self._t0 + a.elapsed_s)

    def verdict(self, result: RunResult) -> None:
        self._render(result)
        self._pending = True  # counted at its summary, which carries the history's comparison (regression)

    def summary(self, result: RunResult) -> None:
        self._render(result)
        if self._pending and result.verdict != STARTING:
            self._pending = False
            if result.verdict == TIMEOUT and not self._timeout_counts:
                return  # the sidecar watches the same start on: one slow start is one start, not one per --timeout
            self.starts.labels(result.verdict, result.failure or "").inc()
            if result.serving and result.cold_start_s is not None:
                self.time_to_ready.observe(result.cold_start_s)

    def _render(self, result: RunResult) -> None:
        self._set_info(engine=result.engine)  # identified while it started (log lines, endpoints)
        self.verdict_.state(result.verdict if result.verdict in VERDICTS else FAILED)
        serving = result.serving and result.phase == "ready"
        self.ready.set(1 if serving else 0)
        self.ready_time.set(_num(result.ready_at))
        self.serving_state(SERVING if serving else NOT_SERVING)
        if serving:
            self.phase.state(SERVING_PHASE)
        self.cold_start.set(_num(result.cold_start_s))
        self.first_gen.set(_num((result.first_generation or {}).get("latency_s")))
        if result.phases:
            self._render_phases([(p["name"], p["start"], p.get("end")) for p in result.phases], result.ended_at)
        self._render_after_ready(result)
        if result.baseline and result.baseline.get("deployment") and not self._deployment:
            self._set_info(deployment=str(result.baseline["deployment"])[:12])  # the history's deployment hash

    def serving_state(self, state: str) -> None:
        """The serving state: ``serving``, ``degraded``, ``not_serving`` or ``hung`` (vocab.SERVING_GAUGE)."""
        self.serving_gauge.set(SERVING_GAUGE.get(state, 0.0))

    def serving(self, status: ServingStatus, changed: bool) -> None:
        self.serving_state(status.state)

    def collectors(self, read: ReadCollectors) -> None:
        """The watch's samplers and rungs, read at each scrape from now on (a new watch gives its own)."""
        self._collectors.read = read

    def group_update(self, members: list[dict[str, Any]], group: dict[str, Any]) -> None:
        """On a group's leader (``--member``): the group verdict and each member's state, as runner/members.py
        tells them (rendered, not decided). The series appear with the first update: a node without members has
        none, rather than a group forever ``starting``."""
        if self.group_verdict is None:
            r = self.registry
            self.group_verdict = Enum("firstlight_group_verdict", "The verdict of the group this leader answers for "
                                      "(every member ready too)", states=list(VERDICTS), registry=r)
            self.group_serving = Gauge("firstlight_group_serving", "1 while the group serves: the leader and every "
                                       "member ready", registry=r)
            self.member_ready = Gauge("firstlight_group_member_ready", "1 while a member's own /readyz answers 200",
                                      ["member", "node_rank"], registry=r)
            self.member_progress = Gauge("firstlight_group_member_last_progress_timestamp_seconds", "When a "
                                         "member last progressed (Unix time); NaN when never read",
                                         ["member", "node_rank"], registry=r)
            self.member_unreachable = Gauge("firstlight_group_member_unreachable", "1 while a member's "
                                            "firstlight cannot be read", ["member", "node_rank"], registry=r)
            self.member_restarts = Counter("firstlight_group_member_restarts", "Restarts of a member the leader "
                                           "saw (its engine's pid or its start changed)", ["member", "node_rank"],
                                           registry=r)
        verdict = group.get("verdict")
        if verdict in VERDICTS:
            self.group_verdict.state(verdict)
        assert self.group_serving is not None and self.member_ready is not None
        assert self.member_progress is not None and self.member_unreachable is not None
        assert self.member_restarts is not None
        self.group_serving.set(1.0 if group.get("serving") else 0.0)
        for m in members:
            rank = m.get("node_rank")
            labels = (member_label(str(m.get("url") or "")), "" if rank is None else str(rank))
            self.member_ready.labels(*labels).set(1.0 if m.get("ok") else 0.0)
            self.member_progress.labels(*labels).set(_num(m.get("last_progress_at")))
            self.member_unreachable.labels(*labels).set(1.0 if m.get("error") else 0.0)
            counter = self.member_restarts.labels(*labels)  # the series from the first read: 0 until one
            restarts, told = m.get("restarts"), self._restarts_told.get(labels, 0)
            if isinstance(restarts, int) and restarts > told:
                counter.inc(restarts - told)
                self._restarts_told[labels] = restarts

    def close(self) -> None:
        listener.stop(self._server)

    # -- rendering -------------------------------------------------------------------------------------------
    def _set_info(self, **labels: str | None) -> None:
        changed = {k: v for k, v in labels.items() if v and v != self._info.get(k)}
        if changed:
            self._info.update(changed)
            self.info.info(self._info)

    def _render_phases(self, spans: list[tuple[str, float, float | None]], now: float) -> None:
        """Seconds per phase: each span until the next one began (or its own end), the last one until now."""
        totals: dict[str, float] = {}
        for i, (name, start, end) in enumerate(spans):
            stop = end if end is not None else (spans[i + 1][1] if i + 1 < len(spans) else now)
            totals[name] = totals.get(name, 0.0) + max(0.0, stop - start)
        for name, seconds in totals.items():
            if name in PHASES:
                self.phase_seconds.labels(name).set(round(seconds, 3))

    def _render_after_ready(self, result: RunResult) -> None:
        spec = result.spec_decoding or {}
        self.spec_rate.set(_num(spec.get("acceptance_rate")))
        self.spec_length.set(_num(spec.get("mean_acceptance_length")))
        self.bench_tps.set(_num((result.bench or {}).get("output_throughput")))
        self.baseline.set(_num((result.baseline or {}).get("cold_start_s")))
        said = result.forecast or {}
        self.forecast.set(_num(said.get("total_s")))
        graded = said.get("graded") or {}
        self.forecast_error.set(_num((graded.get("total") or {}).get("error")))
        for phase, err in (graded.get("phases") or {}).items():
            if phase in PHASES and isinstance(err, dict):
                self.forecast_phase_error.labels(phase).set(_num(err.get("error_s")))
        checks = (result.preflight or {}).get("checks") or []
        for status in PREFLIGHT_STATUSES:
            self.preflight.labels(status).set(sum(1 for c in checks if c.get("status") == status))
