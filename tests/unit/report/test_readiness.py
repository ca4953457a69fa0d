"""--serve-readiness: /readyz, /livez and /startupz from firstlight's state, and the sidecar loop that watches
start after start (the simulated server as the engine; the real llama-server is in test_readiness_llama.py).

The in-process tests of this subject; the others: ``tests/e2e/report/test_readiness.py`` and
``tests/e2e/hostile/test_readiness.py``.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from firstlight.assessment import Assessment, Evidence, Progress
from firstlight.report import readiness
from firstlight.report.readiness import (
    MAX_CONNECTIONS,
    REQUEST_TIMEOUT_S,
    ReadinessServer,
    ReadinessState,
    _progressed_at,
    parse_bind,
)
from firstlight.result import RunResult
from firstlight.serving import ServingStatus
from firstlight.timeline import Level
from firstlight.vocab import VERDICTS
from tests.support.common import wait_for
from tests.support.docs import PAGES
from tests.support.readiness import _assessment, _outcome, get


@pytest.fixture
def server() -> Iterator[ReadinessServer]:
    """A readiness server on a free loopback port, closed after the test."""
    srv = ReadinessServer("127.0.0.1", 0)
    try:
        yield srv
    finally:
        srv.close()


def test_endpoints_answer_from_the_state_they_are_told(server: ReadinessServer):
    p = server.port
    assert get(p, "/livez")[0] == 200 and get(p, "/readyz")[0] == 503  # waiting for the first start
    server.started({"pid": 4242})
    server.status(_assessment())
    code, body = get(p, "/readyz")
    assert code == 503 and body["phase"] == "weights_loading" and body["level"] == "port"
    assert body["eta_s"] == 42.0 and body["progress"]["weights_fraction"] == 0.4 and body["pid"] == 4242
    assert set(body) >= {"phase", "level", "progress", "eta_s", "verdict", "evidence"}
    assert get(p, "/startupz")[0] == 503 and get(p, "/livez")[0] == 200
    ready = _outcome("ready", level="generation", ready_at=1.0,
                     evidence=({"signal": "probe:generation", "value": "' Paris'", "since": 1.0},)).result
    server.verdict(ready)
    assert [get(p, e)[0] for e in ("/readyz", "/livez", "/startupz")] == [200, 200, 200]
    assert get(p, "/readyz")[1]["evidence"][0]["signal"] == "probe:generation"
    server.summary(ready.died_serving(0, 2.0))  # supervision: the server died
    assert [get(p, e)[0] for e in ("/readyz", "/livez", "/startupz")] == [503, 503, 503]
    server.started({"pid": 4243})  # the next start: alive again, startup not reached yet
    assert [get(p, e)[0] for e in ("/readyz", "/livez", "/startupz")] == [503, 200, 503]
    assert get(p, "/readyz")[1]["start"] == 2
    server.summary(_outcome("hung").result)
    assert get(p, "/livez")[0] == 503
    assert get(p, "/nope")[0] == 404 and get(p, "/readyz/x")[0] == 404
    assert httpx.post(f"http://127.0.0.1:{p}/readyz", timeout=2).status_code == 405
    assert httpx.head(f"http://127.0.0.1:{p}/livez", timeout=2).status_code == 503


def test_a_client_that_sends_nothing_does_not_block_the_endpoints(server: ReadinessServer):
    silent = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(20)]
    assert get(server.port, "/livez")[0] == 200  # more idle connections than the concurrency cap
    for s in silent:
        s.close()


@pytest.mark.parametrize("spec, expected", [("8081", ("127.0.0.1", 8081)), (":8081", ("127.0.0.1", 8081)),
                                            ("0.0.0.0:9", ("0.0.0.0", 9)), ("[::1]:80", ("::1", 80))])
def test_bind_specs(spec: str, expected: tuple[str, int]):
    assert parse_bind(spec) == expected


def test_a_client_trickling_its_request_is_dropped_at_the_deadline(server: ReadinessServer, monkeypatch):
    """The whole request's deadline (5 s, timed here on 1.5 s) cuts a client whose every read is in time."""
    assert REQUEST_TIMEOUT_S == 5.0  # README
    deadline_s = 1.5
    monkeypatch.setattr(readiness, "REQUEST_TIMEOUT_S", deadline_s)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sent, closed = 0, False
    request = b"GET /readyz HTTP/1.0\r\n" + b"X-Slow: " + b"a" * 200
    t_end = time.monotonic() + deadline_s * 6  # a byte every 0.5 s: each read well within its timeout
    while time.monotonic() < t_end:
        try:
            sock.send(request[sent:sent + 1])
            sent += 1
            sock.settimeout(0.5)
            if sock.recv(1) == b"":
                closed = True
                break
        except TimeoutError:
            continue
        except OSError:
            closed = True
            break
    sock.close()
    assert closed, f"still held after {sent} bytes trickled over {deadline_s * 6:.0f}s"


