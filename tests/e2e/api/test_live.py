"""The Python API while its block runs (issue 32): ``server.serving`` is the live state of the serving checks,
not None until the block exits; ``repr(server)`` never shows the URL's password. A real simulator."""

from __future__ import annotations

import os
import signal

import firstlight
from firstlight.sim.fixtures import free_port
from tests.support.common import sim_cmd, wait_for


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


def test_repr_of_a_server_masks_the_urls_password_and_secret_query():
    port = free_port()
    url = f"http://admin:Pa55-repr-word@127.0.0.1:{port}/?api_key=ak-repr-0123456789"
    with firstlight.up(sim_cmd("normal", port, "--load-seconds", "0.2"), url=url, timeout=60, history=False) as server:
        shown = repr(server)
    assert "Pa55-repr-word" not in shown and "ak-repr-0123456789" not in shown, shown
    assert "127.0.0.1" in shown and "verdict='ready'" in shown, shown
    assert "Pa55-repr-word" in server.url  # the caller's own URL stays usable
