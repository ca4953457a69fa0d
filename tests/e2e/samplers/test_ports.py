"""Who listens on a port and who holds a connection (``firstlight.samplers.ports``), in process against real sockets
and processes on loopback: a worker's readiness seen in /proc (``worker_listening``, ``worker_connected``: a real
child that listens or holds its connection to its head, is frozen with SIGSTOP, resumes and dies; never connected
to, docs/multinode.md), the system's holders of a port, a holder older than the launch (``foreign_listener``) and
a process's start to the clock tick."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from firstlight.samplers import ports
from firstlight.samplers.ports import Holder, worker_connected, worker_listening
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
        assert worker_listening(w.pid, port)[1] == \
            f"pid {w.pid} is stopped: it serves nothing (port {port} not checked)"
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


def test_a_holder_is_described_by_pid_and_name_or_as_unseen():
    assert Holder(42, "vllm", "0.0.0.0:8000").describe() == "pid 42 (vllm) on 0.0.0.0:8000"
    assert Holder(None, None, "[::]:8000").describe() == "a process firstlight cannot see on [::]:8000"


@pytest.fixture
def listener():
    s = socket.create_server(("127.0.0.1", 0))
    yield s, s.getsockname()[1]
    s.close()


def test_the_holders_of_a_port_are_the_processes_listening_on_it(listener):
    _, port = listener
    found, why = ports.holders(port)
    if why is not None:
        pytest.skip(why)
    assert found == [Holder(os.getpid(), psutil.Process().name(), f"127.0.0.1:{port}")]
    assert ports.holders(free_port()) == ([], None)


def test_a_connection_to_a_port_does_not_hold_it(listener):
    s, port = listener
    c = socket.create_connection(("127.0.0.1", port), timeout=5)  # ESTABLISHED on both ends, not LISTEN
    try:
        conn, _ = s.accept()
        s.close()
        found, why = ports.holders(port)
        assert (found, why) == ([], None)
        assert not ports.tree_listens([psutil.Process()], port)
        conn.close()
    finally:
        c.close()


def test_a_holder_whose_name_cannot_be_read_is_named_with_a_question_mark(listener, monkeypatch):
    _, port = listener

    def gone(pid: int) -> psutil.Process:
        raise psutil.NoSuchProcess(pid)

    monkeypatch.setattr(ports.psutil, "Process", gone)
    found, why = ports.holders(port)
    assert why is None and found == [Holder(os.getpid(), "?", f"127.0.0.1:{port}")]


@pytest.mark.parametrize(("error", "why"), [
    (psutil.AccessDenied(), "listing the system's sockets needs privileges here"),
    (PermissionError(13, "Permission denied"), "cannot list sockets: [Errno 13] Permission denied"),
])
def test_a_socket_list_that_cannot_be_read_says_why(monkeypatch, error: Exception, why: str):
    def refuse(kind: str) -> list[object]:
        raise error

    monkeypatch.setattr(ports.psutil, "net_connections", refuse)
    assert ports.holders(8000) == ([], why)


def test_the_tree_listens_when_one_of_its_processes_does(listener):
    _, port = listener
    me = psutil.Process()
    assert ports.tree_listens([me], port)
    assert not ports.tree_listens([me], free_port())
    assert not ports.tree_listens([], port)


def test_a_process_gone_from_the_tree_is_skipped(listener):
    _, port = listener
    child = subprocess.Popen([sys.executable, "-c", ""])
    proc = psutil.Process(child.pid)
    child.wait(timeout=30)
    assert ports.tree_listens([proc, psutil.Process()], port)  # the gone one raises; the next still counts


def test_a_process_start_is_read_to_the_clock_tick():
    before = time.time()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    after = time.time()
    try:
        started = ports._started_at(child.pid)
        assert started is not None
        # a tick is 10 ms and /proc/uptime has hundredths: never more than 30 ms early, where psutil's
        # whole-second boot time may be a second early (late only by the time between reading /proc/uptime and
        # the clock, which a busy machine can stretch)
        assert before - 0.03 <= started <= after + 1.0
    finally:
        child.kill()
        child.wait(timeout=30)
    assert ports._started_at(child.pid) is None  # reaped: no such process


def test_without_proc_uptime_the_start_is_psutils(monkeypatch):
    real_open = open

    def no_uptime(path, *args, **kwargs):
        if path == "/proc/uptime":
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        monkeypatch.setattr("builtins.open", no_uptime)
        assert ports._started_at(child.pid) == psutil.Process(child.pid).create_time()
    finally:
        monkeypatch.undo()
        child.kill()
        child.wait(timeout=30)


def test_a_holder_older_than_the_launch_outside_the_tree_is_foreign(listener):
    _, port = listener
    _, why = ports.holders(port)
    if why is not None:
        pytest.skip(why)
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        tree = [psutil.Process(child.pid)]
        launched_at = time.time()  # this test's process listened before this "launch"
        assert ports.foreign_listener(tree, port, launched_at) == (
            f"port {port} is held by pid {os.getpid()} ({psutil.Process().name()}) on 127.0.0.1:{port} "
            "(there before the launch), not by the launched server")
        started = ports._started_at(os.getpid())
        assert started is not None
        assert ports.foreign_listener(tree, port, started - 1) is None  # a holder newer than the launch: a proxy
        assert ports.foreign_listener([*tree, psutil.Process()], port, launched_at) is None  # the tree's own
        assert ports.foreign_listener(tree, free_port(), launched_at) is None  # nobody holds it
    finally:
        child.kill()
        child.wait(timeout=30)


def test_a_holder_in_the_tree_is_not_foreign_even_when_the_tree_does_not_list_it(listener, monkeypatch):
    """The tree's own pids are skipped among the system's holders (the tree's socket list may be refused)."""
    _, port = listener
    if ports.holders(port)[1] is not None:
        pytest.skip("the system's sockets cannot be listed here")
    monkeypatch.setattr(ports, "tree_listens", lambda procs, port: False)
    assert ports.foreign_listener([psutil.Process()], port, time.time()) is None
    assert ports.foreign_listener([], port, time.time()) is not None


def test_a_holder_firstlight_cannot_see_or_date_is_not_foreign(monkeypatch):
    monkeypatch.setattr(ports, "holders", lambda port: ([Holder(None, None, "127.0.0.1:1"),
                                                         Holder(999_999_999, "x", "127.0.0.1:1")], None))
    assert ports.foreign_listener([], 1, time.time()) is None


def _ipv6() -> bool:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        return False
    return True


HOLD = ("import socket, sys\ns = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)\n"
        "print('joined', flush=True)\nsys.stdin.readline()")


@pytest.mark.parametrize(("heads", "listen", "peer", "held"), [
    (("localhost",), "127.0.0.1", "127.0.0.1", True),
    (("localhost",), "::1", "::1", True),
    (("localhost",), "127.0.1.1", "127.0.1.1", False),
    (("127.0.1.1",), "127.0.1.1", "::ffff:127.0.1.1", True),  # an IPv6 socket to a v4 head: the mapped address
    (("0:0:0:0:0:0:0:1",), "::1", "::1", True),  # a head's address in any spelling
    (("head-0.vllm.svc",), "127.0.1.2", "127.0.1.2", True),  # a host name is never resolved: any peer
    (("head-0.vllm.svc", "127.0.1.9"), "127.0.1.2", "127.0.1.2", True),
    ((), "127.0.1.2", "127.0.1.2", False),
])
def test_a_head_is_matched_by_address_localhost_by_both_loopbacks_and_a_name_by_any_peer(heads, listen: str,
                                                                                          peer: str, held: bool):
    if ":" in listen and not _ipv6():
        pytest.skip("no IPv6 loopback here")
    head = socket.create_server((listen, 0), family=socket.AF_INET6 if ":" in listen else socket.AF_INET)
    port = head.getsockname()[1]
    node = subprocess.Popen([sys.executable, "-c", HOLD, peer, str(port)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert node.stdout is not None and node.stdout.readline().strip() == "joined"
        got, seen = worker_connected(node.pid, heads)
    finally:
        node.kill()
        node.wait(timeout=30)
        head.close()
    assert got is held
    if held:
        shown = peer.removeprefix("::ffff:")
        assert seen == f"pid {node.pid} is connected to its head {shown}:{port} (seen in /proc, no connection made)"
    else:
        assert seen == f"no process of pid {node.pid}'s tree is connected to its head ({', '.join(heads) or 'any'})"


def test_a_holder_is_named_by_its_own_process_name(tmp_path: Path):
    exe = tmp_path / "fl-holder"
    exe.symlink_to(sys.executable)  # the kernel names a process after the file it ran
    port = free_port()
    code = ("import socket, sys\ns = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
            "print('ok', flush=True)\nsys.stdin.readline()")
    holder = subprocess.Popen([str(exe), "-c", code, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        found, why = ports.holders(port)
        if why is not None:
            pytest.skip(why)
        assert found == [Holder(holder.pid, "fl-holder", f"127.0.0.1:{port}")]
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_every_older_holder_outside_the_tree_is_named(monkeypatch: pytest.MonkeyPatch):
    me = os.getpid()
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        mine = psutil.Process(other.pid)
        monkeypatch.setattr(ports, "holders", lambda port: ([Holder(None, None, "0.0.0.0:1"),  # unseen: skipped
                                                             Holder(other.pid, "mine", "0.0.0.0:1"),  # the tree's
                                                             Holder(me, "a", "127.0.0.1:1"),
                                                             Holder(me, "b", "[::1]:1")], None))
        assert ports.foreign_listener([mine], 1, time.time() + 5) == (
            f"port 1 is held by pid {me} (a) on 127.0.0.1:1, pid {me} (b) on [::1]:1 (there before the launch), "
            "not by the launched server")
    finally:
        other.kill()
        other.wait(timeout=30)


def test_a_holder_started_at_the_launch_itself_is_not_older(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(ports, "holders", lambda port: ([Holder(os.getpid(), "a", "127.0.0.1:1")], None))
    monkeypatch.setattr(ports, "_started_at", lambda pid: 1000.0)
    assert ports.foreign_listener([], 1, 1000.0) is None
    assert ports.foreign_listener([], 1, 1000.001) is not None


def test_a_tree_that_listens_on_the_port_has_no_foreign_holder(listener, monkeypatch: pytest.MonkeyPatch):
    """What the system lists does not matter once the tree itself listens (its socket list is the truth)."""
    _, port = listener
    monkeypatch.setattr(ports, "holders", lambda p: ([Holder(1, "init", f"0.0.0.0:{p}")], None))
    assert ports.foreign_listener([psutil.Process()], port, time.time() + 5) is None
    assert ports.foreign_listener([psutil.Process()], free_port(), time.time() + 5) is not None


def test_a_grandchild_listening_holds_the_worker():
    port = free_port()
    grandchild = ("import socket, sys\ns = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
                  "print('listening', flush=True)\nsys.stdin.readline()")
    # the worker runs a child that runs the listener: the socket is two generations down
    spawn = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', *sys.argv[1:]])"
    w = subprocess.Popen([sys.executable, "-c", spawn, spawn, grandchild, str(port)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert w.stdout is not None and w.stdout.readline().strip() == "listening"
        listener = psutil.Process(w.pid).children()[0].children()[0]
        assert listener.net_connections(kind="tcp")  # the grandchild holds the socket
        assert worker_listening(w.pid, port) == (
            True, f"pid {w.pid} listens on port {port} (seen in /proc, no connection made)")
    finally:
        os.killpg(w.pid, signal.SIGKILL)
        w.wait(timeout=30)


HOLD_AMONG_LISTENERS = ("import socket, sys\nheld = [socket.create_server(('127.0.0.1', 0)) for _ in range(20)]\n"
                        "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)\n"
                        "print('joined', flush=True)\nsys.stdin.readline()")


def test_a_process_gone_and_sockets_that_are_not_connections_are_passed_over(monkeypatch: pytest.MonkeyPatch):
    head = socket.create_server(("127.0.1.1", 0))
    port = head.getsockname()[1]
    gone = subprocess.Popen([sys.executable, "-c", ""])
    dead = psutil.Process(gone.pid)
    gone.wait(timeout=30)
    node = subprocess.Popen([sys.executable, "-c", HOLD_AMONG_LISTENERS, "127.0.1.1", str(port)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert node.stdout is not None and node.stdout.readline().strip() == "joined"
        live = psutil.Process(node.pid)
        monkeypatch.setattr(ports, "_tree", lambda pid: ([dead, live], ""))
        assert worker_connected(node.pid, ("127.0.1.1",))[0]  # past the gone one, past 20 listening sockets
    finally:
        node.kill()
        node.wait(timeout=30)
        head.close()


@pytest.mark.parametrize(("heads", "peer"), [
    (("127.0.1.1",), "127.0.0.1"),  # loopback counts only for a head named localhost
    (("127.0.1.5", "127.0.1.6"), "127.0.0.1"),
])
def test_a_connection_to_another_address_is_not_to_the_head(heads: tuple[str, ...], peer: str):
    head = socket.create_server((peer, 0))
    port = head.getsockname()[1]
    node = subprocess.Popen([sys.executable, "-c", HOLD, peer, str(port)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert node.stdout is not None and node.stdout.readline().strip() == "joined"
        assert worker_connected(node.pid, heads) == (
            False, f"no process of pid {node.pid}'s tree is connected to its head ({', '.join(heads)})")
    finally:
        node.kill()
        node.wait(timeout=30)
        head.close()
