"""The serving checks after READY: the tracker's rules (firstlight.serving), what the endpoints, systemd's watchdog
and Prometheus make of its status, and the sidecar's --pid-from never taking an older process (real processes).

The in-process tests of this subject; the others: ``tests/e2e/serving/test_serving.py``.
"""

from __future__ import annotations

import os
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from firstlight.report.prometheus import PrometheusExporter
from firstlight.report.readiness import answer
from firstlight.report.systemd import SystemdNotifier, watchdog_interval
from firstlight.serving import SLOW_FLOOR_S, ServingConfig, ServingStatus, ServingTracker
from firstlight.sim.fixtures import free_port
from firstlight.vocab import DEGRADED, HUNG, NOT_SERVING, SERVING, SERVING_GAUGE, SERVING_STATES

CFG = ServingConfig(interval=10.0, generation_timeout=5.0, stall_timeout=30.0)


def tracker(first_latency: float = 0.1) -> ServingTracker:
    return ServingTracker(CFG, ready_at=0.0, first_latency_s=first_latency)


def test_a_busy_server_gets_no_active_check_while_its_counters_rise():
    tr = tracker()
    for t in range(0, 60):
        tr.counters_seen(float(t), {"llamacpp:n_decode_total": float(t * 5)}, busy=1.0)
        assert not tr.want_check(t + 0.5), t
    assert tr.status.state == SERVING


def test_an_idle_server_gets_one_check_per_interval_and_never_two_in_flight():
    tr = tracker()
    assert not tr.want_check(9.9)
    assert tr.want_check(10.0)
    tr.check_sent(10.0)
    assert not tr.want_check(100.0)  # the first one has not answered: never a second in flight
    tr.check_answered(10.2, True, 0.2, "POST /v1/completions -> 200")
    assert not tr.want_check(19.9) and tr.want_check(20.3)


def test_interval_0_sends_no_check_ever():
    tr = ServingTracker(ServingConfig(interval=0.0), ready_at=0.0, first_latency_s=0.1)
    assert not tr.cfg.enabled and not tr.want_check(1e6)


def test_counters_that_do_not_rise_are_no_evidence_of_serving():
    tr = tracker()
    tr.counters_seen(1.0, {"vllm:request_success_total": 4.0}, busy=0.0)
    tr.counters_seen(9.0, {"vllm:request_success_total": 4.0}, busy=0.0)
    assert tr.want_check(10.0)


def test_one_failed_check_is_degraded_and_not_ready_two_are_not_serving_a_pass_recovers():
    tr = tracker()
    tr.check_sent(10.0)
    s = tr.check_answered(15.0, False, None, "POST /v1/completions: read timed out")
    assert s is not None and (s.state, s.ready, s.live) == (DEGRADED, False, True)
    assert "one serving check failed" in s.reason and s.evidence[0]["signal"] == "probe:serving"
    tr.check_sent(25.0)
    s = tr.check_answered(30.0, False, None, "POST /v1/completions: read timed out")
    assert s is not None and (s.state, s.ready) == (NOT_SERVING, False) and not s.feeds_watchdog
    tr.check_sent(40.0)
    s = tr.check_answered(40.1, True, 0.1, "POST /v1/completions -> 200")
    assert s is not None and (s.state, s.ready, s.live) == (SERVING, True, True)


def test_a_slow_check_is_degraded_but_still_ready_and_says_slow():
    tr = tracker(first_latency=0.5)  # 10 x 0.5 s = 5 s
    tr.check_sent(10.0)
    s = tr.check_answered(16.0, True, 6.0, "POST /v1/completions -> 200 in 6.00s")
    assert s is not None and (s.state, s.ready) == (DEGRADED, True) and s.reason.startswith("slow")
    tr.check_sent(30.0)
    assert tr.check_answered(30.5, True, 0.5, "ok").state == SERVING  # type: ignore[union-attr]
    fast = tracker(first_latency=0.01)
    assert fast.slow_s == SLOW_FLOOR_S  # a fast first answer does not make every busy moment "slow"


