"""The stale-server check (firstlight/preflight/stale.py) against a real process tree: a server of the same
engine on the same port, with worker processes of the same command line (forked, as TP ranks are), is one
stale server, reported once by its root's PID, not once per worker."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil

from firstlight.preflight import read_target
from firstlight.preflight.base import FAIL, WARN
from firstlight.preflight.stale import check_stale
from firstlight.sim.fixtures import free_port
from tests.support.common import wait_for

# bash under the name llama-server: its two forked subshells (the workers) keep its command line.
TREE = "(while :; do sleep 1; done) & (while :; do sleep 1; done) & wait"


def _stale_server(model: Path, port: int) -> tuple[subprocess.Popen[bytes], list[int]]:
    p = subprocess.Popen(["bash", "-c", f'exec -a llama-server bash -c "$0" -m {model} --port {port}', TREE],
                         start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def workers() -> list[int]:
        try:
            kids = psutil.Process(p.pid).children()
            return [k.pid for k in kids if k.cmdline()[:1] == ["llama-server"]]
        except psutil.Error:
            return []

    return p, wait_for(lambda: len(workers()) == 2 and workers(), 30, "the stale server's two workers")


def _stop(p: subprocess.Popen[bytes]) -> None:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)


def test_a_stale_server_with_workers_is_reported_once_by_its_root(tmp_path: Path):
    model, port = tmp_path / "m.gguf", free_port()
    model.write_bytes(b"GGUF")
    p, workers = _stale_server(model, port)
    try:
        c = check_stale(read_target(["llama-server", "-m", str(model), "--port", str(port)]))
        other = check_stale(read_target(["llama-server", "-m", str(model), "--port", str(free_port())]))
    finally:
        _stop(p)
    assert (c.status, c.category) == (FAIL, "port_in_use"), c
    assert c.evidence.count("same port: ") == 1 and f"PID {p.pid}" in c.evidence, c.evidence
    assert not any(f"PID {w}" in c.evidence for w in workers), (workers, c.evidence)
    assert c.hint is not None and " or " not in c.hint, c.hint  # one way to stop it, not one per worker
    assert other.status == WARN and other.evidence.count("same model: ") == 1, other.evidence
