"""The leader's member watch (firstlight/runner/members.py), against real readiness servers on loopback."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from firstlight.report.readiness import ReadinessServer
from firstlight.result import RunResult
from firstlight.runner import members as members_module
from firstlight.runner.members import SETTLE_S, MemberWatch
from firstlight.vocab import FAILED, READY
from firstlight.wire import Wire
from tests.support.common import wait_for

# The rules are timed with shorter clocks than the product's (their documented values are asserted where used):
# the fast lane waits fractions of a second for what a user's watch waits seconds for.
SHORT_REQUEST_S, SHORT_SETTLE_S, SHORT_POLL_S = 0.5, 0.5, 0.25


FAILED_RESULT = RunResult(FAILED, "weights_loading", 0.0, 5.0, "llamacpp", "http://127.0.0.1:1", failure="other")


@contextlib.contextmanager
def _wires() -> Iterator[dict[str, Wire]]:
    """Connections kept from one poll to the next, as the loop keeps them."""
    wires: dict[str, Wire] = {}
    try:
        yield wires
    finally:
        for w in wires.values():
            w.close()


def _servers(member_verdict: str) -> tuple[ReadinessServer, ReadinessServer]:
    leader, member = ReadinessServer(), ReadinessServer()
    with leader.state.lock:
        leader.state.verdict, leader.state.start = FAILED, 1
    with member.state.lock:
        member.state.verdict, member.state.start, member.state.reached_ready = member_verdict, 1, True
    return leader, member


def test_a_leader_that_failed_waits_for_the_member_whose_end_broke_it(monkeypatch):
    """The leader's llama-server aborted when its RPC worker died; the worker's own watch says so a moment later:
    the group's last word names the worker, not the leader (read directly, whatever proxy the environment names)."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    leader, member = _servers(READY)
    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0)
    try:
        def dies() -> None:
            with member.state.lock:
                member.state.verdict = FAILED
        threading.Timer(0.6, dies).start()
        t0 = time.monotonic()
        watch.summary(FAILED_RESULT)  # returns once a member explains it (SETTLE_S at most)
        assert watch.group is not None and (watch.group.verdict, watch.group.culprit) == (FAILED, member.url)
        assert time.monotonic() - t0 < SETTLE_S + 0.9  # it reads again every POLL_S / 4 within the settle time
    finally:
        for r in (watch, leader, member):
            r.close()


def test_a_leader_ready_between_two_polls_reads_its_group_once_more_at_its_verdict():
    """--stop-when-ready ends the leader at READY, maybe before the next poll: its last group word is read at the
    verdict, ready with every member, not the starting group of the poll before; an unserved leader too."""
    leader, member = ReadinessServer(serve=False), ReadinessServer()
    with member.state.lock:
        member.state.verdict, member.state.start, member.state.reached_ready = READY, 1, True
    with leader.state.lock:
        leader.state.start = 1
    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0)
    try:
        wait_for(lambda: watch.group is not None, 10, "the first poll")
        assert watch.group is not None and watch.group.verdict == "starting"
        with leader.state.lock:
            leader.state.verdict = READY
        watch.summary(RunResult(READY, "ready", 0.0, 5.0, "llamacpp", "http://127.0.0.1:1", ready_at=5.0))
        assert (watch.group.verdict, watch.group.serving) == (READY, True)
        assert leader.port == 0 and leader.state.group is not None and leader.state.group["verdict"] == READY
    finally:
        for r in (watch, leader, member):
            r.close()


def test_a_leader_that_failed_alone_is_blamed_after_the_settle_time(monkeypatch):
    assert SETTLE_S == 3.0  # docs/multinode.md
    monkeypatch.setattr(members_module, "SETTLE_S", SHORT_SETTLE_S)
    leader, member = _servers(READY)
    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0)
    try:
        t0 = time.monotonic()
        watch.summary(FAILED_RESULT)
        assert watch.group is not None and (watch.group.verdict, watch.group.culprit) == (FAILED, "leader")
        assert time.monotonic() - t0 >= SHORT_SETTLE_S
    finally:
        for r in (watch, leader, member):
            r.close()


def _ready_member() -> ReadinessServer:
    s = ReadinessServer()
    with s.state.lock:
        s.state.verdict, s.state.start, s.state.reached_ready, s.state.node_rank = READY, 1, True, 1
    return s


