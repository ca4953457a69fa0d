"""The serving tracker's transitions, each with its whole status: state, reason, since, what /readyz and /livez
say, and its evidence (signal, value, since); and the edges of its time rules (the stall timeout reached exactly,
a fraction of a request in flight, an idle server that is not hung). Named by the mutation run of
firstlight/serving.py: each test pins fields a status carries that no other in-process test read."""

from __future__ import annotations

import dataclasses

from firstlight.serving import ServingConfig, ServingStatus, ServingTracker
from firstlight.vocab import DEGRADED, HUNG, NOT_SERVING, SERVING

CFG = ServingConfig(interval=10.0, generation_timeout=5.0, stall_timeout=30.0)


def tracker() -> ServingTracker:
    return ServingTracker(CFG, ready_at=100.0, first_latency_s=0.1)


def status(state: str, reason: str, since: float, ready: bool, live: bool, signal: str, value: str) -> ServingStatus:
    return ServingStatus(state, reason, since, ready, live, ({"signal": signal, "value": value, "since": since},))


def test_the_first_status_is_serving_ready_and_live_since_ready_with_its_reason():
    tr = tracker()
    assert tr.status == ServingStatus(SERVING, "READY: a real generation returned", 100.0, True, True)
    assert tr.status.to_dict() == {"state": SERVING, "reason": "READY: a real generation returned", "since": 100.0,
                                   "ready": True, "live": True, "evidence": []}


def test_each_check_answer_is_a_whole_status_with_its_evidence():
    tr = tracker()
    assert tr.check_answered(110.0, False, None, "timed out") == status(
        DEGRADED, "one serving check failed", 110.0, False, True, "probe:serving", "timed out")
    assert tr.check_answered(120.0, False, None, "503") == status(
        NOT_SERVING, "2 serving checks failed in a row", 120.0, False, True, "probe:serving", "503")
    assert tr.check_answered(130.0, True, 0.2, "200 in 0.2s") == status(
        SERVING, "the serving check answered", 130.0, True, True, "probe:serving", "200 in 0.2s")
    slow = tr.check_answered(140.0, True, 2.5, "200 in 2.5s")
    assert slow == status(DEGRADED, "slow: the check took 2.50s, over 2.00s (10x the first generation)", 140.0,
                          True, True, "probe:serving", "200 in 2.5s")
    assert slow.to_dict() == {"state": DEGRADED, "reason": slow.reason, "since": 140.0, "ready": True,
                              "live": True, "evidence": [{"signal": "probe:serving", "value": "200 in 2.5s",
                                                          "since": 140.0}]}


def test_a_passed_check_resets_the_failures_so_the_next_failure_is_one_again():
    tr = tracker()
    tr.check_answered(110.0, False, None, "503")
    tr.check_answered(120.0, True, 0.2, "ok")
    assert tr.check_answered(130.0, False, None, "503").state == DEGRADED


def test_a_counter_rise_is_serving_with_the_rise_shown_per_counter():
    tr = tracker()
    tr.counters_seen(101.0, {"b_total": 10.0, "a_total": 4.0}, busy=0.0)
    tr.check_answered(105.0, False, None, "503")  # degraded, so the rise changes the status
    got = tr.counters_seen(106.0, {"b_total": 13.0, "a_total": 5.0}, busy=0.0)
    assert got == status(SERVING, "the engine's counters rose: a_total +1, b_total +3", 106.0, True, True,
                         "metrics", "a_total +1, b_total +3")


def test_stalled_with_no_cpu_is_hung_exactly_at_the_stall_timeout_with_its_evidence():
    tr = tracker()
    tr.cpu_seen(100.0, 5.0)
    tr.cpu_seen(101.0, 5.0)
    tr.check_answered(101.0, False, None, "503")
    assert tr.tick(129.9) is None  # 29.9 s since READY, the last work done
    got = tr.tick(130.0)
    assert got is not None and got.evidence[1] == {"signal": "probe:serving", "value": "503", "since": 101.0}
    # the last failed check is kept as evidence after the time-based one (a frozen worker's "pid N is stopped")
    assert dataclasses.replace(got, evidence=got.evidence[:1]) == status(
        HUNG, "nothing completed for 30s and its process used no CPU", 130.0, False, False, "serving",
        "no request completed for 30s; its process used no CPU")


def test_a_process_never_sampled_is_not_known_when_hung():
    tr = tracker()
    tr.check_answered(101.0, False, None, "503")
    got = tr.tick(130.0)
    assert got is not None and got.state == HUNG
    assert got.reason == "nothing completed for 30s and its process is not known"
    assert got.evidence[0]["value"] == "no request completed for 30s; its process is not known"


def test_cpu_idle_exactly_the_stall_timeout_is_idle():
    tr = tracker()
    tr.cpu_seen(100.0, 5.0)
    tr.cpu_seen(110.0, 6.0)  # 0.1 cores: work, at 110
    tr.counters_seen(110.0, {"n": 1.0}, busy=1.0)
    assert tr.tick(139.9) is not None and tr.status.state == NOT_SERVING  # quiet 39.9 s, CPU 29.9 s ago
    assert tr.tick(140.0) is not None and tr.status.state == HUNG  # CPU idle exactly 30 s


def test_one_request_in_flight_with_cpu_moving_is_not_serving_with_its_evidence():
    tr = tracker()
    tr.cpu_seen(100.0, 5.0)
    tr.counters_seen(100.0, {"n": 1.0}, busy=1.0)
    tr.cpu_seen(130.0, 10.0)
    assert tr.tick(130.0) == status(NOT_SERVING, "1 requests in flight, nothing completed for 30s", 130.0, False,
                                    True, "metrics", "1 in flight, none completed")


def test_an_idle_server_with_nothing_in_flight_is_never_hung_nor_not_serving():
    tr = tracker()
    tr.counters_seen(100.0, {"n": 1.0}, busy=0.0)
    assert tr.tick(1000.0) is None and tr.status.state == SERVING


def test_an_idle_server_never_seen_by_the_counters_is_not_in_flight():
    tr = tracker()
    assert tr.tick(1000.0) is None and tr.status.state == SERVING


def test_slow_but_ready_and_quiet_is_not_failing():
    tr = tracker()
    tr.check_answered(101.0, True, 3.0, "slow")
    assert tr.status.state == DEGRADED and tr.status.ready
    assert tr.tick(1000.0) is None


def test_one_failed_check_before_the_stall_timeout_changes_nothing_by_time():
    tr = tracker()
    tr.check_answered(101.0, False, None, "503")
    assert tr.tick(110.0) is None and tr.status.state == DEGRADED


def test_after_one_failed_check_cpu_moving_and_nothing_in_flight_is_not_not_serving():
    tr = tracker()
    tr.cpu_seen(100.0, 5.0)
    tr.check_answered(101.0, False, None, "503")
    tr.cpu_seen(140.0, 20.0)
    assert tr.tick(140.0) is None and tr.status.state == DEGRADED


def test_two_cpu_samples_at_the_same_instant_say_nothing_of_work():
    tr = tracker()
    tr.cpu_seen(100.0, 5.0)
    tr.cpu_seen(100.0, 6.0)
    assert tr.cpu_moved_at == 100.0
    tr.cpu_seen(120.0, 6.0)
    tr.cpu_seen(120.0, 9.0)  # the same instant again: not work at 120
    assert tr.cpu_moved_at == 100.0
