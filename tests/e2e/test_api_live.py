"""The Python API while its block runs (issue 32): ``server.serving`` is the live state of the serving checks,
not None until the block exits; ``repr(server)`` never shows the URL's password. A real simulator."""

from __future__ import annotations

import os
import signal

import firstlight
from firstlight.sim.server import free_port
from tests.conftest import sim_cmd, wait_for


def test_server_serving_follows_the_serving_checks_inside_the_block():
    port = free_port()
    with firstlight.up(sim_cmd("normal", port, "--load-seconds", "0.5"), timeout=60, history=False,
                       serving_interval=0.5, generation_timeout=3) as server:
        wait_for(lambda: server.serving is not None and server.serving.state == "serving", 30,
                 "the first serving check, inside the block")
        os.kill(server.pid, signal.SIGSTOP)  # frozen: its checks time out
        try:
            wait_for(lambda: server.serving is not None and server.serving.state != "serving", 60,
                     "the serving state to change inside the block")
        finally:
            os.kill(server.pid, signal.SIGCONT)
        wait_for(lambda: server.serving is not None and server.serving.state == "serving", 60,
                 "serving again once it runs again")
    assert server.serving is not None  # the last state stays after the block
