"""The group verdict rules (firstlight/group.py), fed member states."""

from __future__ import annotations

import pytest

from firstlight.group import LEADER, GroupVerdict, MemberState, decide_group, member_from_body, unreachable
from firstlight.vocab import FAILED, HUNG, READY, SERVING_VERDICTS, STARTING, VERDICTS

NOW = 1000.0
STALL = 30.0


def m(url: str, verdict: str = STARTING, ok: bool = False, lp: float | None = NOW - 1, rank: int = 1) -> MemberState:
    return MemberState(url=url, verdict=verdict, ok=ok, node_rank=rank, last_progress_at=lp,
                       evidence=({"signal": "log", "message": f"{url} says {verdict}"},))


def test_ready_only_when_leader_ready_and_every_member_ready() -> None:
    a, b = m("http://127.0.1.2:9", READY, True), m("http://127.0.1.3:9", READY, True, rank=2)
    g = decide_group(READY, NOW, [a, b], STALL, NOW)
    assert (g.verdict, g.serving) == (READY, True)
    assert decide_group(STARTING, NOW, [a, b], STALL, NOW).verdict == STARTING
    g = decide_group(READY, NOW, [a, m("http://127.0.1.3:9")], STALL, NOW)
    assert (g.verdict, g.serving) == (STARTING, False)
    assert "waiting for member http://127.0.1.3:9" in g.evidence[0]["message"]


def test_failed_member_is_named_with_its_verdict_and_evidence() -> None:
    g = decide_group(STARTING, NOW, [m("http://a:1"), m("http://b:1", FAILED, rank=2)], STALL, NOW)
    assert (g.verdict, g.culprit) == (FAILED, "http://b:1")
    assert "member http://b:1 (node_rank 2) failed" in g.evidence[0]["message"]
    assert "http://b:1 says failed" in g.evidence[0]["message"]


@pytest.mark.parametrize("verdict", [FAILED, HUNG])
def test_a_member_that_said_its_final_verdict_and_went_away_is_still_named(verdict: str) -> None:
    """A member's firstlight answers its failed or hung verdict once, then exits: the leader's next read finds it
    unreachable, and the group still names it with what it said, not the leader whose engine it broke."""
    gone = unreachable("http://b:1", "connection refused", m("http://b:1", verdict, rank=2), NOW)
    g = decide_group(FAILED, NOW, [m("http://a:1", READY, True), gone], STALL, NOW)
    assert (g.verdict, g.culprit) == (verdict, "http://b:1")
    assert f"verdict {verdict}" in g.evidence[0]["message"] and f"http://b:1 says {verdict}" in g.evidence[0]["message"]
    assert "unreachable since 1000.0: connection refused" in g.evidence[0]["message"]
    was_ready = unreachable("http://b:1", "connection refused", m("http://b:1", READY, True, rank=2), NOW)
    assert decide_group(FAILED, NOW, [was_ready], STALL, NOW).culprit == LEADER  # not a verdict of its own


def test_hung_names_the_member_whose_progress_is_oldest() -> None:
    members = [m("http://a:1", lp=NOW - 40), m("http://b:1", lp=NOW - 100), m("http://c:1", lp=NOW - 35)]
    g = decide_group(STARTING, NOW - 31, members, STALL, NOW)
    assert (g.verdict, g.culprit) == (HUNG, "http://b:1")
    assert "no progress since 900.0" in g.evidence[0]["message"]


def test_a_slow_member_that_progresses_keeps_the_group_starting() -> None:
    members = [m("http://a:1", lp=NOW - 100), m("http://b:1", lp=NOW - 29)]
    assert decide_group(STARTING, NOW - 200, members, STALL, NOW).verdict == STARTING


def test_a_member_hung_by_its_own_judge_hangs_the_group() -> None:
    g = decide_group(STARTING, NOW, [m("http://a:1"), m("http://b:1", HUNG)], STALL, NOW)
    assert (g.verdict, g.culprit) == (HUNG, "http://b:1")


