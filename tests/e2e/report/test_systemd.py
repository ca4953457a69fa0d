"""sd_notify over a real unix datagram socket: READY=1 only after a real generation.

The process-starting tests of this subject; the others: ``tests/unit/report/test_systemd.py``.
"""

from __future__ import annotations

import socket
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd


def test_notify_socket_gets_status_extensions_and_ready_only_at_the_end(tmp_path: Path, weights: Path):
    addr = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(addr)
    sock.settimeout(0)
    try:
        port = free_port()
        r = run_firstlight("up", "--json", "--stop-when-ready", "--poll-min", "0.05", "--", *sim_cmd(
            "normal", port, "--model-path", str(weights), "--load-seconds", "1"), env={"NOTIFY_SOCKET": addr})
        messages = []
        while True:
            try:
                messages.append(sock.recv(65536).decode())
            except BlockingIOError:
                break
    finally:
        sock.close()
    assert r.rc == 0, r.stderr[-2000:]
    ready = [i for i, m in enumerate(messages) if "READY=1" in m.split("\n")]
    assert len(ready) == 1
    before = messages[: ready[0]]
    assert any("EXTEND_TIMEOUT_USEC=" in m for m in before)  # the start was progressing: keep systemd waiting
    assert any(m.startswith("STATUS=") or "\nSTATUS=" in m for m in before)
