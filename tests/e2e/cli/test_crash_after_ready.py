"""A crash after READY is named (issue 32): a daemonized server (its launcher exited 0) that dies of SIGSEGV
while supervised was "exited with code 0", its launcher's status. A real launcher that daemonizes a real
simulator; firstlight, the subreaper, reaps the daemon and keeps how it ended."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import Output, firstlight_cmd, sim_cmd


def test_a_daemonized_server_that_segfaults_after_ready_is_a_crash(weights: Path):
    port = free_port()
    server = " ".join(sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "0.3"))
    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--no-history", "--poll-min", "0.05", "--serving-interval",
                                         "0", "--url", f"http://127.0.0.1:{port}", "--", "sh", "-c",
                                         f"setsid {server} >/dev/null 2>&1 </dev/null & exit 0"),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    daemon = None
    try:
        output = Output(fl)

        def daemon_named(line: str) -> int | None:
            m = re.search(r"left the server running as pid (\d+)", line)
            return int(m.group(1)) if m else None

        daemon = output.wait_line(daemon_named, 90, "supervision to follow the daemon")
        os.kill(daemon, signal.SIGSEGV)
        out, _ = output.rest(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
    summary = json.loads(out.splitlines()[-1])
    assert summary["verdict"] == "failed" and summary["phase"] == "serving", summary
    assert summary["failure"] == "crashed", summary
    assert "SIGSEGV" in summary["evidence"][0]["value"], summary["evidence"]


def test_the_sidecar_names_a_segfault_after_ready(weights: Path):
    port = free_port()
    engine = subprocess.Popen([*sim_cmd("normal", port), "--model-path", str(weights), "--load-seconds", "0.3"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                              start_new_session=True)  # not reaped until the end: its wait status stays readable
    sidecar = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid", str(engine.pid), "--json",
                                              "--no-history", "--poll-min", "0.05", "--serving-interval", "0",
                                              "--serve-readiness", "127.0.0.1:0"),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    try:
        output = Output(sidecar)
        output.wait_event("summary", 90, "READY", verdict="ready")
        os.kill(engine.pid, signal.SIGSEGV)
        ended = output.wait_event("summary", 60, "the end of serving", verdict="failed")
    finally:
        sidecar.terminate()
        sidecar.wait(30)
        engine.kill()
        engine.wait()
    assert ended["phase"] == "serving" and ended["failure"] == "crashed", ended
    assert "SIGSEGV" in ended["evidence"][0]["value"], ended["evidence"]