def test_connection_threads_are_capped():
    server = ReadinessServer("127.0.0.1", 0)
    socks = []
    try:
        base = threading.active_count()
        for _ in range(MAX_CONNECTIONS * 3):
            try:
                socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))  # and say nothing
            except OSError:
                break
        peak, until = 0, time.monotonic() + 1.0  # sampled while the idle clients are held (REQUEST_TIMEOUT_S)
        while time.monotonic() < until:
            peak = max(peak, threading.active_count())
            time.sleep(0.05)
        assert len(socks) > 2 * MAX_CONNECTIONS
        # at most 2 x MAX_CONNECTIONS open (MAX still sending, as many being cut to make room: their threads end
        # at once), each a handler and its deadline timer
        assert peak <= base + 4 * MAX_CONNECTIONS, peak - base
    finally:
        for s in socks:
            s.close()
        server.close()
    server = ReadinessServer("127.0.0.1", 0)  # and it answers
    try:
        assert httpx.get(f"{server.url}/livez", timeout=5).status_code == 200
    finally:
        server.close()


@pytest.mark.parametrize("spec, port", [("0", 0), ("127.0.0.1:65535", 65535), ("HOSTX:80", 80)])
def test_bind_ports_0_to_65535_and_the_host_kept_as_given(spec: str, port: int):
    host, got = parse_bind(spec)
    assert got == port and host == ("HOSTX" if spec.startswith("HOSTX") else "127.0.0.1")


@pytest.mark.parametrize("spec", ["65536", "127.0.0.1:x", "host:"])
def test_a_bad_bind_spec_is_one_line_naming_the_option_and_the_range(spec: str):
    with pytest.raises(ValueError) as e:
        parse_bind(spec, "--serve-readiness")
    assert str(e.value) == (f"--serve-readiness {spec!r}: expected HOST:PORT with a port 0..65535 "
                            "(e.g. 127.0.0.1:8081)")


def test_the_state_a_start_resets_and_a_summary_takes_phase_level_progress_and_pid(server: ReadinessServer):
    st = server.state
    server.started({"pid": 4242})
    assert (st.phase, st.level, st.pid, st.serving, st.reached_ready) == ("process_start", "none", 4242, None,
                                                                            False)
    server.status(_assessment())
    ready = _outcome("ready", level="generation", ready_at=1.0,
                     progress={"weights_fraction": 1.0, "eta_total_s": 7.0}).result
    server.summary(ready)
    assert (st.verdict, st.phase, st.level, st.progress, st.eta_s, st.pid) == (
        "ready", "ready", "generation", {"weights_fraction": 1.0, "eta_total_s": 7.0}, 7.0, 4242)
    server.started({"pid": 5})
    server.summary(_outcome("hung", pid=77).result)
    assert (st.phase, st.pid) == ("weights_loading", 77)


def test_a_bad_bind_spec_names_serve_readiness_by_default():
    with pytest.raises(ValueError, match=r"^--serve-readiness 'x:y': "):
        parse_bind("x:y")


