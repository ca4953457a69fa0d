"""A worker's readiness seen in /proc (``samplers/ports.worker_listening``, ``worker_connected``): a real child that
listens or holds its connection to its head, is frozen with SIGSTOP, resumes and dies; never connected to
(docs/multinode.md)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import psutil

from firstlight.samplers.ports import worker_connected, worker_listening
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


# a headless node whose child connects to its head when told to (a line on stdin), then holds the connection
NODE = ("import socket, sys, subprocess\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import socket, sys\\n"
        "sys.stdin.readline()\\ns = socket.create_connection((sys.argv[1], int(sys.argv[2])))\\n"
        "print(\"joined\", flush=True)\\nsys.stdin.readline()', sys.argv[1], sys.argv[2]])\n"
        "child.wait()\n")


def test_a_headless_node_is_held_only_while_its_tree_holds_its_connection_to_its_head():
    """``samplers/ports.worker_connected``: a real connection to a head on 127.0.1.1, seen in /proc; a connection
    to another address is not its head's; frozen, not held; the head gone (the kernel closes the connection),
    not held; the node gone, said so."""
    head = socket.create_server(("127.0.1.1", 0))
    port = head.getsockname()[1]
    w = subprocess.Popen([sys.executable, "-c", NODE, "127.0.1.1", str(port)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert w.stdin is not None and w.stdout is not None
        wait_for(lambda: len(psutil.Process(w.pid).children()) == 1, 30, "the node's child")
        assert worker_connected(w.pid, ("127.0.1.1",)) == (
            False, f"no process of pid {w.pid}'s tree is connected to its head (127.0.1.1)")
        w.stdin.write("go\n")
        w.stdin.flush()
        assert w.stdout.readline().strip() == "joined"
        conn, _ = head.accept()
        child = psutil.Process(w.pid).children()[0].pid
        held, seen = worker_connected(w.pid, ("127.0.1.1",))  # the connection is the child's: the tree counts
        assert held and seen == f"pid {child} is connected to its head 127.0.1.1:{port} (seen in /proc, no " \
                                "connection made)"
        assert not worker_connected(w.pid, ("127.0.1.9",))[0]  # another head
        os.killpg(w.pid, signal.SIGSTOP)
        wait_for(lambda: not worker_connected(w.pid, ("127.0.1.1",))[0], 30, "a stopped node is not held")
        assert "is stopped: it serves nothing" in worker_connected(w.pid, ("127.0.1.1",))[1]
        os.killpg(w.pid, signal.SIGCONT)
        wait_for(lambda: worker_connected(w.pid, ("127.0.1.1",))[0], 30, "a resumed node is held again")
        conn.close()  # the head goes: the node's end leaves ESTABLISHED
        head.close()
        wait_for(lambda: not worker_connected(w.pid, ("127.0.1.1",))[0], 30, "a node whose head went is not held")
    finally:
        os.killpg(w.pid, signal.SIGKILL)
        w.wait(timeout=30)
        head.close()
    assert worker_connected(w.pid, ("127.0.1.1",)) == (False, f"pid {w.pid} is gone")
