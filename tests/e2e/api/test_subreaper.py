"""The Python API gives its caller the subreaper flag back (issue 32): firstlight adopts the server's orphans while
the server runs, then its caller, which lives on, is no longer the reaper of unrelated orphans (which stayed
zombies: nobody there waits for them). A real caller process, the simulated server, a real orphan."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from firstlight.sim.fixtures import free_port
from tests.support.common import REPO, sim_cmd

CALLER = textwrap.dedent("""\
    import ctypes, json, os, signal, subprocess, sys
    import firstlight

    def is_subreaper():  # prctl(PR_GET_CHILD_SUBREAPER), read here, not with firstlight's own helper
        flag = ctypes.c_int(0)
        assert ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(flag), 0, 0, 0) == 0
        return bool(flag.value)

    def orphan_parent():
        # a child that starts a grandchild and exits: the grandchild is an orphan; whose child is it now?
        out = subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True,
                             timeout=30)
        pid = int(out.stdout)
        try:
            with open(f"/proc/{pid}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        finally:
            os.kill(pid, signal.SIGKILL)

    seen = {"before": is_subreaper()}
    with firstlight.up(json.loads(sys.argv[1]), port=int(sys.argv[2]), timeout=120, history=False):
        seen["during"] = is_subreaper()
    seen["after"] = is_subreaper()
    seen["orphan_adopted_by_caller"] = orphan_parent() == os.getpid()
    print(json.dumps(seen))
    """)


def test_the_caller_is_a_subreaper_only_while_its_server_runs():
    port = free_port()
    p = subprocess.run([sys.executable, "-c", CALLER, json.dumps(sim_cmd("normal", port, "--load-seconds", "1")),
                        str(port)], capture_output=True, text=True, timeout=240, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert seen == {"before": False, "during": True, "after": False, "orphan_adopted_by_caller": False}, seen
