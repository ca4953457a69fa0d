"""A zombie in the server's tree is reported (issue 32; the README promised it, the sampler dropped zombies before
the rule saw them): a server whose child exited and is never reaped gets one warning naming it, with its
evidence. A real server process and a real unreaped child, the real CLI."""

from __future__ import annotations

import sys
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, sim_cmd

# A server that leaves a child unreaped: it forks a child that exits at once, then becomes the simulated server
# (exec keeps the pid, and the child stays its zombie: the new program never waits for it).
WRAPPER = """\
import os, sys
if os.fork() == 0:
    os._exit(0)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def test_an_unreaped_child_of_the_server_is_reported_once_as_a_zombie(tmp_path: Path):
    wrapper = tmp_path / "leaves_a_zombie.py"
    wrapper.write_text(WRAPPER)
    sim = sim_cmd("normal", free_port(), "--load-seconds", "12")
    r = run_firstlight("up", "--json", "--stop-when-ready", "--no-preflight", "--quiet-server",
                       "--sample-interval", "0.2", "--", sys.executable, str(wrapper), *sim[1:], timeout=180)
    assert r.rc == 0, r.stderr[-3000:]
    warnings = [e for e in r.events if e.get("event") == "warning" and "is a zombie" in e.get("message", "")]
    assert len(warnings) == 1, r.stderr[-3000:]
    assert "not reaped by its parent" in warnings[0]["message"]
