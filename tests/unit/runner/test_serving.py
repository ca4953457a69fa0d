"""The supervising loop's serving step (firstlight/runner/serving.py): what the observers put on its queue
reaches the tracker, the server's CPU included, and the judge's CPU threshold is the tracker's."""

from __future__ import annotations

from firstlight.config import Config, JudgeConfig
from firstlight.probes.serving import CheckAnswer, CountersSample
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.runner.serving import ServingWatch, serving_config
from firstlight.vocab import HUNG, NOT_SERVING


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _watch(clock: Clock) -> ServingWatch:
    cfg = Config(serving_interval=10.0, judge=JudgeConfig(stall_timeout=30.0))
    result = RunResult("ready", "ready", 0.0, 1.0, "generic", "http://127.0.0.1:1", ready_at=0.0)
    watch = ServingWatch(cfg, result, QuietReporter(), clock=clock)
    watch.started = True  # the step without the observer threads: the test is the observer, through the queue
    return watch


def _busy_engine(cpu_cores: float) -> str:
    """Requests in flight, none completing, the server's process tree using ``cpu_cores``, for 40 s."""
    clock = Clock()
    watch = _watch(clock)
    try:
        for t in range(0, 41):
            clock.now = float(t)
            watch.q.put(CountersSample(float(t), done={"vllm:request_success_total": 5.0}, busy=1.0,
                                       cpu_seconds=100.0 + t * cpu_cores))
            watch.step()
        return watch.status.state
    finally:
        watch.stop()


def test_the_servers_cpu_reaches_the_tracker_so_an_engine_that_computes_is_not_hung():
    assert _busy_engine(1.0) == NOT_SERVING  # computing, not completing: not serving, but alive
    assert _busy_engine(0.0) == HUNG  # the same without CPU: hung


def test_the_serving_checks_use_the_judges_cpu_threshold_and_stall_timeout():
    sc = serving_config(Config(judge=JudgeConfig(stall_timeout=77.0, cpu_busy_cores=0.3), serving_interval=4.0))
    assert (sc.cpu_busy_cores, sc.stall_timeout, sc.interval) == (0.3, 77.0, 4.0)
    from firstlight.config import ProbeConfig
    assert serving_config(Config(probe=ProbeConfig(generation_timeout=33.0))).generation_timeout == 33.0


def test_the_counters_are_scraped_every_second_or_every_quarter_interval_when_shorter():
    """README: "scraped every second (every `--serving-interval`/4 when shorter)"."""
    def scrape(interval: float) -> float:
        result = RunResult("ready", "ready", 0.0, 1.0, "generic", "http://127.0.0.1:1", ready_at=0.0)
        watch = ServingWatch(Config(serving_interval=interval), result, QuietReporter(), clock=Clock())
        return watch.probe.scrape_s

    assert scrape(10.0) == 1.0 and scrape(4.0) == 1.0
    assert scrape(2.0) == 0.5 and scrape(3.0) == 0.75


def test_a_workers_check_is_its_port_or_its_connection_to_its_head_and_a_servers_is_a_generation():
    """``worker_listener``: the check the run's role and head ask for, bound to the worker's pid; none for a server
    or a worker firstlight cannot see (no pid)."""
    from unittest import mock

    from firstlight.runner import serving

    with mock.patch.object(serving, "worker_listening", return_value=(True, "port")) as listening, \
            mock.patch.object(serving, "worker_connected", return_value=(True, "head")) as connected:
        port = serving.worker_listener(JudgeConfig(role="worker"), 7, "http://127.0.1.2:50111")
        head = serving.worker_listener(JudgeConfig(role="worker", head=("10.0.0.1",)), 8, "http://127.0.0.1:8000")
        assert port is not None and port() == (True, "port") and listening.call_args.args == (7, 50111)
        assert head is not None and head() == (True, "head") and connected.call_args.args == (8, ("10.0.0.1",))
    assert serving.worker_listener(JudgeConfig(), 7, "http://127.0.0.1:8000") is None
    assert serving.worker_listener(JudgeConfig(role="worker"), None, "http://127.0.0.1:8000") is None
    assert [serving.worker_kind(j) for j in (JudgeConfig(), JudgeConfig(role="worker"),
                                            JudgeConfig(role="worker", head=("h",)))] == ["", "port", "head"]


