"""Who holds a port (issue 15, item 2): a real listening socket in another process, found by pid."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

from firstlight.samplers.ports import foreign_listener, holders, tree_listens
from firstlight.sim.fixtures import free_port
from firstlight.wire.client import port_open
from tests.support.common import Run, run_firstlight, sim_cmd, wait_for
from tests.support.llama_server import llama, server_cmd  # noqa: F401 - the real-engine fixture

LISTEN = "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', int(sys.argv[1])))\ns.listen()\n" \
         "print('ok', flush=True)\ntime.sleep(600)"


def test_the_holder_of_a_port_is_found_and_is_foreign_to_a_later_launch():
    port = free_port()
    other = subprocess.Popen([sys.executable, "-c", LISTEN, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "ok"
        assert port_open(f"http://127.0.0.1:{port}", 0.5)
        found, why = holders(port)
        if why is None:  # the system's socket list is readable here: the pid is named
            assert other.pid in {h.pid for h in found}
        me = psutil.Process()
        assert tree_listens([psutil.Process(other.pid)], port)
        assert not tree_listens([me], port)
        launched_at = time.time() + 1  # the other server was there before "our" launch
        evidence = foreign_listener([me], port, launched_at)
        if why is None:
            assert evidence is not None and f"pid {other.pid}" in evidence
        assert foreign_listener([psutil.Process(other.pid)], port, launched_at) is None  # our own tree: fine
        assert foreign_listener([me], port, 0.0) is None  # a holder newer than the launch (a port proxy)
    finally:
        other.kill()
        other.wait()
    wait_for(lambda: not port_open(f"http://127.0.0.1:{port}", 0.5), 10, "the port to close")


def _other_server(port: int, weights: Path) -> subprocess.Popen[bytes]:
    """Another server, already serving on the port (a real OpenAI-compatible process: the simulator)."""
    other = subprocess.Popen(sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: port_open(f"http://127.0.0.1:{port}", 0.5), 30, "the other server to listen")
    return other


def _assert_port_in_use(r: Run, other: subprocess.Popen[bytes]) -> None:
    assert r.rc == 1, r.stderr[-3000:]
    s = r.summary
    assert s["verdict"] == "failed" and s["failure"] == "port_in_use", s
    assert "generation" not in s["levels"]  # the other server's answers never counted
    assert str(other.pid) in json.dumps(s["evidence"]) or "already" in json.dumps(s["evidence"])


def test_a_port_another_server_answers_on_is_port_in_use_not_ready(weights: Path, reap: list[int]):
    port = free_port()
    other = _other_server(port, weights)
    reap.append(other.pid)
    try:
        r = run_firstlight("up", "--json", "--stop-when-ready", "--no-history", "--poll-min", "0.05", "--",
                           *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0"))
        _assert_port_in_use(r, other)
    finally:
        other.kill()
        other.wait()


def test_the_real_llama_server_on_a_taken_port_fails_with_port_in_use(llama: dict[str, str], weights: Path,  # noqa: F811
                                                                      reap: list[int]):
    port = free_port()
    other = _other_server(port, weights)
    reap.append(other.pid)
    try:
        r = run_firstlight("up", "--json", "--stop-when-ready", "--no-history", "--poll-min", "0.05", "--",
                           *server_cmd(llama, port))
        _assert_port_in_use(r, other)
    finally:
        other.kill()
        other.wait()
