"""Who holds a port (issue 15, item 2): a real listening socket in another process, found by pid."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from firstlight.samplers.ports import accepts, foreign_listener, holders, tree_listens
from firstlight.sim.server import free_port
from tests.conftest import wait_for

LISTEN = "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', int(sys.argv[1])))\ns.listen()\n" \
         "print('ok', flush=True)\ntime.sleep(600)"


def test_the_holder_of_a_port_is_found_and_is_foreign_to_a_later_launch():
    port = free_port()
    other = subprocess.Popen([sys.executable, "-c", LISTEN, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "ok"
        assert accepts("127.0.0.1", port)
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
    wait_for(lambda: not accepts("127.0.0.1", port), 10, "the port to close")