def test_a_worker_whose_serving_checks_say_hung_hangs_the_group_before_the_leader_gives_up() -> None:
    """A frozen worker was READY (it listened) and its own serving checks then found it stopped: the group is hung,
    naming it, at once, although its verdict still says ready and the leader only waits."""
    frozen = MemberState(url="http://b:1", verdict=READY, ok=False, node_rank=2, last_progress_at=NOW - 5,
                         serving=HUNG, evidence=({"signal": "serving", "value": "pid 7 is stopped"},))
    g = decide_group(STARTING, NOW, [m("http://a:1", READY, True), frozen], STALL, NOW)
    assert (g.verdict, g.culprit) == (HUNG, "http://b:1")
    assert "serving hung" in g.evidence[0]["message"] and "pid 7 is stopped" in g.evidence[0]["message"]
    degraded = MemberState(url="http://b:1", verdict=READY, ok=False, serving="degraded", last_progress_at=NOW - 5)
    assert decide_group(STARTING, NOW, [degraded], STALL, NOW).verdict == STARTING  # one failed check: not yet


def test_a_group_without_progress_names_the_member_that_stopped_serving_not_the_oldest() -> None:
    """The leader waits on a worker that stopped serving; an idle member's older progress is not the cause."""
    idle = m("http://a:1", lp=NOW - 100)
    stopped = MemberState(url="http://b:1", verdict=READY, ok=False, last_progress_at=NOW - 40, serving="not_serving")
    g = decide_group(STARTING, NOW - 35, [idle, stopped], STALL, NOW)
    assert (g.verdict, g.culprit) == (HUNG, "http://b:1")
    g = decide_group(STARTING, NOW - 35, [idle, m("http://b:1", lp=NOW - 40)], STALL, NOW)
    assert g.culprit == "http://a:1"  # without a failing member: the oldest, as before


def test_unreachable_member_is_evidence_and_hangs_after_the_stall_timeout() -> None:
    first = unreachable("http://a:1", "connection refused", None, NOW - 10)
    again = unreachable("http://a:1", "connection refused", first, NOW)
    assert again.unreachable_since == NOW - 10  # since the first failure, not the last
    g = decide_group(STARTING, NOW, [again], STALL, NOW)
    assert g.verdict == STARTING and "unreachable since 990.0: connection refused" in g.evidence[0]["message"]
    late = unreachable("http://a:1", "timed out", first, NOW + 40)
    g = decide_group(STARTING, NOW + 5, [late], STALL, NOW + 40)
    assert (g.verdict, g.culprit) == (HUNG, "http://a:1")
    assert "unreachable since 990.0: timed out" in g.evidence[0]["message"]


def test_after_ready_a_member_that_stops_serving_stops_the_group_serving() -> None:
    a = m("http://a:1", READY, True)
    assert decide_group(READY, NOW, [a], STALL, NOW, reached_ready=True).serving
    gone = unreachable("http://a:1", "connection refused", a, NOW)
    g = decide_group(READY, NOW, [gone], STALL, NOW, reached_ready=True)
    assert not g.serving and g.culprit == "http://a:1"
    assert "not serving: unreachable since 1000.0" in g.evidence[0]["message"]


def test_member_from_body_reads_any_status() -> None:
    s = member_from_body("http://a:1", 503, {"verdict": "starting", "node_rank": 1, "last_progress_at": 5,
                                             "phase": "distributed_init", "evidence": [{"message": "x"}]})
    assert (s.ok, s.node_rank, s.last_progress_at, s.phase) == (False, 1, 5.0, "distributed_init")
    assert member_from_body("http://a:1", 200, {"verdict": "ready"}).ok
    assert member_from_body("http://a:1", 503, {"verdict": "ready", "serving": {"state": "hung"}}).serving == HUNG
    assert member_from_body("http://a:1", 503, {"verdict": "ready", "serving": "odd"}).serving is None
    bad = member_from_body("http://a:1", 200, "<html>")
    assert bad.error and "not a firstlight readiness body" in bad.error


def test_worker_node_failure_lines_are_fatal_in_the_profiles() -> None:
    from firstlight.engines.sglang import SGLANG
    from firstlight.engines.vllm import VLLM
    sg = SGLANG.classify("[2026-01-01 00:00:00] Scheduler or DataParallelController 4242 terminated with -9")
    assert sg.failure is not None and sg.failure.fatal
    vl = VLLM.classify("RuntimeError: Did not receive response from front-end process within 5 minutes")
    assert vl.failure is not None and vl.failure.fatal


