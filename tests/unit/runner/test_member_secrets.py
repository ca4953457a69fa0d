"""A member's URL with a password or a token in its query (``--member http://user:PW@host/?token=T``): asked as
given, shown masked in the leader's ``/readyz`` body, its ``group:`` lines and what its sinks are told."""

from __future__ import annotations

import json
from typing import Any

import httpx

from firstlight.redact import MASK
from firstlight.report.readiness import ReadinessServer
from firstlight.runner.members import MemberWatch
from firstlight.sim.fixtures import free_port
from firstlight.vocab import FAILED, READY

PASSWORD, TOKEN = "pw-s3cret-9", "tok-s3cret-7"


class _Sink:
    def __init__(self) -> None:
        self.told: list[Any] = []

    def group_update(self, members: list[dict[str, Any]], verdict: dict[str, Any]) -> None:
        self.told.append((members, verdict))


def test_a_members_password_and_query_token_never_show() -> None:
    leader, member = ReadinessServer(), ReadinessServer()
    with leader.state.lock:
        leader.state.verdict, leader.state.start = FAILED, 1
    with member.state.lock:
        member.state.verdict, member.state.start, member.state.reached_ready = READY, 1, True
    port = member.url.rsplit(":", 1)[1].split("/")[0]
    reached = f"http://admin:{PASSWORD}@127.0.0.1:{port}/?token={TOKEN}"
    gone = f"http://admin:{PASSWORD}@127.0.0.1:{free_port()}/?token={TOKEN}"  # nobody listens: its error is shown
    said: list[str] = []
    sink = _Sink()
    watch = MemberWatch([reached, gone], leader, stall_timeout_s=30.0, message=said.append)
    watch.sinks.append(sink)
    try:
        g = watch.poll_once()
        body = httpx.get(f"{leader.url}/readyz", timeout=10).text
    finally:
        for r in (watch, leader, member):
            r.close()
    shown = " ".join([body, *said, json.dumps(sink.told), json.dumps(g.evidence), str(g.culprit)])
    assert PASSWORD not in shown and TOKEN not in shown, shown
    assert f"admin:{MASK}@127.0.0.1:{port}" in body and f"token={MASK}" in body
    states = {m["verdict"] for m in sink.told[-1][0]}
    assert READY in states  # the member was asked as given (its password and query), and answered