# -- a node's last progress (the group's stall rule reads it: docs/multinode.md) --------------------------------
def _at(phase: str = "weights_loading", read_bytes: int = 0, line: str | None = None,
        since_log: float | None = None) -> Assessment:
    return Assessment("starting", phase, Level.PORT, 3.0, [],
                      Progress(read_bytes=read_bytes, progress_line=line, since_last_log_s=since_log))


def _state(phase: str = "weights_loading", progress: dict[str, object] | None = None,
           last: float | None = 100.0) -> ReadinessState:
    st = ReadinessState()
    st.phase, st.progress, st.last_progress_at = phase, progress or {}, last
    return st


@pytest.mark.parametrize(("state", "a", "at"), [
    (_state(), _at("kv_cache"), 200.0),  # a new phase
    (_state(progress={"read_bytes": 10}), _at(read_bytes=11), 200.0),  # more weight bytes read
    (_state(progress={"read_bytes": 10}), _at(read_bytes=10), 100.0),  # the same: no progress
    (_state(), _at(read_bytes=1), 200.0),  # none recorded yet: the first byte counts
    (_state(), _at(read_bytes=0), 100.0),
    (_state(progress={"progress_line": "1/4"}), _at(line="2/4"), 200.0),  # a new progress line
    (_state(progress={"progress_line": "1/4"}), _at(line="1/4"), 100.0),  # the same line again
    (_state(), _at(line=""), 100.0),  # no line
    (_state(), _at(since_log=50.0), 150.0),  # its last log line, 50 s ago
    (_state(), _at(since_log=150.0), 100.0),  # a log line older than the progress already seen
    (_state(last=None), _at(since_log=199.5), 0.5),  # none seen yet: the log line's time
    (_state(last=None), _at(), None),  # nothing to date it by
])
def test_a_nodes_last_progress_is_a_phase_bytes_a_progress_line_or_its_last_log_line(state: ReadinessState,
                                                                                      a: Assessment,
                                                                                      at: float | None):
    assert _progressed_at(state, a, 200.0) == at


def test_the_status_dates_the_progress_and_carries_the_evidence(server: ReadinessServer,
                                                                monkeypatch: pytest.MonkeyPatch):
    server.started({"pid": 1})
    ev = Evidence("log", "Loading weights took 3.2 s", 2.0)
    a = Assessment("starting", "kv_cache", Level.PORT, 3.0, [ev], Progress())
    before = time.time()
    server.status(a)
    assert before <= (server.state.last_progress_at or 0) <= time.time()
    assert server.state.evidence == [ev.to_dict()]


def test_a_start_takes_the_engines_role_and_rank_unless_told(monkeypatch: pytest.MonkeyPatch):
    told = ReadinessServer("127.0.0.1", 0, node_rank=3, role="leader")
    plain = ReadinessServer("127.0.0.1", 0)
    try:
        info = {"pid": 1, "role": "worker", "node_rank": 1}
        told.started(info)
        plain.started(info)
        assert (told.state.role, told.state.node_rank) == ("leader", 3)
        assert (plain.state.role, plain.state.node_rank) == ("worker", 1)
        plain.state.node_rank = None
        plain.started({"pid": 2, "node_rank": "1"})  # not a rank
        assert plain.state.node_rank is None
    finally:
        told.close()
        plain.close()


def test_a_new_start_clears_the_last_starts_detail_and_time(server: ReadinessServer):
    server.started({"pid": 1})
    server.status(Assessment("starting", "kv_cache", Level.PORT, 30.0, [], Progress(), detail="busy-wait"))
    server.started({"pid": 2})
    assert (server.state.detail, server.state.elapsed_s) == (None, 0.0)


class _Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_700_000_000.0 + self.now


def test_status_events_go_out_at_most_once_a_second(server: ReadinessServer, monkeypatch: pytest.MonkeyPatch):
    clock = _Clock()
    monkeypatch.setattr(readiness, "time", clock)
    for t in (1.5, 2.0, 2.49, 2.5, 3.0, 3.5):  # a clock 1.5 s after its zero: the first status goes out
        clock.now = t
        server.status(_assessment())
    events = [json.loads(data) for _, data in server.events.after(0, 0)[0]]
    assert [e["event"] for e in events] == ["status"] * 3  # at 1.5, 2.5 and 3.5