def test_the_numbers_in_docs_multinode() -> None:
    from pathlib import Path

    from firstlight.engines.llamarpc import RPC_DEFAULT_PORT
    from firstlight.report.readiness import LINGER_S
    from firstlight.runner.members import AFTER_READY_BOUND_S, LWS_MEMBER_PORT, POLL_S, REQUEST_TIMEOUT_S, SETTLE_S
    assert (POLL_S, REQUEST_TIMEOUT_S, AFTER_READY_BOUND_S, LINGER_S, LWS_MEMBER_PORT) == (1.0, 2.0, 3.0, 5.0, 8081)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "multinode.md").read_text()
    for name, value in (("POLL_S", POLL_S), ("REQUEST_TIMEOUT_S", REQUEST_TIMEOUT_S), ("LINGER_S", LINGER_S),
                        ("SETTLE_S", SETTLE_S)):
        assert f"`{name}` = {value:g} s" in doc, name
    assert f"= {AFTER_READY_BOUND_S:g} s (`AFTER_READY_BOUND_S`)" in doc and f"127.0.0.1:{RPC_DEFAULT_PORT}" in doc


def test_members_from_the_leaderworkerset_env() -> None:
    from firstlight.runner.members import members_from_lws
    env = {"LWS_LEADER_ADDRESS": "sgl-0.sgl.default", "LWS_GROUP_SIZE": "3", "LWS_WORKER_INDEX": "0"}
    assert members_from_lws(env, 8081) == ["http://sgl-0-1.sgl.default:8081", "http://sgl-0-2.sgl.default:8081"]
    assert members_from_lws({**env, "LWS_WORKER_INDEX": "1"}) == []
    assert members_from_lws({}) == []
    # which pod this is unknown: never the leader (a worker would otherwise poll its own /readyz)
    assert members_from_lws({k: v for k, v in env.items() if k != "LWS_WORKER_INDEX"}) == []


def test_the_leaders_readyz_answers_for_the_group() -> None:
    from firstlight.report.readiness import ReadinessState, answer
    s = ReadinessState().snapshot() | {"verdict": READY, "reached_ready": True}
    assert answer("/readyz", s) == 200  # no members: as before
    assert answer("/readyz", s | {"group": {"verdict": READY, "serving": True}}) == 200
    assert answer("/readyz", s | {"group": {"verdict": READY, "serving": False}}) == 503
    assert answer("/livez", s | {"group": {"verdict": HUNG, "serving": False}}) == 503


# -- every rule's whole verdict: its serving flag, its culprit and each evidence field, as the endpoints show them --
A, B = "http://127.0.1.2:9", "http://127.0.1.3:9"


def _member_ev(url: str, rank: int | None, value: str | None, since: float | None, message: str,
               member_evidence: list[dict[str, object]]) -> dict[str, object]:
    return {"signal": "group_member", "member": url, "node_rank": rank, "value": value, "since": since,
            "message": message, "member_evidence": member_evidence}


def test_a_failed_member_is_the_whole_verdict_not_serving_with_its_evidence() -> None:
    failed = m(B, FAILED, rank=2, lp=NOW - 3)
    g = decide_group(READY, NOW, [m(A, READY, True), failed], STALL, NOW)
    assert g == GroupVerdict(FAILED, False, (_member_ev(
        B, 2, FAILED, NOW - 3, f"member {B} (node_rank 2) failed: verdict failed: {B} says failed",
        [{"signal": "log", "message": f"{B} says failed"}]),), B)


def test_a_hung_member_is_the_whole_verdict_whatever_the_leader_says() -> None:
    for leader in (READY, STARTING, FAILED):
        g = decide_group(leader, NOW, [m(A, HUNG, lp=NOW - 50)], STALL, NOW)
        assert g == GroupVerdict(HUNG, False, (_member_ev(
            A, 1, HUNG, NOW - 50, f"member {A} (node_rank 1) hung: verdict hung: {A} says hung",
            [{"signal": "log", "message": f"{A} says hung"}]),), A), leader


def test_a_leader_that_failed_or_hung_is_named_as_the_leader() -> None:
    for verdict in (FAILED, HUNG):
        assert decide_group(verdict, NOW, [m(A, READY, True)], STALL, NOW) == GroupVerdict(verdict, False, (), LEADER)


