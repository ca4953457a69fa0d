"""--serve-readiness: /readyz, /livez and /startupz from firstlight's state, and the sidecar loop that watches
start after start (the simulated server as the engine; the real llama-server is in test_readiness_llama.py).

The in-process tests of this subject; the others: ``tests/e2e/test_readiness.py``.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_readiness.py``.
"""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from firstlight.report.readiness import MAX_CONNECTIONS, REQUEST_TIMEOUT_S, ReadinessServer, parse_bind
from tests.support.readiness import _assessment, _outcome, get


def test_endpoints_answer_from_the_state_they_are_told():
    server = ReadinessServer("127.0.0.1", 0)
    p = server.port
    try:
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
    finally:
        server.close()


def test_a_client_that_sends_nothing_does_not_block_the_endpoints():
    server = ReadinessServer("127.0.0.1", 0)
    try:
        silent = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(20)]
        assert get(server.port, "/livez")[0] == 200  # more idle connections than the concurrency cap
        for s in silent:
            s.close()
    finally:
        server.close()


@pytest.mark.parametrize("spec, expected", [("8081", ("127.0.0.1", 8081)), (":8081", ("127.0.0.1", 8081)),
                                            ("0.0.0.0:9", ("0.0.0.0", 9)), ("[::1]:80", ("::1", 80))])
def test_bind_specs(spec: str, expected: tuple[str, int]):
    assert parse_bind(spec) == expected


def test_a_client_trickling_its_request_is_dropped_at_the_deadline():
    server = ReadinessServer("127.0.0.1", 0)
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sent, closed = 0, False
        request = b"GET /readyz HTTP/1.0\r\n" + b"X-Slow: " + b"a" * 200
        t_end = time.monotonic() + REQUEST_TIMEOUT_S * 6  # a byte every 0.5 s: each read well within its timeout
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
        assert closed, f"still held after {sent} bytes trickled over {REQUEST_TIMEOUT_S * 6:.0f}s"
    finally:
        server.close()


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
        peak, until = 0, time.monotonic() + REQUEST_TIMEOUT_S / 2  # sampled while the idle clients are held
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


def test_the_state_a_start_resets_and_a_summary_takes_phase_level_progress_and_pid():
    server = ReadinessServer("127.0.0.1", 0)
    try:
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
    finally:
        server.close()