def test_each_poll_tells_the_leaders_endpoints_and_sinks_the_members_and_the_group_and_says_each_change():
    from firstlight.sim.fixtures import free_port

    leader, member = ReadinessServer(), _ready_member()
    with leader.state.lock:
        leader.state.verdict, leader.state.start, leader.state.last_progress_at = READY, 1, 5.0
    said: list[str] = []
    told: list[tuple[list[dict[str, object]], dict[str, object]]] = []

    class Sink:
        def group_update(self, members: list[dict[str, object]], group: dict[str, object]) -> None:
            told.append((members, group))

    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    watch = MemberWatch([member.url + "/", gone], leader, stall_timeout_s=30.0, message=said.append)
    watch.close()  # its own loop stopped: the polls below are the test's
    watch.sinks.append(Sink())
    try:
        with _wires() as client:
            g = watch.poll_once(client)
            assert (g.verdict, g.serving, g.culprit) == ("starting", False, None)
            first_gone = watch.states[gone]
            assert first_gone.error is not None and first_gone.error == "connection refused"
            g2 = watch.poll_once(client)
        assert watch.states[gone].unreachable_since == first_gone.unreachable_since  # since the first failure
        assert (g2.verdict, g2.culprit) == (g.verdict, g.culprit)  # the same verdict: said once
        assert said == [f"group: starting (2 member(s)): {g.evidence[0]['message']}"]
        assert g.evidence[0]["message"].startswith(f"waiting for member {gone}: unreachable since ")
        members, group = told[-1]
        assert [mm["url"] for mm in members] == [member.url, gone]
        assert group == {"verdict": "starting", "serving": False, "culprit": None, "evidence": list(g2.evidence)}
        with leader.state.lock:
            assert (leader.state.members, leader.state.group) == (members, group)
        assert members[0]["state"] == "ready" and members[1]["state"] == "unreachable"
    finally:
        for r in (leader, member):
            r.close()


def test_a_group_that_reached_ready_says_not_serving_when_a_member_stops():
    leader, member = ReadinessServer(), _ready_member()
    with leader.state.lock:
        leader.state.verdict, leader.state.start, leader.state.reached_ready = READY, 1, True
    said: list[str] = []
    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0, message=said.append)
    watch.close()
    try:
        with _wires() as client:
            assert watch.poll_once(client).serving
            with member.state.lock:
                member.state.serving = {"state": "not_serving", "ready": False, "live": True,
                                        "evidence": [{"signal": "probe:serving", "value": "pid 7 is stopped"}]}
            g = watch.poll_once(client)
            assert (g.verdict, g.serving, g.culprit) == (READY, False, member.url)
            with member.state.lock:
                member.state.serving = {**member.state.serving, "state": "hung", "live": False}
            hung = watch.poll_once(client)
        assert (hung.verdict, hung.serving, hung.culprit) == ("hung", False, member.url)  # its own checks: hung
        assert said[0] == f"group: ready (1 member(s)): member {member.url} (node_rank 1) ready"
        assert said[1].startswith(f"group: ready (not serving) (1 member(s)): member {member.url} (node_rank 1) not "
                                  "serving: verdict ready, serving not_serving") and "pid 7 is stopped" in said[1]
        assert said[2].startswith("group: hung (1 member(s)): ")
    finally:
        for r in (leader, member):
            r.close()


def test_a_member_that_answers_but_not_as_firstlight_or_not_in_time_is_unreachable_with_why(monkeypatch):
    import socket

    from firstlight.runner.members import REQUEST_TIMEOUT_S

    assert REQUEST_TIMEOUT_S == 2.0  # docs/multinode.md
    monkeypatch.setattr(members_module, "REQUEST_TIMEOUT_S", SHORT_REQUEST_S)
    leader = ReadinessServer()
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        watch = MemberWatch([url], leader, stall_timeout_s=30.0)
        watch.close()
        try:
            with _wires() as client:
                t0 = time.monotonic()
                watch.poll_once(client)
                took = time.monotonic() - t0
            assert watch.states[url].error == "no complete answer within 0.5s (the request's deadline)"
            assert SHORT_REQUEST_S * 0.9 <= took < SHORT_REQUEST_S + 2.5  # the request's deadline
        finally:
            leader.close()


def test_the_members_loop_reads_them_directly_never_through_a_proxy(monkeypatch):
    from tests.support.common import wait_for

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing there: a read through it fails
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    leader, member = ReadinessServer(), _ready_member()
    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0)
    try:
        assert watch._thread.daemon  # never holds the process up at exit
        got = wait_for(lambda: watch.states.get(member.url), 30, "the loop's first read")
        assert got.error is None and got.ok, got
    finally:
        watch.close()
        assert not watch._thread.is_alive()
        for r in (leader, member):
            r.close()


