"""sd_notify over a real unix datagram socket: READY=1 only after a real generation.

The in-process tests of this subject; the others: ``tests/e2e/report/test_systemd.py``.
"""

from __future__ import annotations

import socket
from pathlib import Path

from firstlight.assessment import Assessment, Progress
from firstlight.report.systemd import SystemdNotifier
from firstlight.result import RunResult
from firstlight.timeline import Level


def _notifier(tmp_path: Path) -> tuple[socket.socket, SystemdNotifier]:
    addr = str(tmp_path / "n.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(addr)
    sock.settimeout(0)
    return sock, SystemdNotifier(address=addr, interval=0.0)


def _received(sock: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(sock.recv(65536).decode())
        except BlockingIOError:
            return out


def _assessment(verdict: str) -> Assessment:
    return Assessment(verdict=verdict, phase="weights_loading", level=Level.PROCESS, elapsed_s=10.0, evidence=[],
                      progress=Progress())


def test_extend_timeout_is_sent_only_while_the_start_progresses(tmp_path: Path):
    sock, n = _notifier(tmp_path)
    try:
        n.status(_assessment("starting"))
        n.status(_assessment("hung"))
        first, second = _received(sock)
    finally:
        sock.close()
        n.close()
    assert "EXTEND_TIMEOUT_USEC=" in first
    assert "EXTEND_TIMEOUT_USEC=" not in second  # hung: let TimeoutStartSec bite


def test_a_regression_keeps_the_unit_serving(tmp_path: Path):
    sock, n = _notifier(tmp_path)
    ready = RunResult(verdict="ready", phase="ready", started_at=0.0, ended_at=5.0, engine="sglang", url="u",
                      ready_at=5.0, first_generation={"latency_s": 0.1, "text": "x"})
    slower = ready.with_history({"cold_start_s": 2.0}, [{"message": "cold start 5.0s vs baseline 2.0s"}], 7)
    try:
        assert slower.verdict == "regression" and slower.serving
        n.verdict(slower)
        n.summary(slower)
        n.summary(ready.died_serving(1, 20.0))
        messages = _received(sock)
    finally:
        sock.close()
        n.close()
    assert "READY=1" in messages[0].split("\n")
    assert not any("STOPPING=1" in m for m in messages[:2]), messages
    assert "STOPPING=1" in messages[-1]  # only when serving really ended


def test_a_worker_is_ready_to_systemd_without_a_generation(tmp_path: Path):
    sock, n = _notifier(tmp_path)
    worker = RunResult(verdict="ready", phase="ready", started_at=0.0, ended_at=2.0, engine="llamarpc", url="u",
                       ready_at=2.0)
    try:
        n.verdict(worker)
        (message,) = _received(sock)
    finally:
        sock.close()
        n.close()
    assert message.split("\n")[:2] == ["READY=1", "STATUS=serving: a worker, seen serving in /proc"], message
