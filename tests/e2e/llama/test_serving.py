"""The serving checks after READY against the real llama-server (a real model), through `firstlight up`:

- frozen with SIGSTOP (a true hang: the kernel still accepts connections on its port) -> /readyz 503 within
  --serving-interval + --generation-timeout, /livez 503 once nothing completed and no CPU for --stall-timeout,
  WATCHDOG=1 no longer sent on a real NOTIFY_SOCKET datagram socket; SIGCONT -> serving, 200 again, fed again;
- a client sending steady requests: no active check reaches the server (counted in llama-server's own log: each
  request ends with one "stop processing: n_tokens = N" line), while an idle server does get them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, wait_for
from tests.support.llama_server import llama, server_cmd  # noqa: F401 (llama is a fixture)
from tests.support.readiness import answers, get

pytestmark = pytest.mark.llama
INTERVAL, GEN_TIMEOUT, STALL = 2.0, 6.0, 14.0  # generous: READY and checks on a busy 2-core machine
BOUND = INTERVAL + GEN_TIMEOUT  # the README's bound for /readyz 503 after the server stops serving
SLACK = 4.0  # the loop's own steps (0.2 s), the scrape period and a busy 2-core machine's scheduling
WATCHDOG_S = 2.0


class Datagrams:
    """A NOTIFY_SOCKET, as systemd binds it: every datagram with the time it came."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.got: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stop.is_set():
            try:
                self.got.append((time.monotonic(), self.sock.recv(65536).decode()))
            except TimeoutError:
                continue
            except OSError:
                return

    def since(self, t: float, text: str) -> list[float]:
        return [at for at, d in list(self.got) if at >= t and text in d.split("\n")]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.sock.close()


def _up(paths: dict[str, str], port: int, rport: int, *extra: str, env: dict[str, str] | None = None,
        interval: float = INTERVAL) -> subprocess.Popen[str]:
    return subprocess.Popen(firstlight_cmd("up", "--json", "--no-preflight", "--no-history", "--poll-min", "0.05",
                                           "--sample-interval", "0.2", "--serving-interval", str(interval),
                                           "--max-tokens", "2",
                                           "--generation-timeout", str(GEN_TIMEOUT), "--stall-timeout", str(STALL),
                                           "--serve-readiness", f"127.0.0.1:{rport}", *extra, "--",
                                           *server_cmd(paths, port)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})


def _serving(rport: int) -> str | None:
    return (get(rport, "/readyz")[1].get("serving") or {}).get("state")


