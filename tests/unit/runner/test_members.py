"""The leader's member watch (firstlight/runner/members.py), against real readiness servers on loopback."""

from __future__ import annotations

import threading
import time

from firstlight.report.readiness import ReadinessServer
from firstlight.result import RunResult
from firstlight.runner.members import SETTLE_S, MemberWatch
from firstlight.vocab import FAILED, READY

FAILED_RESULT = RunResult(FAILED, "weights_loading", 0.0, 5.0, "llamacpp", "http://127.0.0.1:1", failure="other")


def _servers(member_verdict: str) -> tuple[ReadinessServer, ReadinessServer]:
    leader, member = ReadinessServer(), ReadinessServer()
    with leader.state.lock:
        leader.state.verdict, leader.state.start = FAILED, 1
    with member.state.lock:
        member.state.verdict, member.state.start, member.state.reached_ready = member_verdict, 1, True
    return leader, member


def test_a_leader_that_failed_waits_for_the_member_whose_end_broke_it():
    """The leader's llama-server aborted when its RPC worker died; the worker's own watch says so a moment later:
    the group's last word names the worker, not the leader."""
    leader, member = _servers(READY)
    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0)
    try:
        def dies() -> None:
            with member.state.lock:
                member.state.verdict = FAILED
        threading.Timer(0.6, dies).start()
        watch.summary(FAILED_RESULT)  # returns once a member explains it (SETTLE_S at most)
        assert watch.group is not None and (watch.group.verdict, watch.group.culprit) == (FAILED, member.url)
    finally:
        for r in (watch, leader, member):
            r.close()


def test_a_leader_that_failed_alone_is_blamed_after_the_settle_time():
    leader, member = _servers(READY)
    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0)
    try:
        t0 = time.monotonic()
        watch.summary(FAILED_RESULT)
        assert watch.group is not None and (watch.group.verdict, watch.group.culprit) == (FAILED, "leader")
        assert SETTLE_S == 3.0 and time.monotonic() - t0 >= SETTLE_S  # docs/multinode.md
    finally:
        for r in (watch, leader, member):
            r.close()
