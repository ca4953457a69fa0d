"""The serving tracker's rules at their edges (firstlight/serving.py): the slow-check bound (10 x the first
generation, never below 2 s), one check per interval after a failed one, a counter rise ending a run of failed
checks, and how much CPU counts as the process working (above 0.10 cores)."""

from __future__ import annotations

import pytest

from firstlight.serving import ServingConfig, ServingTracker
from firstlight.vocab import DEGRADED, HUNG, NOT_SERVING, SERVING

CFG = ServingConfig(interval=10.0, generation_timeout=5.0, stall_timeout=30.0)


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