def test_not_serving_becomes_hung_when_the_process_used_no_cpu_either():
    tr = tracker()
    tr.cpu_seen(0.0, 100.0)
    tr.check_sent(10.0)
    tr.check_answered(15.0, False, None, "timed out")
    tr.cpu_seen(20.0, 100.0)
    assert tr.tick(29.0) is None  # not yet --stall-timeout since the last completion (0 s)
    tr.cpu_seen(31.0, 100.0)
    s = tr.tick(31.0)
    assert s is not None and (s.state, s.ready, s.live) == (HUNG, False, False)
    assert "used no CPU" in s.reason and not s.feeds_watchdog
    tr.check_sent(40.0)
    assert tr.check_answered(45.0, False, None, "timed out") is None  # hung holds until something completes
    s = tr.counters_seen(46.0, {"vllm:request_success_total": 1.0}, 0.0)
    assert s is None  # the first scrape is a baseline, not a rise
    s = tr.counters_seen(47.0, {"vllm:request_success_total": 2.0}, 0.0)
    assert s is not None and (s.state, s.ready, s.live) == (SERVING, True, True)


def test_requests_in_flight_with_nothing_completed_is_not_serving_not_hung_while_cpu_moves():
    tr = tracker()
    for t in range(0, 40):
        tr.cpu_seen(float(t), t * 1.0)  # one core busy
        tr.counters_seen(float(t), {"sglang:num_requests_total": 7.0}, busy=2.0)
    assert (tr.status.state, tr.status.live) == (NOT_SERVING, True)
    assert "2 requests in flight" in tr.status.reason


def test_the_endpoints_follow_the_serving_status():
    base = {"verdict": "ready", "reached_ready": True}
    ok = ServingStatus(SERVING, "", 0, True, True).to_dict()
    failed = ServingStatus(DEGRADED, "", 0, False, True).to_dict()
    hung = ServingStatus(HUNG, "", 0, False, False).to_dict()
    assert (answer("/readyz", {**base, "serving": ok}), answer("/livez", {**base, "serving": ok})) == (200, 200)
    assert (answer("/readyz", {**base, "serving": failed}), answer("/livez", {**base, "serving": failed})) == \
        (503, 200)
    assert (answer("/readyz", {**base, "serving": hung}), answer("/livez", {**base, "serving": hung})) == (503, 503)
    assert answer("/readyz", {**base, "serving": None}) == 200  # no checks (--serving-interval 0)


def test_the_prometheus_gauge_says_1_serving_half_degraded_0_otherwise():
    assert SERVING_GAUGE == {SERVING: 1.0, DEGRADED: 0.5, NOT_SERVING: 0.0, HUNG: 0.0}
    assert set(SERVING_GAUGE) == set(SERVING_STATES)
    port = free_port()
    exp = PrometheusExporter(port)
    try:
        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                return next(line for line in r.read().decode().splitlines()
                            if line.startswith("firstlight_serving "))
        assert scrape() == "firstlight_serving 0.0"  # before READY: not serving (a fleet's sum stays a number)
        for state, value in SERVING_GAUGE.items():
            exp.serving(ServingStatus(state, "", 0, state == SERVING, state != HUNG), True)
            assert float(scrape().split()[1]) == value, state
    finally:
        exp.close()


@pytest.fixture
def notify_socket(tmp_path: Path):
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0)
    yield path, sock
    sock.close()


