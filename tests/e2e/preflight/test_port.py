"""preflight/port.py: the server's port is free only if a bind succeeds, and when it is taken the check names
who holds it. Every socket here is a real one, every holder a real process.

The process-starting tests of this subject; the others: ``tests/unit/preflight/test_port.py``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from firstlight.preflight.base import FAIL
from firstlight.preflight.port import holders
from firstlight.preflight.target import read_target
from firstlight.redact import Redactor
from tests.support.common import run_firstlight
from tests.support.preflight_port import check_port, target

HOLDER = """
import socket, sys, time
s = socket.socket()
if sys.argv[2] == "reuseport":
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(1)
print(s.getsockname()[1], flush=True)
sys.stdin.readline()
"""


@contextmanager
def holder(tmp: Path, port: int = 0, mode: str = "plain") -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """A real process listening on 127.0.0.1:port (0: any) until the test ends."""
    script = tmp / "holder.py"
    script.write_text(HOLDER)
    p = subprocess.Popen([sys.executable, str(script), str(port), mode, "--api-key", "sk-holder-secret"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        yield int(p.stdout.readline()), p
    finally:
        p.kill()
        p.wait()


def test_a_port_held_by_another_process_names_it_and_says_how_to_stop_it(tmp_path: Path):
    with holder(tmp_path) as (port, p):
        c = check_port(target(port))
    assert c.status == FAIL and c.category == "port_in_use", c
    assert c.evidence.startswith(f"127.0.0.1:{port} is in use by PID {p.pid} "), c
    assert "--api-key" in c.evidence and "sk-holder-secret" not in c.evidence  # the holder's secret masked
    assert c.hint == f"kill {p.pid} (or choose another --port)"


def test_a_holders_command_line_is_shown_through_the_redactor(tmp_path: Path):
    with holder(tmp_path, 0, "plain") as (port, p):
        c = check_port(target(port), Redactor([str(tmp_path / "holder.py")]))
        assert [h.cmdline for h in holders(port, Redactor(["reuseport-not-there", "plain"]))] == [
            f"{sys.executable} {tmp_path / 'holder.py'} 0 *** --api-key ***"]  # started with port 0
    assert c.status == FAIL and f"PID {p.pid} " in c.evidence, c
    assert str(tmp_path / "holder.py") not in c.evidence and "***" in c.evidence


def test_every_holder_of_a_shared_port_is_named(tmp_path: Path):
    """Two processes listening with SO_REUSEPORT share the port: both are named, and both in the fix."""
    with holder(tmp_path, 0, "reuseport") as (port, p1), holder(tmp_path, port, "reuseport") as (_, p2):
        c = check_port(target(port))
        assert [h.pid for h in holders(port)] == sorted([p1.pid, p2.pid])
    assert c.status == FAIL, c
    first, second = sorted([p1.pid, p2.pid])
    assert f"is in use by PID {first} " in c.evidence and f"; PID {second} " in c.evidence, c
    assert c.hint == f"kill {first} or kill {second} (or choose another --port)"


def test_holders_are_only_the_listeners_on_that_port(tmp_path: Path):
    with holder(tmp_path) as (port, p), socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        assert [h.pid for h in holders(port)] == [p.pid]
        client = socket.create_connection(("127.0.0.1", port))  # a connected socket from us is no holder
        try:
            assert [h.pid for h in holders(port)] == [p.pid]
        finally:
            client.close()


# -- preflight/port.py: a busy port is a failure, whoever holds it --------------------------------------------
@contextmanager
def _listening_socket() -> Iterator[int]:
    """A plain listening socket (no engine, no HTTP): the port is taken all the same."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def test_a_port_held_by_a_plain_socket_fails_preflight():
    with _listening_socket() as port:
        c = check_port(read_target(["llama-server", "-m", "m.gguf", "--host", "127.0.0.1", "--port", str(port)]))
        assert c.status == FAIL and c.category == "port_in_use", c
        assert f"127.0.0.1:{port} is in use" in c.evidence
        r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", "llama-server", "--host", "127.0.0.1",
                           "--port", str(port))
    checks = {c["name"]: c for c in r.events[-1]["checks"]}
    assert checks["port"]["status"] == "fail", checks["port"]
    assert r.rc == 1, r.stderr