def test_members_from_lws_edge_cases():
    from firstlight.runner.members import members_from_lws

    base = {"LWS_LEADER_ADDRESS": "sgl-0.sgl.ns", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "0"}
    assert members_from_lws(base, 9) == ["http://sgl-0-1.sgl.ns:9"]
    assert members_from_lws({**base, "LWS_LEADER_ADDRESS": "sgl-0"}, 9) == ["http://sgl-0-1:9"]  # no domain
    assert members_from_lws({**base, "LWS_GROUP_SIZE": "1"}) == []  # a group of one: no members
    for broken in ({"LWS_GROUP_SIZE": "two"}, {"LWS_GROUP_SIZE": ""}, {"LWS_LEADER_ADDRESS": ""}):
        assert members_from_lws({**base, **broken}) == [], broken


def _proxy_env(monkeypatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing there: a read through it fails
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)


def test_the_settling_reads_after_a_failed_leader_go_direct_too(monkeypatch):
    _proxy_env(monkeypatch)
    leader, member = _servers(FAILED)
    watch = MemberWatch([member.url.rstrip("/") + "/"], leader, stall_timeout_s=30.0)
    watch.close()  # only the settling reads below
    try:
        assert watch.urls == [member.url.rstrip("/")]
        watch.summary(FAILED_RESULT)
        assert watch.group is not None and (watch.group.verdict, watch.group.culprit) == (FAILED, member.url)
    finally:
        for r in (leader, member):
            r.close()


def test_the_loop_polls_every_poll_interval_on_its_named_thread(monkeypatch):
    from firstlight.runner.members import POLL_S
    from tests.support.common import wait_for

    assert POLL_S == 1.0  # docs/multinode.md
    monkeypatch.setattr(members_module, "POLL_S", SHORT_POLL_S)
    leader, member = ReadinessServer(), _ready_member()
    polls: list[float] = []

    class Sink:
        def group_update(self, members: list[dict[str, object]], group: dict[str, object]) -> None:
            polls.append(time.monotonic())

    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0)
    watch.sinks.append(Sink())
    try:
        assert watch._thread.name == "firstlight-members"  # what py-spy and a thread dump show
        wait_for(lambda: len(polls) >= 3, 30, "three polls of the loop")
        assert polls[2] - polls[1] >= SHORT_POLL_S * 0.9  # it waits between polls, never spins
    finally:
        watch.close()
        for r in (leader, member):
            r.close()


def test_a_poll_passes_on_the_leaders_own_progress_and_what_was_seen_of_each_member_before():
    """The stall rule weighs the leader's own last progress (the oldest names the leader); a member's restart is
    counted from what the last poll saw of it."""
    now = time.time()
    leader = ReadinessServer()
    with leader.state.lock:
        leader.state.verdict, leader.state.start, leader.state.last_progress_at = "starting", 1, now - 100
    slow = ReadinessServer()
    with slow.state.lock:
        slow.state.verdict, slow.state.start, slow.state.last_progress_at, slow.state.pid = "starting", 1, now - 50, 7
    said: list[str] = []
    watch = MemberWatch([slow.url], leader, stall_timeout_s=30.0, message=said.append)
    watch.close()
    try:
        with _wires() as client:
            g = watch.poll_once(client)
            assert (g.verdict, g.culprit) == ("hung", "leader"), g  # the leader stopped first
            with slow.state.lock:
                slow.state.pid = 8  # another process: a restart
            watch.poll_once(client)
        assert watch.states[slow.url].restarts == 1
        assert said[0].startswith("group: hung (1 member(s)): the leader made no progress since")
    finally:
        for r in (leader, slow):
            r.close()


def test_the_change_message_lists_the_first_three_reasons_and_none_when_there_is_none():
    from firstlight.sim.fixtures import free_port

    leader = ReadinessServer()
    with leader.state.lock:
        leader.state.verdict, leader.state.start, leader.state.last_progress_at = "starting", 1, time.time()
    gone = [f"http://127.0.0.1:{free_port()}" for _ in range(4)]
    said: list[str] = []
    watch = MemberWatch(gone, leader, stall_timeout_s=300.0, message=said.append)
    watch.close()
    member = _ready_member()
    alone = MemberWatch([member.url], leader, stall_timeout_s=300.0, message=said.append)
    alone.close()
    try:
        with _wires() as client:
            g = watch.poll_once(client)
            alone.poll_once(client)
        since = watch.states[gone[0]].unreachable_since  # dated from the first failed read
        assert since is not None and abs(since - time.time()) < 60
        assert said[0] == "group: starting (4 member(s)): " + "; ".join(str(e["message"]) for e in g.evidence[:3])
        assert len(g.evidence) == 4 and str(g.evidence[3]["message"]) not in said[0]
        assert said[1] == "group: starting (1 member(s))"  # every member ready, the leader not yet: no reason
    finally:
        for r in (leader, member):
            r.close()


