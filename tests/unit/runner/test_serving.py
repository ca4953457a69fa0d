"""The supervising loop's serving step (firstlight/runner/serving.py): what the observers put on its queue
reaches the tracker, the server's CPU included, and the judge's CPU threshold is the tracker's."""

from __future__ import annotations

from firstlight.config import Config, JudgeConfig
from firstlight.probes.serving import CountersSample
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
