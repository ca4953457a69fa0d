"""No stop signal is lost, and stderr nobody reads never blocks the run (issue 20).

- A real SIGTERM delivered the moment the READY probe's result is queued (the race the field saw: the judge,
  READY already final, ignored it and firstlight supervised on until a second SIGTERM).
- stderr into a real pipe that nobody reads and that is already full: the verdict, ``/readyz`` and a stop
  signal do not wait for it, and what was dropped is counted.

The process-starting tests of this subject; the others: ``tests/e2e/runner/test_session.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from firstlight.sim.fixtures import free_port
from tests.support.common import REPO, firstlight_cmd, pids_in_group, sim_cmd, wait_for
from tests.support.hostile_signals import _full_pipe

CHECK_S = 60  # far above the rule's seconds: reached only when the defect is back


# Deliver SIGTERM to ourselves right after the probe that makes READY is queued: the signal lands with it.
_SIGNAL_WITH_READY = """
import os, signal, sys
from firstlight.runner.feed import Feed
from firstlight.timeline import Level, Probe
put = Feed.put
def _put(self, obs):
    put(self, obs)
    if isinstance(obs, Probe) and obs.level == Level.GENERATION and obs.ok:
        os.kill(os.getpid(), signal.SIGTERM)
Feed.put = _put
from firstlight.cli.app import main
main(sys.argv[1:])
"""


def _events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_sigterm_that_arrives_with_the_ready_probe_stops_the_run(tmp_path: Path):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-c", _SIGNAL_WITH_READY, "up", "--json", "--no-preflight",
                          "--poll-min", "0.05", "--", *sim_cmd("normal", port, "--load-seconds", "0.5")],
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = p.communicate(timeout=CHECK_S)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    events = _events(out)
    assert p.returncode == 130, err[-2000:]
    assert events[-1]["event"] == "summary" and events[-1]["verdict"] == "interrupted", events[-1]
    assert "SIGTERM received as READY was reached" in json.dumps(events[-1]["evidence"])
    server = next(e["pid"] for e in events if e["event"] == "started")
    assert not pids_in_group(server), "the server was left running"


def test_stderr_into_a_full_pipe_nobody_reads_blocks_neither_readiness_nor_a_stop(tmp_path: Path):
    port, ready_port = free_port(), free_port()
    r, w = _full_pipe()
    out = tmp_path / "out.jsonl"
    with open(out, "w") as stdout:
        p = subprocess.Popen(firstlight_cmd("up", "--json", "--no-preflight", "--poll-min", "0.05",
                                            "--serve-readiness", f"127.0.0.1:{ready_port}", "--",
                                            *sim_cmd("normal", port, "--load-seconds", "0.5")),
                             cwd=REPO, stdout=stdout, stderr=w, stdin=subprocess.DEVNULL, start_new_session=True)
    os.close(w)
    try:
        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{ready_port}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, CHECK_S, "/readyz 200 while stderr is not read")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=CHECK_S) == 130
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        os.close(r)
    events = _events(out.read_text())
    assert events[-1]["event"] == "summary" and events[-1]["verdict"] == "interrupted", events[-1]
    assert not pids_in_group(next(e["pid"] for e in events if e["event"] == "started"))
