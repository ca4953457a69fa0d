"""The server never inherits systemd's notification variables (issue 32): firstlight is the unit's notifier, so a
wrapper's ``systemd-notify --ready`` (sent as soon as it runs) must not reach systemd before firstlight's READY=1
under ``NotifyAccess=all``. A real unix datagram socket as NOTIFY_SOCKET, a real wrapper, the real CLI."""

from __future__ import annotations

import json
import socket
import sys
import textwrap
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd

SYSTEMD_VARS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def _received(sock: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(sock.recv(65536).decode())
        except BlockingIOError:
            return out


def test_a_wrapper_that_notifies_ready_at_once_never_reaches_the_notify_socket(tmp_path: Path, weights: Path):
    addr, seen = str(tmp_path / "notify.sock"), tmp_path / "env.json"
    wrapper = tmp_path / "wrapper.py"  # what `systemd-notify --ready && exec server` does, and what it was given
    wrapper.write_text(textwrap.dedent(f"""\
        import json, os, socket, sys
        json.dump({{k: v for k, v in os.environ.items() if k.startswith(("NOTIFY_", "WATCHDOG_"))}},
                  open({str(seen)!r}, "w"))
        if os.environ.get("NOTIFY_SOCKET"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.sendto(b"READY=1\\nSTATUS=from the wrapper", os.environ["NOTIFY_SOCKET"])
        os.execv(sys.argv[1], sys.argv[1:])
        """))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(addr)
    sock.settimeout(0)
    try:
        r = run_firstlight("up", "--json", "--stop-when-ready", "--no-preflight", "--poll-min", "0.05", "--",
                           sys.executable,
                           str(wrapper), *sim_cmd("normal", free_port(), "--model-path", str(weights),
                                                  "--load-seconds", "1"),
                           env={"NOTIFY_SOCKET": addr, "WATCHDOG_USEC": "60000000", "NOTIFY_EXTRA": "x"})
        messages = _received(sock)
    finally:
        sock.close()
    assert r.rc == 0, r.stderr[-2000:]
    assert json.loads(seen.read_text()) == {}, "the server was given systemd's notification variables"
    assert not any("from the wrapper" in m for m in messages), messages
    ready = [m for m in messages if "READY=1" in m.split("\n")]
    assert len(ready) == 1, messages  # firstlight's own, after a real generation
    assert any("WATCHDOG=1" in m.split("\n") for m in messages)  # firstlight itself still uses them
