"""systemd's watchdog is fed between READY=1 and the serving checks (issue 32): a 6 s warm-up or benchmark left
it unfed, and systemd killed a healthy unit (a 2 s ``WatchdogSec``). A real datagram socket as NOTIFY_SOCKET, a
real simulator generating 4 tokens a second, and a SIGTERM that ends the supervised run cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import Output, firstlight_cmd, pids_in_group, sim_cmd, wait_for


def _read_all(sock: socket.socket, got: list[str]) -> None:
    """Read as systemd does, at once (a full datagram queue blocks the sender)."""
    while True:
        try:
            got.append(sock.recv(65536).decode())
        except OSError:  # closed by the test
            return


@pytest.mark.parametrize("after", [
    ["--warmup", "3"],
    ["--bench", "--bench-requests", "3", "--bench-concurrency", "1", "--bench-output-len", "8"],
], ids=["warmup", "bench"])
def test_the_watchdog_is_fed_between_ready_and_the_serving_checks(tmp_path: Path, weights: Path, after: list[str]):
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    got: list[str] = []
    threading.Thread(target=_read_all, args=(sock, got), daemon=True).start()
    port = free_port()
    env = {**os.environ, "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"}
    env.pop("WATCHDOG_PID", None)
    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--no-history", "--poll-min", "0.05", "--sample-interval",
                                         "0.2", "--serving-interval", "1", *after, "--",
                                         *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds",
                                                  "0.3", "--token-rate", "4")),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL,
                          env=env)
    try:
        output = Output(fl)
        # The READY summary comes as supervision starts, after the warm-up or benchmark.
        output.wait_event("summary", 120, "supervision")
        wait_for(lambda: any(d.startswith("STATUS=serving") for d in got), 60, "the first serving check's STATUS=")
        fl.send_signal(signal.SIGTERM)
        out, _ = output.rest(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    ready = next(i for i, d in enumerate(got) if "READY=1" in d)
    checks = next(i for i, d in enumerate(got) if i > ready and d.startswith("STATUS=serving"))
    fed = [d for d in got[ready + 1:checks] if "WATCHDOG=1" in d]
    summary = json.loads(out.splitlines()[-1])
    after_ready = summary.get("warmup") or summary.get("bench") or {}
    assert after_ready, summary
    assert len(fed) >= 3, got  # about one a second through ~6 s of requests; one at most before the fix
    assert fl.returncode == 130 and summary["verdict"] == "interrupted"  # SIGTERM still ends it cleanly
    assert not pids_in_group(summary["pid"])