class Told(QuietReporter):
    """What the watch told its reporters: (state, reason, changed) per step."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str, bool]] = []

    def serving(self, status, changed: bool) -> None:  # type: ignore[no-untyped-def]
        self.told.append((status.state, status.reason, changed))


STALL_30 = JudgeConfig(stall_timeout=30.0)


def _wired(clock: Clock, *, first_latency: float | None = 1.0, ready_at: float | None = 0.0,
           judge: JudgeConfig = STALL_30, pid: int | None = None,
           record: list[object] | None = None) -> tuple[ServingWatch, list[tuple[str, str, bool]], list[str]]:
    """A watch whose observer threads never start: the test puts what they would see on its queue and records
    what the watch asks of them."""
    result = RunResult("ready", "ready", 0.0, 1.0, "vllm", "http://127.0.0.1:1", ready_at=ready_at,
                       first_generation=None if first_latency is None else {"latency_s": first_latency})
    told, asked = Told(), []
    watch = ServingWatch(Config(serving_interval=10.0, judge=judge), result, told, pid=pid, model="m",
                         record=None if record is None else record.append, clock=clock)
    watch.probe.start = lambda: asked.append("start")  # type: ignore[method-assign]
    watch.probe.request_check = lambda: asked.append(f"check at {clock.now:g}")  # type: ignore[method-assign]
    return watch, told.told, asked


def test_the_watch_tells_its_first_state_as_a_change_then_each_steps_state_and_asks_for_checks_when_due():
    clock = Clock()
    record: list[object] = []
    watch, told, asked = _wired(clock, record=record)
    assert watch.step() is watch.status and told == [("serving", "READY: a real generation returned", False)]
    clock.now = 10.0
    watch.step()
    assert asked == []  # not started: no checks, even when one would be due
    clock.now = 0.0
    watch.start()
    assert asked == ["start"] and told[-1] == ("serving", "READY: a real generation returned", True)
    clock.now = 5.0
    assert watch.step() is watch.status and told[-1][2] is False and asked == ["start"]
    clock.now = 10.0  # nothing completed for the interval: a check is due, once
    watch.step()
    watch.step()
    assert asked == ["start", "check at 10"] and watch.tracker.last_check == 10.0
    # answered in 5 s: under 10 x the first generation's 1 s, so still serving (no change)
    watch.q.put(CheckAnswer(11.0, ok=True, latency_s=5.0, detail="ok"))
    clock.now = 11.0
    watch.step()
    assert told[-1] == ("serving", "READY: a real generation returned", False) and record == []
    watch.q.put(CheckAnswer(12.0, ok=False, latency_s=None, detail="connect refused"))
    clock.now = 12.0
    assert watch.step().state == "degraded"
    assert told[-1][0] == "degraded" and told[-1][2] is True and "connect refused" in told[-1][1] + str(
        watch.status.evidence) and record == [watch.status]


def test_a_watch_without_a_first_generation_takes_the_slow_floor_and_without_ready_at_its_clock():
    clock = Clock()
    clock.now = 42.0
    watch, told, _ = _wired(clock, first_latency=None, ready_at=None)
    assert watch.status.since == 42.0
    watch.start()
    watch.q.put(CheckAnswer(43.0, ok=True, latency_s=5.0, detail="ok"))  # over the 2 s floor: slow
    clock.now = 43.0
    assert watch.step().state == "degraded" and told[-1][2] is True


def test_time_alone_turns_a_failing_server_hung_through_the_step():
    clock = Clock()
    watch, told, _ = _wired(clock)
    watch.start()
    for t in (1.0, 2.0):
        watch.q.put(CheckAnswer(t, ok=False, detail="refused"))
        clock.now = t
        watch.step()
    assert watch.status.state == "not_serving"
    clock.now = 31.0  # the stall timeout, no observation at all: only the step's own tick can see it
    assert watch.step().state == HUNG and told[-1][:1] == (HUNG,) and told[-1][2] is True


def test_the_watch_wires_its_observers_to_its_queue_clock_pid_model_and_the_workers_check():
    import os

    clock = Clock()
    watch, _, _ = _wired(clock, pid=os.getpid())
    p = watch.probe
    assert p.sink == watch.q.put and p.clock is clock and p.metrics_path == "/metrics"  # vLLM's counters
    assert p.sampler is not None and p.sampler.pid == os.getpid()
    assert p.ladder.cfg.model == "m" and p.ladder.listener is None
    worker, _, _ = _wired(clock, pid=os.getpid(), judge=JudgeConfig(role="worker"))
    assert worker.probe.ladder.listener is not None and worker.status.reason == "READY: the worker's port listens"