def test_the_serving_checks_status_is_kept_and_sent_only_when_it_changed(server: ReadinessServer):
    status = ServingStatus("serving", "first check passed", 5.0, True, True)
    server.serving(status, changed=False)
    assert server.state.serving is None and server.events.after(0, 0)[0] == []
    server.serving(status, changed=True)
    assert server.state.serving == status.to_dict()
    [(_, data)] = server.events.after(0, 0)[0]
    assert json.loads(data)["event"] == "serving" and json.loads(data)["state"] == "serving"
    server.message("bench: 12.5 tokens/s")
    first = server.events.first_id
    assert json.loads(server.events.after(first, 0)[0][0][1])["message"] == "bench: 12.5 tokens/s"


def _result(verdict: str, started: float, ended: float, ready: float | None = None,
            **kw: object) -> RunResult:
    return RunResult(verdict=verdict, phase="weights_loading", started_at=started, ended_at=ended, ready_at=ready,
                     engine="sim", url="http://127.0.0.1:1", **kw)  # type: ignore[arg-type]


def test_the_summary_freezes_the_time_at_ready_or_at_its_end(server: ReadinessServer):
    server.started({"pid": 1})
    server.summary(_result("failed", 1000.0, 1000.5))
    assert server.state.elapsed_s == 0.5
    server.started({"pid": 1})
    server.summary(_result("ready", 1000.0, 1090.0, ready=1060.0))
    assert server.state.elapsed_s == 60.0
    server.started({"pid": 1})
    server.summary(_result("failed", 1000.0, 999.0))  # a clock stepped back: never negative
    assert server.state.elapsed_s == 0.0


def test_the_summary_keeps_the_judges_detail_unless_it_has_its_own(server: ReadinessServer):
    server.started({"pid": 1})
    server.status(Assessment("starting", "kv_cache", Level.PORT, 3.0, [], Progress(), detail="busy-wait"))
    server.summary(_result("hung", 1000.0, 1001.0))
    assert server.state.detail == "busy-wait"
    server.started({"pid": 1})
    server.summary(_result("hung", 1000.0, 1001.0, detail="no progress for 120 s"))
    assert server.state.detail == "no progress for 120 s"


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_head_answers_the_headers_of_get_without_its_body(server: ReadinessServer):
    got = _raw(server.port, b"GET /livez HTTP/1.0\r\n\r\n")
    head = _raw(server.port, b"HEAD /livez HTTP/1.0\r\n\r\n")
    body = got.partition(b"\r\n\r\n")[2]
    assert body
    assert head.endswith(b"\r\n\r\n") and f"Content-Length: {len(body)}".encode() in head


def test_a_method_other_than_get_or_head_is_405_saying_which_are_allowed(server: ReadinessServer):
    for method in (b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS"):
        got = _raw(server.port, method + b" /readyz HTTP/1.0\r\n\r\n")
        headers, _, body = got.partition(b"\r\n\r\n")
        lines = headers.split(b"\r\n")
        assert lines[0].startswith(b"HTTP/1.0 405") and b"Allow: GET, HEAD" in lines
        assert b"Content-Length: 0" in lines and body == b""


# -- the state's own words ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("verdict", "start", "serving", "state"), [
    ("ready", 0, None, "starting"),  # an outcome before any start began: still waiting
    ("starting", 1, None, "starting"),
    ("ready", 1, None, "ready"),  # no serving check yet: the verdict
    ("ready", 1, {"state": "degraded"}, "degraded"),  # the serving checks' state once there is one
    ("regression", 1, {"state": "serving"}, "serving"),
    ("ready", 1, {"ready": True}, "ready"),  # a status without a state
    ("failed", 1, {"state": "serving"}, "failed"),  # a start that ended: its verdict, whatever the checks said
])
def test_the_state_is_starting_then_the_serving_checks_state_else_the_verdict(verdict: str, start: int,
                                                                             serving: dict[str, object] | None,
                                                                             state: str):
    st = ReadinessState()
    st.verdict, st.start, st.serving = verdict, start, serving
    assert st.snapshot()["state"] == state