def test_a_ready_group_lists_each_member_ready_and_serves() -> None:
    a, b = m(A, READY, True), m(B, READY, True, rank=2)
    g = decide_group(READY, NOW, [a, b], STALL, NOW)
    assert g == GroupVerdict(READY, True, (
        _member_ev(A, 1, READY, NOW - 1, f"member {A} (node_rank 1) ready", [{"signal": "log",
                                                                             "message": f"{A} says ready"}]),
        _member_ev(B, 2, READY, NOW - 1, f"member {B} (node_rank 2) ready", [{"signal": "log",
                                                                             "message": f"{B} says ready"}])), None)


def test_after_ready_the_members_not_serving_are_each_named_and_the_first_is_the_culprit() -> None:
    a, b = m(A, READY, False, lp=NOW - 2), m(B, READY, False, rank=2, lp=NOW - 4)
    g = decide_group(READY, NOW, [m("http://c:1", READY, True), a, b], STALL, NOW, reached_ready=True)
    assert (g.verdict, g.serving, g.culprit) == (READY, False, A)
    assert [e["message"] for e in g.evidence] == [f"member {A} (node_rank 1) not serving: verdict ready: {A} says "
                                                  "ready", f"member {B} (node_rank 2) not serving: verdict ready: "
                                                           f"{B} says ready"]


def test_the_group_is_hung_at_exactly_the_stall_timeout_naming_the_leader_when_it_stopped_first() -> None:
    members = [m(A, lp=NOW - 20)]
    assert decide_group(STARTING, NOW - 40, members, 20.0, NOW - 0.001).verdict == STARTING
    g = decide_group(STARTING, NOW - 40, members, 20.0, NOW)
    assert g == GroupVerdict(HUNG, False, ({"signal": "group_progress", "member": LEADER, "since": NOW - 40,
                                            "message": f"the leader made no progress since {NOW - 40}, no member "
                                                       "either, for 20 s"},), LEADER)


def test_the_group_hung_by_its_stall_names_the_oldest_member_with_the_whole_evidence() -> None:
    g = decide_group(STARTING, NOW - 35, [m(A, lp=NOW - 45), m(B, lp=NOW - 30, rank=2)], STALL, NOW)
    assert g == GroupVerdict(HUNG, False, (_member_ev(
        A, 1, STARTING, NOW - 45, f"member {A} (node_rank 1) made no progress since {NOW - 45} (the oldest in the "
                                  f"group; none for 30 s): verdict starting: {A} says starting",
        [{"signal": "log", "message": f"{A} says starting"}]),), A)
    # a member that never said when it progressed counts from now: it keeps the group starting
    assert decide_group(STARTING, NOW - 40, [m(A, lp=None)], STALL, NOW).verdict == STARTING


def test_a_starting_group_waits_naming_each_member_not_ready() -> None:
    g = decide_group(STARTING, NOW, [m(A, READY, True), m(B, lp=NOW - 2, rank=2)], STALL, NOW)
    assert g == GroupVerdict(STARTING, False, (_member_ev(
        B, 2, STARTING, NOW - 2, f"waiting for member {B} (node_rank 2): verdict starting: {B} says starting",
        [{"signal": "log", "message": f"{B} says starting"}]),), None)


def test_an_unreachable_member_is_named_with_since_when_and_why() -> None:
    gone = unreachable(B, "ConnectError: refused", None, NOW - 7)
    g = decide_group(STARTING, NOW, [gone], STALL, NOW)
    assert g.evidence == (_member_ev(B, None, None, NOW - 7, f"waiting for member {B}: unreachable since "
                                                             f"{NOW - 7}: ConnectError: refused", []),)


def test_why_a_member_is_waited_on_reads_its_evidence_by_message_value_or_signal_three_at_most() -> None:
    s = MemberState(url=A, verdict=READY, serving="degraded", phase="ready",
                    evidence=({"message": "one"}, {"value": "two"}, {"signal": "three"}, {"message": "four"}))
    g = decide_group(STARTING, NOW, [s], STALL, NOW)
    assert g.evidence[0]["message"] == f"waiting for member {A}: verdict ready, serving degraded, phase ready: " \
                                       "one; two; three"
    bare = MemberState(url=A, verdict=STARTING, evidence=({"since": 1},))
    assert decide_group(STARTING, NOW, [bare], STALL, NOW).evidence[0]["message"] == \
        f"waiting for member {A}: verdict starting: {{'since': 1}}"
    assert decide_group(STARTING, NOW, [MemberState(url=A, verdict=STARTING)], STALL, NOW).evidence[0][
        "message"] == f"waiting for member {A}: verdict starting"