def _datagrams(sock: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except BlockingIOError:
            return out


def test_watchdog_is_fed_while_serving_and_starved_when_not_serving_or_hung(notify_socket):
    path, sock = notify_socket
    n = SystemdNotifier(path, watchdog_usec="200000", watchdog_pid=str(os.getpid()))  # WatchdogSec=0.2
    try:
        assert n.watchdog_s == 0.2
        serving = ServingStatus(SERVING, "ok", 0, True, True)
        deadline = time.monotonic() + 30
        fed = 0
        while fed < 3 and time.monotonic() < deadline:  # at half the interval: a few within a second or so
            n.serving(serving, False)
            fed += _datagrams(sock).count("WATCHDOG=1")
        assert fed >= 3
        for state, live in ((NOT_SERVING, True), (HUNG, False)):
            status = ServingStatus(state, "checks failed", 0, False, live)
            n.serving(status, True)
            assert [d for d in _datagrams(sock) if "WATCHDOG=1" in d] == []
            end = time.monotonic() + 0.5  # longer than the 0.1 s feeding period: it would have fed by now
            while time.monotonic() < end:
                n.serving(status, False)
            assert "WATCHDOG=1" not in _datagrams(sock), state
    finally:
        n.close()


def test_watchdog_is_fed_while_the_start_progresses_and_not_once_it_is_hung(notify_socket):
    from tests.support.readiness import _assessment

    path, sock = notify_socket
    n = SystemdNotifier(path, watchdog_usec="200000", watchdog_pid="")
    try:
        n.status(_assessment("starting"))
        assert "WATCHDOG=1" in "\n".join(_datagrams(sock))
        end = time.monotonic() + 0.5  # longer than the 0.1 s feeding period
        while time.monotonic() < end:
            n.status(_assessment("hung"))
        assert "WATCHDOG=1" not in "\n".join(_datagrams(sock))
    finally:
        n.close()


def test_watchdog_interval_is_ours_only():
    assert watchdog_interval("30000000", None) == 30.0
    assert watchdog_interval("30000000", str(os.getpid())) == 30.0
    assert watchdog_interval("30000000", "1") is None  # meant for another process
    assert watchdog_interval(None, None) is None and watchdog_interval("0", None) is None
    assert watchdog_interval("x", None) is None


def test_with_checks_off_the_supervising_loop_still_feeds_the_watchdog_and_shows_no_state(notify_socket):
    from firstlight.config import Config
    from firstlight.result import RunResult
    from firstlight.runner.serving import ServingWatch

    path, sock = notify_socket
    n = SystemdNotifier(path, watchdog_usec="200000", watchdog_pid="")
    result = RunResult("ready", "ready", 0.0, 1.0, "generic", "http://127.0.0.1:1", ready_at=1.0)
    watch = ServingWatch(Config(serving_interval=0), result, n)
    try:
        watch.start()
        watch.step()
        assert _datagrams(sock) == ["WATCHDOG=1"]  # fed; and no STATUS= change: no serving state without checks
    finally:
        watch.stop()
        n.close()


def _answered(first_latency: float | None, latency: float) -> str:
    tr = ServingTracker(CFG, ready_at=0.0, first_latency_s=first_latency)
    tr.check_sent(10.0)
    tr.check_answered(10.0 + latency, True, latency, f"POST /v1/completions -> 200 in {latency:.2f}s")
    return tr.status.state


@pytest.mark.parametrize("first, at_bound", [(0.5, 5.0), (1.0, 10.0), (3.0, 30.0)])
def test_a_check_is_slow_only_above_10x_the_first_generation(first: float, at_bound: float):
    assert _answered(first, at_bound) == SERVING  # exactly 10 x: not slow
    assert _answered(first, at_bound * 1.02) == DEGRADED  # 2 % over it: slow (a factor of 9 or 11 fails one)
    assert _answered(first, at_bound * 0.92) == SERVING


def test_a_slow_check_says_the_factor_10_and_the_bound():
    tr = ServingTracker(CFG, ready_at=0.0, first_latency_s=0.5)
    tr.check_sent(10.0)
    s = tr.check_answered(16.0, True, 6.0, "ok")
    assert s is not None and s.reason == "slow: the check took 6.00s, over 5.00s (10x the first generation)"


@pytest.mark.parametrize("first", [None, 0.0, 0.01, 0.15, 0.199])
def test_the_slow_bound_is_never_below_2s(first: float | None):
    assert _answered(first, 2.0) == SERVING  # 10 x a fast first answer is under 2 s: 2 s is the bound
    assert _answered(first, 2.05) == DEGRADED
    assert _answered(first, 1.9) == SERVING


def test_after_a_failed_check_the_next_is_sent_one_interval_after_it_not_at_every_step():
    tr = ServingTracker(CFG, ready_at=0.0, first_latency_s=0.1)
    assert tr.want_check(10.0)
    tr.check_sent(10.0)
    tr.check_answered(15.0, False, None, "POST /v1/completions: read timed out")
    assert tr.status.state == DEGRADED
    for step in (15.0, 15.2, 17.0, 19.9):  # the supervising loop's steps (every 0.2 s) after the failure
        assert not tr.want_check(step), step
    assert tr.want_check(20.0)  # one interval after the failed check was sent
    tr.check_sent(20.0)
    tr.check_answered(25.0, False, None, "POST /v1/completions: read timed out")
    assert tr.status.state == NOT_SERVING
    assert not tr.want_check(29.9) and tr.want_check(30.0)
    assert tr.checks_sent == 2


def test_a_counter_rise_resets_the_count_of_failed_checks():
    tr = ServingTracker(CFG, ready_at=0.0, first_latency_s=0.1)
    tr.counters_seen(1.0, {"vllm:request_success_total": 3.0}, busy=0.0)  # the baseline
    tr.check_sent(11.0)
    tr.check_answered(16.0, False, None, "read timed out")
    assert (tr.status.state, tr.failures) == (DEGRADED, 1)
    s = tr.counters_seen(17.0, {"vllm:request_success_total": 4.0}, busy=0.0)
    assert s is not None and s.state == SERVING and tr.failures == 0
    tr.check_sent(27.0)
    s = tr.check_answered(32.0, False, None, "read timed out")
    # one failure since the rise, not two in a row: degraded, not not_serving
    assert s is not None and (s.state, s.reason) == (DEGRADED, "one serving check failed")


def _in_flight_without_completions(cores: float, cfg: ServingConfig = CFG) -> ServingTracker:
    """Requests in flight, nothing completing, the process using ``cores`` of CPU, for 40 s (> the stall
    timeout of 30 s)."""
    tr = ServingTracker(cfg, ready_at=0.0, first_latency_s=0.1)
    for t in range(0, 41):
        tr.cpu_seen(float(t), t * cores)
        tr.counters_seen(float(t), {"sglang:num_requests_total": 7.0}, busy=2.0)
    return tr


def test_a_wedged_process_at_0_02_cores_is_hung_not_working():
    tr = _in_flight_without_completions(0.02)
    assert (tr.status.state, tr.status.live) == (HUNG, False)
    assert "used no CPU" in tr.status.reason


@pytest.mark.parametrize("cores, state", [(0.08, HUNG), (0.09, HUNG), (0.11, NOT_SERVING), (0.5, NOT_SERVING)])
def test_cpu_counts_as_work_only_above_0_10_cores(cores: float, state: str):
    tr = _in_flight_without_completions(cores)
    assert tr.status.state == state, (cores, tr.status)


def test_the_default_cpu_threshold_is_0_10_cores():
    assert ServingConfig().cpu_busy_cores == 0.10


def test_a_workers_serving_starts_from_its_port_not_a_generation():
    """A worker's READY was its port seen listening: its first serving state says so, not "a real generation"."""
    assert ServingTracker(CFG, 0.0, None, worker="port").status.reason == "READY: the worker's port listens"
    assert ServingTracker(CFG, 0.0, None, worker="head").status.reason == (
        "READY: the worker's engines are up and it holds its connection to its head")  # vLLM --headless
    assert ServingTracker(CFG, 0.0, 0.1).status.reason == "READY: a real generation returned"
