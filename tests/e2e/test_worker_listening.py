"""A worker's readiness seen in /proc (``samplers/ports.worker_listening``): a real child that listens, is frozen
with SIGSTOP, resumes and dies; never connected to (docs/multinode.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

from firstlight.samplers.ports import worker_listening
from firstlight.sim.fixtures import free_port
from tests.support.common import wait_for

# a worker whose listening socket appears only when it is told to (a line on stdin), in a child of its own
WORKER = ("import socket, sys, subprocess\n"
          "child = subprocess.Popen([sys.executable, '-c', 'import socket, sys\\n"
          "sys.stdin.readline()\\ns = socket.socket()\\ns.bind((\"127.0.0.1\", int(sys.argv[1])))\\n"
          "s.listen(1)\\nprint(\"listening\", flush=True)\\nsys.stdin.readline()', sys.argv[1]])\n"
          "child.wait()\n")


def test_a_worker_is_held_only_while_its_tree_listens_and_runs():
    port = free_port()
    w = subprocess.Popen([sys.executable, "-c", WORKER, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        assert w.stdin is not None and w.stdout is not None
        wait_for(lambda: len(psutil.Process(w.pid).children()) == 1, 30, "the worker's child")
        held, seen = worker_listening(w.pid, port)
        assert not held and seen == f"no process of pid {w.pid}'s tree listens on port {port}"
        w.stdin.write("go\n")
        w.stdin.flush()
        assert w.stdout.readline().strip() == "listening"
        held, seen = worker_listening(w.pid, port)  # the socket is the child's: the tree counts
        assert held and seen == f"pid {w.pid} listens on port {port} (seen in /proc, no connection made)"
        os.killpg(w.pid, signal.SIGSTOP)
        wait_for(lambda: not worker_listening(w.pid, port)[0], 30, "a stopped worker is not held")
        assert "is stopped: it serves nothing" in worker_listening(w.pid, port)[1]
        os.killpg(w.pid, signal.SIGCONT)
        wait_for(lambda: worker_listening(w.pid, port)[0], 30, "a resumed worker is held again")
    finally:
        os.killpg(w.pid, signal.SIGKILL)
        w.wait(timeout=30)
    assert worker_listening(w.pid, port) == (False, f"pid {w.pid} is gone")