def test_a_members_state_as_the_endpoints_show_it() -> None:
    assert m(A, READY, True).to_dict() == {
        "url": A, "node_rank": 1, "role": None, "state": "ready", "verdict": READY, "phase": None, "ok": True,
        "last_progress_at": NOW - 1, "evidence": [{"signal": "log", "message": f"{A} says ready"}], "error": None,
        "unreachable_since": None, "serving": None, "restarts": 0}
    assert m(A, HUNG).to_dict()["state"] == HUNG
    assert MemberState(url=A).to_dict()["state"] == STARTING  # never read: starting
    gone = unreachable(A, "timed out", m(A, READY, True), NOW)
    assert (gone.to_dict()["state"], gone.to_dict()["error"], gone.to_dict()["unreachable_since"]) == \
        ("unreachable", "timed out", NOW)
    assert (gone.verdict, gone.node_rank, gone.last_progress_at, gone.ok) == (READY, 1, NOW - 1, False)


def test_member_from_body_keeps_only_what_has_the_right_type() -> None:
    s = member_from_body(A, 503, {"verdict": None, "node_rank": "1", "role": 3, "phase": ["x"],
                                  "last_progress_at": "soon", "evidence": ["text", {"message": "kept"}],
                                  "serving": {"state": 7}})
    assert s == MemberState(url=A, verdict=STARTING, ok=False, evidence=({"message": "kept"},))
    s = member_from_body(A, 200, {"verdict": "ready", "node_rank": 2, "role": "worker", "phase": "ready",
                                  "last_progress_at": 12, "serving": {"state": "serving", "evidence": [{"x": 1}]},
                                  "evidence": [{"message": "start"}]})
    assert s == MemberState(url=A, verdict=READY, ok=True, node_rank=2, role="worker", phase="ready",
                            last_progress_at=12.0, evidence=({"message": "start"},), serving="serving")
    s = member_from_body(A, 503, {"verdict": "ready", "serving": {"state": "hung", "evidence": [{"value": "stop"}, 1]},
                                  "evidence": [{"message": "start"}]})
    assert s.evidence == ({"value": "stop"}, {"message": "start"})  # why it stopped serving, first
    bad = member_from_body(A, 502, "<html>", m(A, READY, True))
    assert bad.error == "HTTP 502: not a firstlight readiness body" and bad.verdict == READY


def test_group_edge_rules_ties_an_empty_group_and_a_serving_leaders_old_progress() -> None:
    # two members stopped at the same moment: the first listed is named (no comparison of the members themselves)
    g = decide_group(STARTING, None, [m(A, lp=NOW - 40), m(B, lp=NOW - 40)], STALL, NOW)
    assert (g.verdict, g.culprit) == (HUNG, A)
    # after READY with no member left to name, the leader is the one not serving
    g = decide_group(STARTING, NOW, [], STALL, NOW, reached_ready=True)
    assert (g.verdict, g.serving, g.culprit) == (READY, False, LEADER)
    # a leader that serves is no longer "progressing": its old progress never makes it the culprit
    assert decide_group(READY, NOW - 100, [m(A, lp=NOW - 40)], STALL, NOW).culprit == A


def test_an_unreachable_member_keeps_all_that_was_seen_of_it() -> None:
    seen = MemberState(url=A, verdict=READY, ok=True, node_rank=2, role="worker", phase="ready",
                       last_progress_at=NOW - 9, evidence=({"message": "x"},), serving="degraded")
    gone = unreachable(A, "timed out", seen, NOW)
    assert gone == MemberState(url=A, verdict=READY, ok=False, node_rank=2, role="worker", phase="ready",
                               last_progress_at=NOW - 9, evidence=({"message": "x"},), error="timed out",
                               unreachable_since=NOW, serving="degraded")
    assert unreachable(A, "refused", None, NOW) == MemberState(url=A, error="refused", unreachable_since=NOW)
    assert member_from_body(A, 200, "<html>").url == A
    assert MemberState(url=A, verdict="regression", ok=True).to_dict()["state"] == "ready"  # its /readyz is 200