def test_a_poll_that_raises_is_said_and_the_loop_goes_on(monkeypatch):
    """The members' thread runs under the guard every thread has: an exception escaping a poll (here a sink's)
    is one line saying so, the next polls come as usual, and the first that works says that too."""
    from tests.support.common import wait_for

    leader, member = ReadinessServer(), _ready_member()
    said: list[str] = []
    polls: list[int] = []
    monkeypatch.setattr(members_module, "POLL_S", SHORT_POLL_S)

    class Flaky:
        def group_update(self, members: list[dict[str, object]], group: dict[str, object]) -> None:
            polls.append(1)
            if len(polls) <= 2:
                raise RuntimeError("a sink that breaks")

    watch = MemberWatch([member.url], leader, stall_timeout_s=30.0, message=said.append)
    watch.sinks.append(Flaky())
    try:
        wait_for(lambda: len(polls) >= 4, 30, "polls after the failing ones")
        assert watch._thread.is_alive()
        failed = [m for m in said if "failed" in m]
        assert failed == ["group: the members' poll failed: RuntimeError: a sink that breaks; the group's state is "
                          "the last poll's that worked"]  # the same error twice: said once
        assert "group: the members' poll works again" in said
        assert watch._guard.book.failures == 2
    finally:
        watch.close()
        for r in (leader, member):
            r.close()


def test_members_are_read_side_by_side_so_a_poll_of_many_silent_ones_takes_a_deadline_per_sixteen(monkeypatch):
    """20 members that accept and never answer: the poll takes two request deadlines (16 read at once, then 4), not
    20 one after the other (40 s with the product's 2 s deadline; timed here on a shorter one); and the watch's
    close waits for no more than that."""
    import socket

    from firstlight.runner.members import READERS, poll_bound_s

    deadline_s = 2 * SHORT_REQUEST_S  # the close's margin over a poll is one deadline: room for a busy machine
    monkeypatch.setattr(members_module, "REQUEST_TIMEOUT_S", deadline_s)
    assert (READERS, poll_bound_s(1), poll_bound_s(16), poll_bound_s(17), poll_bound_s(50)) == (
        16, deadline_s, deadline_s, 2 * deadline_s, 4 * deadline_s)
    leader = ReadinessServer()
    with contextlib.ExitStack() as stack:
        urls = []
        for _ in range(20):
            silent = stack.enter_context(socket.socket())
            silent.bind(("127.0.0.1", 0))
            silent.listen(4)
            urls.append(f"http://127.0.0.1:{silent.getsockname()[1]}")
        serial = 20 * deadline_s  # one after the other
        watch = MemberWatch(urls, leader, stall_timeout_s=30.0)
        try:
            t0 = time.monotonic()
            watch.close()  # its loop's first poll of the 20 is in flight
            assert not watch._thread.is_alive() and time.monotonic() - t0 < serial / 2
            with _wires() as client:
                t0 = time.monotonic()
                watch.poll_once(client)
                took = time.monotonic() - t0
            assert all("deadline" in (watch.states[u].error or "") for u in urls), watch.states
            assert poll_bound_s(20) * 0.9 <= took < serial / 2, took
        finally:
            watch.close()
            leader.close()


def test_a_leader_given_its_own_url_as_a_members_leaves_it_out_and_says_so_once():
    """Its own /readyz is 503 until the group is ready, and the group would wait on it for ever: the member that
    answers with the leader's own instance token is left out, said once, and never read again."""
    leader, member = ReadinessServer(), _ready_member()
    with leader.state.lock:
        leader.state.verdict, leader.state.start, leader.state.last_progress_at = READY, 1, 5.0
    said: list[str] = []
    watch = MemberWatch([leader.url, member.url], leader, stall_timeout_s=30.0, message=said.append)
    watch.close()  # its own loop stopped: the polls below are the test's
    try:
        with _wires() as client:
            g = watch.poll_once(client)
            assert (g.verdict, g.serving, g.culprit) == (READY, True, None)
            read = watch.states[leader.url]
            g = watch.poll_once(client)
        assert (g.verdict, g.serving) == (READY, True) and watch.states[leader.url] is read  # not read again
        assert said == [f"group: member {leader.url} is this leader's own readiness endpoint: left out of the "
                        "group", f"group: ready (1 member(s)): member {member.url} (node_rank 1) ready"]
        with leader.state.lock:
            assert [m["url"] for m in leader.state.members] == [member.url]
        assert leader.state.instance != member.state.instance and len(leader.state.instance) == 16
    finally:
        for r in (leader, member):
            r.close()