def test_a_frozen_llama_server_is_not_ready_then_not_live_starves_the_watchdog_and_recovers(
        llama: dict[str, str], tmp_path: Path):  # noqa: F811
    port, rport = free_port(), free_port()
    notify = Datagrams(tmp_path / "notify")
    fl = _up(llama, port, rport, env={"NOTIFY_SOCKET": str(tmp_path / "notify"),
                                       "WATCHDOG_USEC": str(int(WATCHDOG_S * 1e6))})
    pid = None
    try:
        body = wait_for(lambda: answers(rport, "/readyz", 200), 120, "READY")
        pid = body["pid"]
        t = time.monotonic()
        wait_for(lambda: len(notify.since(t, "WATCHDOG=1")) >= 2, 30, "WATCHDOG=1 while serving")

        os.killpg(pid, signal.SIGSTOP)  # frozen: the process lives, its port still accepts
        stopped = time.monotonic()
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        wait_for(lambda: answers(rport, "/readyz", 503), BOUND + SLACK, f"/readyz 503 within {BOUND}s (+{SLACK})")
        assert get(rport, "/livez")[0] == 200  # not yet hung: one failed check only
        wait_for(lambda: answers(rport, "/livez", 503), STALL + BOUND + SLACK, "/livez 503 after --stall-timeout")
        assert _serving(rport) == "hung"
        hung = wait_for(lambda: [at for at, d in list(notify.got) if at >= stopped and d.startswith("STATUS=hung")],
                        10, "STATUS=hung on the notify socket")
        # Two watchdog intervals without WATCHDOG=1: systemd would have restarted the unit.
        wait_for(lambda: time.monotonic() - hung[0] > 2 * WATCHDOG_S, 3 * WATCHDOG_S, "two watchdog intervals")
        assert notify.since(hung[0], "WATCHDOG=1") == []

        os.killpg(pid, signal.SIGCONT)
        resumed = time.monotonic()
        wait_for(lambda: answers(rport, "/readyz", 200), BOUND + SLACK + GEN_TIMEOUT, "/readyz 200 again")
        assert get(rport, "/livez")[0] == 200
        # the first check after the thaw may itself be slow (degraded, still ready); the next one serves
        wait_for(lambda: _serving(rport) == "serving", BOUND + SLACK + GEN_TIMEOUT, "serving again")
        wait_for(lambda: notify.since(resumed, "WATCHDOG=1"), 10, "WATCHDOG=1 again")
        fl.send_signal(signal.SIGTERM)
        out, _ = fl.communicate(timeout=60)
    finally:
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGCONT)
            except OSError:
                pass
        if fl.poll() is None:
            fl.kill()
            fl.communicate()
        notify.close()
    states = [e["state"] for e in map(json.loads, filter(lambda x: x.startswith("{"), out.splitlines()))
              if e["event"] == "serving"]
    assert states[:1] == ["serving"] and "degraded" in states and "hung" in states and states[-1] == "serving", states
    assert fl.returncode == 130


STOP_LINE = re.compile(r"stop processing: n_tokens = (\d+)")
CLIENT_PROMPT = "Count slowly from one to thirty, one number per line, and never stop: one, two, three, four,"


BUSY_INTERVAL = 10.0  # the default: "steady requests" complete more often than this, even on a busy machine


def test_a_busy_llama_server_gets_no_active_check_an_idle_one_does(llama: dict[str, str]):  # noqa: F811
    port, rport = free_port(), free_port()
    fl = _up(llama, port, rport, interval=BUSY_INTERVAL)
    lines: list[tuple[float, int]] = []  # (seen at, n_tokens) of each request llama-server finished

    def read_stderr() -> None:
        assert fl.stderr is not None
        for line in fl.stderr:
            m = STOP_LINE.search(line)
            if m:
                lines.append((time.monotonic(), int(m[1])))

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    sent = 0
    try:
        wait_for(lambda: answers(rport, "/readyz", 200), 120, "READY")
        # The active check: firstlight's 5-token prompt and 1 token, a short line; the client's: 20+ tokens.
        start = time.monotonic()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            while time.monotonic() - start < 3 * BUSY_INTERVAL:
                r = client.post("/v1/completions", json={"prompt": CLIENT_PROMPT, "max_tokens": 4,
                                                         "temperature": 0, "ignore_eos": True})
                assert r.status_code == 200
                sent += 1
        busy_end = time.monotonic()
        # Idle from here: an active check reaches the server within an interval (and a step or two).
        wait_for(lambda: [n for at, n in lines if at > busy_end and n < 15], BUSY_INTERVAL + SLACK + GEN_TIMEOUT,
                 "an active check once the client stopped")
        fl.send_signal(signal.SIGTERM)
        fl.wait(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
    reader.join(timeout=10)
    # Counted on the server, in the order it finished them (its stderr reaches this reader through firstlight, so
    # the time a line is read lags the request: the order, not the clock, places each): the client's requests are
    # there (the count works) ...
    client = [i for i, (_, n) in enumerate(lines) if n >= 15]
    assert len(client) >= sent - 1 and sent >= 5, (sent, len(client))
    # ... and no active check among them once the client's requests flow. One slot serves them in turn, so a
    # check sent while idle, just before the client began, may be queued behind its first request: it is done
    # before the second one is.
    assert [n for _, n in lines[client[1]:client[-1]] if n < 15] == [], lines
