"""preflight/port.py: the server's port is free only if a bind succeeds, and when it is taken the check names
who holds it. Every socket here is a real one, every holder a real process.

The in-process tests of this subject; the others: ``tests/e2e/preflight/test_port.py``.
"""

from __future__ import annotations

import dataclasses
import errno
import socket

import pytest

from firstlight.preflight.base import FAIL, OK, WARN
from firstlight.preflight.port import holders, try_bind
from firstlight.preflight.target import read_target
from tests.support.preflight_port import check_port, target


def test_a_free_port_is_ok_because_a_bind_succeeded():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert try_bind("127.0.0.1", port) is None
    c = check_port(target(port))
    assert c.status == OK and c.category == "port_in_use", c
    assert c.evidence == f"127.0.0.1:{port} is free (bind succeeded)"


def test_no_port_in_the_command_skips_the_check():
    t = read_target(["python", "-c", "pass"])
    assert t.port is None
    c = check_port(t)
    assert c.status == OK and c.evidence == "skipped: no port in the command and no engine default", c


def test_no_host_binds_every_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        t = dataclasses.replace(target(port), host=None)
        c = check_port(t)
        # 0.0.0.0 overlaps the listener on 127.0.0.1: a server binding every address would fail the same way
        assert c.status == FAIL and c.evidence.startswith(f"0.0.0.0:{port} is in use"), c
        e = try_bind("", port)
        assert e is not None and e.errno == errno.EADDRINUSE


def test_a_port_left_in_time_wait_is_free_as_servers_bind_it():
    """Servers bind with SO_REUSEADDR: a port whose last connection is in TIME_WAIT binds, so it is free."""
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do; the TIME_WAIT end inherits it
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    port = lst.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    conn, _ = lst.accept()
    conn.close()  # the server's side closes first: its end of the connection (on `port`) goes to TIME_WAIT
    assert cli.recv(1) == b""
    cli.close()
    lst.close()
    with socket.socket() as plain:  # without SO_REUSEADDR the kernel refuses the bind
        with pytest.raises(OSError) as e:
            plain.bind(("127.0.0.1", port))
        assert e.value.errno == errno.EADDRINUSE
    assert try_bind("127.0.0.1", port) is None
    assert check_port(target(port)).status == OK


def test_a_port_bound_but_not_listening_is_in_use_by_someone_unseen():
    """A socket bound and not listening takes the port, but no listener can be named for it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert holders(port) == []
        c = check_port(target(port))
    assert c.status == FAIL and c.category == "port_in_use", c
    assert c.evidence == f"127.0.0.1:{port} is in use by a process this user cannot see"
    assert c.hint == "choose another --port"  # once


def test_a_host_that_is_not_an_address_of_this_machine_is_a_warning():
    c = check_port(target(8000, host="10.255.255.1"))
    assert c.status == WARN and c.category == "port_in_use", c
    assert c.evidence.startswith("cannot bind 10.255.255.1:8000: "), c
    assert c.hint == "check --host: it must be an address of this machine"
    e = try_bind("10.255.255.1", 8000)
    assert e is not None and e.errno == errno.EADDRNOTAVAIL


def test_a_host_that_does_not_resolve_is_a_warning_naming_it():
    e = try_bind("no-such-host.invalid", 8000)
    assert e is not None and e.errno == errno.EADDRNOTAVAIL
    assert e.strerror is not None and e.strerror.startswith("cannot resolve 'no-such-host.invalid': ")
    c = check_port(target(8000, host="no-such-host.invalid"))
    assert c.status == WARN and "cannot bind no-such-host.invalid:8000: cannot resolve" in c.evidence, c


def test_up_checks_the_port_it_will_probe_not_the_engines_default():
    """``up --url http://127.0.0.1:P -- llama-server -m m.gguf``: the command names no port, the URL does; the
    check binds P, never llama.cpp's default 8080 (another server there is not this start's problem: a hunt run
    failed a crash test as port_in_use on 8080, held by a container test's llama-server)."""
    from firstlight.cli.preflight import preflight

    assert read_target(["llama-server", "-m", "m.gguf"]).port == 8080  # the default, without a URL
    assert read_target(["llama-server", "-m", "m.gguf"], reach=("127.0.0.1", 41234)).port == 41234
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))  # bound, so no server could bind it
        port = held.getsockname()[1]
        report = preflight(["llama-server", "-m", "m.gguf"], disk_sample=False, url=f"http://127.0.0.1:{port}")
    check = next(c for c in report.checks if c.name == "port")
    assert check.status == FAIL and f"127.0.0.1:{port}" in check.evidence, check


def test_a_port_this_process_listens_on_names_it_and_how_to_stop_it():
    import os

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        (me,) = holders(port)
        c = check_port(target(port))
    assert me.pid == os.getpid() and me.visible
    assert c.evidence == f"127.0.0.1:{port} is in use by {me.describe()}"
    assert c.hint == f"kill {os.getpid()} (or choose another --port)"


def test_every_listener_is_named_and_each_given_the_redactor(monkeypatch: pytest.MonkeyPatch):
    from types import SimpleNamespace

    from firstlight.preflight import port as p
    from firstlight.preflight.procinfo import ProcInfo
    from firstlight.redact import Redactor

    listen = p.psutil.CONN_LISTEN
    conns = [SimpleNamespace(pid=pid, laddr=SimpleNamespace(port=port), status=status)
             for pid, port, status in ((30, 8001, listen), (20, 8001, listen), (30, 8001, listen),
                                       (40, 8002, listen), (50, 8001, "ESTABLISHED"), (None, 8001, listen))]
    asked: list[tuple[int, object]] = []

    def info(pid: int, redactor: object) -> ProcInfo:
        asked.append((pid, redactor))
        return ProcInfo(pid, True, "srv", f"srv {pid}", "a.service" if pid == 20 else None)

    monkeypatch.setattr(p.psutil, "net_connections", lambda kind: conns if kind == "inet" else [])
    monkeypatch.setattr(p, "proc_info", info)
    monkeypatch.setattr(p, "try_bind", lambda host, port: OSError(errno.EADDRINUSE, "Address already in use"))
    red = Redactor()
    c = p.check_port(read_target(["vllm", "serve", "m", "--port", "8001"], env={}), red)
    assert asked == [(20, red), (30, red)]  # listeners on this port, each once, in pid order
    assert c.evidence == "0.0.0.0:8001 is in use by PID 20 srv, unit a.service: srv 20; PID 30 srv: srv 30"
    assert c.hint == "systemctl stop a.service or kill 30 (or choose another --port)"