def test_a_member_restarting_is_counted_each_time_its_engine_pid_or_start_changes() -> None:
    """The leader counts a member's restarts (firstlight_group_member_restarts, FirstlightGroupMemberRestarting):
    another engine pid or another start on its /readyz is one; the same one read again, an unreadable moment, or a
    body that names neither is none."""
    first = member_from_body(A, 503, {"verdict": "starting", "pid": 10, "start": 1})
    assert (first.start_key, first.restarts) == ((10, 1), 0)
    same = member_from_body(A, 503, {"verdict": "starting", "pid": 10, "start": 1}, first)
    assert same.restarts == 0
    gone = unreachable(A, "refused", same, NOW)
    assert (gone.start_key, gone.restarts) == ((10, 1), 0)  # down for a moment: not yet a restart
    again = member_from_body(A, 503, {"verdict": "starting", "pid": 11, "start": 1}, gone)  # a new engine
    assert (again.start_key, again.restarts, again.to_dict()["restarts"]) == ((11, 1), 1, 1)
    sidecar = member_from_body(A, 503, {"verdict": "starting", "pid": 11, "start": 2}, again)  # the sidecar's next
    assert sidecar.restarts == 2
    assert unreachable(A, "refused", sidecar, NOW).restarts == 2  # unreadable, it keeps its count
    blank = member_from_body(A, 503, {"verdict": "starting"}, sidecar)
    assert (blank.start_key, blank.restarts) == (None, 2)
    assert member_from_body(A, 503, {"verdict": "starting", "pid": 12, "start": 1}, blank).restarts == 2


@pytest.mark.parametrize("leader", VERDICTS)
def test_a_hung_leader_blames_the_worker_that_hung_as_a_failed_leader_does(leader: str) -> None:
    # The leader's own judge says hung because rank 0 waits on the worker that stopped: the worker is named, for
    # every verdict of the leader (rule 1 and 2 come before the leader's own verdict, docs/multinode.md).
    hung = m(B, HUNG, rank=2, lp=NOW - 50)
    g = decide_group(leader, NOW - 40, [m(A, READY, True), hung], STALL, NOW)
    assert (g.verdict, g.serving, g.culprit) == (HUNG, False, B)
    assert g.evidence[0]["message"].startswith(f"member {B} (node_rank 2) hung")
    failed = m(B, FAILED, rank=2, lp=NOW - 50)
    assert decide_group(leader, NOW - 40, [m(A, READY, True), failed], STALL, NOW).culprit == B


@pytest.mark.parametrize("leader", [HUNG, FAILED])
def test_a_leader_hung_or_failed_blames_the_first_worker_that_hung_in_member_order(leader: str) -> None:
    members = [m(A, READY, True), m(B, HUNG, rank=2), m("http://127.0.1.4:9", HUNG, rank=3)]
    g = decide_group(leader, NOW - 40, members, STALL, NOW)
    assert (g.verdict, g.culprit) == (HUNG, B)


# docs/multinode.md's rules 1 and 2: a member's own `failed` or `hung` is the group's, naming it; any other verdict
# of a member decides nothing by itself (it progresses: the group waits, or serves once every member is ready)
_MEMBER_DECIDES = {FAILED: FAILED, HUNG: HUNG}


@pytest.mark.parametrize("own", VERDICTS)
def test_a_members_own_verdict_decides_the_group_only_when_failed_or_hung(own: str) -> None:
    member = m(B, own, ok=own in SERVING_VERDICTS, rank=2)
    g = decide_group(STARTING, NOW, [m(A, READY, True), member], STALL, NOW)
    if own in _MEMBER_DECIDES:
        assert (g.verdict, g.serving, g.culprit) == (_MEMBER_DECIDES[own], False, B)
    else:
        assert (g.verdict, g.culprit) == (STARTING, None)
    ready = decide_group(READY, NOW, [m(A, READY, True), member], STALL, NOW)
    assert (ready.verdict == READY and ready.serving) is (own in SERVING_VERDICTS)