def test_elapsed_seconds_are_kept_to_the_millisecond():
    st = ReadinessState()
    st.elapsed_s = 1.23456
    assert st.snapshot()["elapsed_seconds"] == 1.235


def test_a_start_dates_the_nodes_last_progress_at_its_beginning(server: ReadinessServer):
    before = time.time()
    server.started({"pid": 1})
    assert before <= (server.state.last_progress_at or 0) <= time.time()


# -- the answers' bytes ------------------------------------------------------------------------------------------
def _headers(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    return lines[0], {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}, body


def test_an_answer_is_uncached_json_of_its_stated_length(server: ReadinessServer):
    server.state.progress = {"model_dir": Path("/models/llama")}  # a value JSON lacks: written as its text
    status, headers, body = _headers(_raw(server.port, b"GET /livez HTTP/1.0\r\n\r\n"))
    assert status.startswith("HTTP/1.0 200")
    assert headers["content-type"] == "application/json" and headers["cache-control"] == "no-store"
    assert int(headers["content-length"]) == len(body) and body.endswith(b"\n")
    assert json.loads(body)["progress"] == {"model_dir": "/models/llama"}


def test_a_query_string_is_not_part_of_the_path(server: ReadinessServer):
    assert _headers(_raw(server.port, b"GET /livez?verbose=1 HTTP/1.0\r\n\r\n"))[0].startswith("HTTP/1.0 200")
    assert _headers(_raw(server.port, b"GET /livez?a=1?b=2 HTTP/1.0\r\n\r\n"))[0].startswith("HTTP/1.0 200")
    status, headers, _ = _headers(_raw(server.port, b"HEAD /events?a=1?b HTTP/1.0\r\n\r\n"))
    assert status.startswith("HTTP/1.0 200") and headers["content-type"] == "text/event-stream"


def test_a_probe_beyond_the_concurrency_bound_gets_a_503_at_once():
    server = ReadinessServer("127.0.0.1", 0)
    taken = 0
    try:
        while server._server.slots.acquire(blocking=False):  # every slot busy
            taken += 1
        assert taken == readiness.MAX_CONCURRENT
        code, body = get(server.port, "/livez")  # get's own 2 s timeout: a probe that waited would fail it
        assert (code, body) == (503, {"error": "too many concurrent requests"})
    finally:
        for _ in range(taken):
            server._server.slots.release()
        server.close()


def test_a_request_is_marked_answered_before_its_answer(monkeypatch: pytest.MonkeyPatch):
    server = ReadinessServer("127.0.0.1", 0)
    seen: list[list[bool]] = []
    real = server.state.snapshot

    def snapshot() -> dict[str, object]:
        seen.append(list(server._server._open.values()))
        return real()

    monkeypatch.setattr(server.state, "snapshot", snapshot)
    try:
        assert get(server.port, "/livez")[0] == 200
        assert seen == [[True]]  # not one to shed any more
        wait_for(lambda: not server._server._open and not server._server._deadlines, 10,
                 "the connection forgotten once answered")
    finally:
        server.close()


# -- admission: at most MAX_CONNECTIONS still sending, the oldest shed -----------------------------------------------
@pytest.fixture
def bare():
    """The server's admission bookkeeping alone (no thread serves it); each request a real socket pair."""
    srv = readiness._Server(("127.0.0.1", 0), ReadinessState())
    pairs: list[tuple[socket.socket, socket.socket]] = []

    def conn() -> tuple[socket.socket, socket.socket]:
        pairs.append(socket.socketpair())
        return pairs[-1]

    yield srv, conn
    for a, b in pairs:
        a.close()
        b.close()
    srv.server_close()


def _cut_seen(peer: socket.socket) -> bool:
    peer.settimeout(5)
    return peer.recv(1) == b""  # the server's end was shut down


def test_the_oldest_connection_still_sending_is_shed_for_a_new_one(bare):
    srv, conn = bare
    pairs = [conn() for _ in range(MAX_CONNECTIONS)]
    assert all(srv._admit(mine) for mine, _ in pairs)
    assert srv._shed == set()
    srv.answering(pairs[0][0])  # the oldest was read in full: it is being answered, not shed
    new, _ = conn()
    assert srv._admit(new)
    assert srv._shed == {pairs[1][0]} and _cut_seen(pairs[1][1])
    assert srv._open[new] is False and srv._open[pairs[0][0]] is True


def test_connections_being_answered_are_never_shed(bare):
    srv, conn = bare
    pairs = [conn() for _ in range(MAX_CONNECTIONS)]
    for mine, _ in pairs:
        srv._admit(mine)
        srv.answering(mine)
    assert not srv._admit(conn()[0])  # all answering: the new one is refused
    assert srv._shed == set()


def test_shed_connections_still_closing_do_not_count_and_cuts_pending_are_bounded(bare):
    srv, conn = bare
    first = [conn()[0] for _ in range(MAX_CONNECTIONS)]
    for mine in first:
        srv._admit(mine)
    second = [conn()[0] for _ in range(MAX_CONNECTIONS)]
    assert all(srv._admit(mine) for mine in second)  # each sheds one of the first
    assert srv._shed == set(first) and len(srv._open) == 2 * MAX_CONNECTIONS
    assert not srv._admit(conn()[0])  # twice the bound open, cuts pending: refused, nothing more cut
    assert srv._shed == set(first)
    for mine in second[:2]:  # two answered and closed
        srv._closed(mine)
    for mine in first[:2]:  # two of the shed closed
        srv._closed(mine)
    assert len(srv._open) - len(srv._shed) == MAX_CONNECTIONS - 2
    assert srv._admit(conn()[0])  # under the bound: admitted, nobody cut
    assert len(srv._shed) == MAX_CONNECTIONS - 2


def test_a_connection_closed_is_forgotten_everywhere(bare):
    srv, conn = bare
    mine, _ = conn()
    srv._admit(mine)
    srv._shed.add(mine)
    srv._deadlines[mine] = threading.Timer(60, lambda: None)
    other, _ = conn()
    srv._admit(other)
    srv._closed(mine)
    assert mine not in srv._open and mine not in srv._shed and mine not in srv._deadlines
    assert other in srv._open
    srv.answering(mine)  # a late mark for a connection gone: not re-added
    assert mine not in srv._open


def test_cutting_a_socket_already_closed_is_quiet():
    a, b = socket.socketpair()
    b.close()
    a.close()
    readiness._cut(a)


def test_a_refused_connection_leaves_no_traceback(capsys: pytest.CaptureFixture[str]):
    server = ReadinessServer("127.0.0.1", 0)
    held: list[socket.socket] = []
    try:
        srv = server._server
        with srv._lock:  # every connection answering: the next one is refused
            for _ in range(MAX_CONNECTIONS):
                s = socket.socket()
                srv._open[s] = True
                held.append(s)
        c = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        assert c.recv(1) == b""  # closed without an answer
        c.close()
    finally:
        with server._server._lock:
            for s in held:
                server._server._open.pop(s, None)
                s.close()
        server.close()
    assert "Traceback" not in capsys.readouterr().err


def test_a_fresh_state_is_waiting_for_its_first_start():
    st = ReadinessState()
    assert st.snapshot() == {
        "state": "starting", "detail": None, "elapsed_seconds": None, "verdict": "starting", "phase": None,
        "level": "none", "progress": {}, "eta_s": None, "evidence": [], "start": 0, "pid": None,
        "instance": st.instance, "reached_ready": False, "serving": None, "last_progress_at": None,
        "node_rank": None, "role": None, "members": [], "group": None}
    assert st.probed is False and not st.final_read.is_set()


def test_every_answer_says_whether_it_is_ok(server: ReadinessServer):
    assert get(server.port, "/livez")[1]["ok"] is True
    assert get(server.port, "/readyz")[1]["ok"] is False


def test_an_unknown_path_is_named_with_the_endpoints_there_are(server: ReadinessServer):
    code, body = get(server.port, "/" + "x" * 200)
    assert (code, body) == (404, {"error": "unknown path /" + "x" * 99, "endpoints": list(readiness.ENDPOINTS)})
    status, _, raw = _headers(_raw(server.port, b"HEAD /nope HTTP/1.0\r\n\r\n"))
    assert status.startswith("HTTP/1.0 404") and raw == b""


def test_a_refusal_for_concurrency_answers_head_without_a_body():
    server = ReadinessServer("127.0.0.1", 0)
    taken = 0
    try:
        while server._server.slots.acquire(blocking=False):
            taken += 1
        status, _, raw = _headers(_raw(server.port, b"HEAD /livez HTTP/1.0\r\n\r\n"))
        assert status.startswith("HTTP/1.0 503") and raw == b""
    finally:
        for _ in range(taken):
            server._server.slots.release()
        server.close()


def test_a_probe_marks_the_node_watched_and_a_final_verdict_read(server: ReadinessServer):
    server.started({"pid": 1})
    get(server.port, "/livez")
    assert server.state.probed is True and not server.state.final_read.is_set()  # a live verdict: not final
    server.summary(_outcome("hung").result)
    get(server.port, "/livez")
    assert server.state.final_read.is_set()


def test_a_failed_node_being_watched_answers_until_its_verdict_was_read(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(readiness, "LINGER_S", 0.3)
    server = ReadinessServer("127.0.0.1", 0)
    server.started({"pid": 1})
    get(server.port, "/livez")  # a leader watches this node
    server.summary(_outcome("failed").result)  # and has not read this verdict yet
    t0 = time.monotonic()
    server.close()
    assert time.monotonic() - t0 >= 0.3  # waited for the read, up to its bound


@pytest.mark.parametrize(("probed", "verdict"), [(False, "failed"), (True, "ready")])
def test_a_node_nobody_watches_or_that_serves_closes_at_once(monkeypatch: pytest.MonkeyPatch, probed: bool,
                                                             verdict: str):
    monkeypatch.setattr(readiness, "LINGER_S", 60.0)
    server = ReadinessServer("127.0.0.1", 0)
    server.started({"pid": 1})
    if probed:
        get(server.port, "/livez")
    server.summary(_outcome(verdict, **({"level": "generation", "ready_at": 1.0} if verdict == "ready" else {}))
                   .result)
    t0 = time.monotonic()
    server.close()
    assert time.monotonic() - t0 < 30  # not the 60 s linger


def test_the_server_thread_is_named_and_does_not_hold_the_process(server: ReadinessServer):
    assert server._thread is not None
    assert server._thread.name == "firstlight-readiness" and server._thread.daemon


def test_a_state_kept_unserved_binds_nothing_and_closes_at_once():
    """A group's leader without --serve-readiness: the state is kept, no port is bound, no thread serves."""
    kept = ReadinessServer(serve=False)
    try:
        assert (kept.port, kept._server, kept._thread) == (0, None, None)
        kept.started({"pid": 1, "started_at": 0.0})
        assert kept.state.snapshot()["verdict"] == "starting" and kept.state.start == 1
    finally:
        kept.close()


def test_an_ipv6_address_is_served_on_ipv6():
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    server = ReadinessServer("::1", 0)
    try:
        assert server.url == f"http://[::1]:{server.port}"
        with socket.create_connection(("::1", server.port), timeout=5) as c:
            c.sendall(b"GET /livez HTTP/1.0\r\n\r\n")
            assert c.recv(12).startswith(b"HTTP/1.0 200")
    finally:
        server.close()


@pytest.mark.parametrize("path", ["/nope", "/readyz"])
def test_a_client_that_resets_before_its_answer_leaves_no_traceback(server: ReadinessServer, path: str,
                                                                   capsys: pytest.CaptureFixture[str]):
    """A probe that gives up (a kubelet's timeout, a curl stopped) resets its connection; the answer cannot be
    written. Nothing to tell: no traceback on firstlight's stderr, and the connection is forgotten."""
    for _ in range(20):  # the reset lands before the read, or between the read and the answer's write
        c = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends a RST
        c.close()
    assert get(server.port, "/livez")[0] == 200  # accepted after the 20: each of them was accepted before it
    wait_for(lambda: not server._server._open, 10, "every reset connection's thread ended")
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Error" not in err, err


def test_a_failure_inside_an_answer_is_one_line_not_a_traceback(server: ReadinessServer,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]):
    def broken() -> dict[str, object]:
        raise ValueError("no snapshot")

    monkeypatch.setattr(server._server.state, "snapshot", broken)
    c = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    c.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.recv(1) == b""  # closed without an answer
    c.close()
    wait_for(lambda: not server._server._open, 10, "the connection's thread ended")
    err = capsys.readouterr().err
    assert err == "firstlight: readiness endpoint: ValueError: no snapshot\n", err


# -- which verdicts serve ----------------------------------------------------------------------------------------
# docs/kubernetes.md: /readyz is 200 once the verdict is `ready`, "`regression` too: it serves". A regression is a
# server slower than its baseline, still serving: a 503 would take a serving pod out of its Service.
_SERVES = {"ready": True, "regression": True, "failed": False, "hung": False, "timeout": False,
           "interrupted": False}


def test_every_final_verdict_has_a_stated_readiness():
    assert set(_SERVES) == set(VERDICTS) - {"starting"}  # a verdict added to the vocabulary gets a case here


@pytest.mark.parametrize("verdict", sorted(_SERVES))
def test_a_start_judged_regression_answers_readyz_200_as_ready_does(server: ReadinessServer, verdict: str):
    server.started({"pid": 4242})
    result = _outcome("ready" if verdict == "regression" else verdict, ready_at=time.time()).result
    if verdict == "regression":  # how the product makes one: a ready start the history found slower
        result = result.with_history({"run": 1}, [{"metric": "ttft_s", "value": 2.0, "baseline": 1.0}], 2)
    assert result.verdict == verdict
    server.summary(result)
    code, body = get(server.port, "/readyz")
    assert body["verdict"] == verdict
    assert code == (200 if _SERVES[verdict] else 503)
    assert body["ok"] is _SERVES[verdict]
    if _SERVES[verdict]:  # it serves: alive and started, as a ready one
        assert [get(server.port, e)[0] for e in ("/livez", "/startupz")] == [200, 200]


def _docs_endpoint_verdicts() -> dict[tuple[str, str], set[str]]:
    """(endpoint, "200" | "503") -> the verdicts docs/kubernetes.md's endpoint table names in that cell."""
    out: dict[tuple[str, str], set[str]] = {}
    for line in PAGES["docs/kubernetes.md"].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`GET /"):
            path = cells[0].strip("`").split()[1]
            for status, cell in zip(("200", "503"), cells[1:], strict=True):
                out[(path, status)] = {v for v in VERDICTS if f"`{v}`" in cell}
    return out


@pytest.mark.parametrize("verdict", sorted(_SERVES))
def test_every_endpoint_answers_each_final_verdict_as_the_docs_table_says(server: ReadinessServer, verdict: str):
    docs = _docs_endpoint_verdicts()
    serving, not_live, ended = docs[("/readyz", "200")], docs[("/livez", "503")], docs[("/startupz", "503")]
    assert serving == {"ready", "regression"} and not_live == ended == {"hung", "failed"}  # the table as read
    server.started({"pid": 4242})
    result = _outcome("ready" if verdict == "regression" else verdict, ready_at=time.time()).result
    if verdict == "regression":
        result = result.with_history({"run": 1}, [{"metric": "ttft_s", "value": 2.0, "baseline": 1.0}], 2)
    server.summary(result)
    got = {e: get(server.port, e)[0] for e in ("/readyz", "/livez", "/startupz")}
    assert got == {"/readyz": 200 if verdict in serving else 503,
                   "/livez": 503 if verdict in not_live else 200,
                   "/startupz": 200 if verdict in serving and verdict not in ended else 503}
