"""A real kernel OOM kill after READY is ``oom`` (issue 32), as the same cgroup evidence gives before READY; it
was ``other``, "died of SIGKILL". firstlight and its server run in a real memory cgroup (v1 or v2) with a limit;
after READY the server allocates until the kernel's OOM killer ends it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import Output, firstlight_cmd, wait_for

LIMIT = 400 << 20

# The simulator in-process, and a thread that allocates 50 MB at a time once the trigger file exists.
HOG = """
import os, runpy, sys, threading, time
trigger = sys.argv[1]
def hog():
    while not os.path.exists(trigger):
        time.sleep(0.05)
    held = []
    while True:
        held.append(bytearray(b"\\1") * (50 << 20))
threading.Thread(target=hog, daemon=True).start()
sys.argv = ["firstlight.sim", *sys.argv[2:]]
runpy.run_module("firstlight.sim", run_name="__main__")
"""


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    for root, limit_file in ((Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
                             (Path("/sys/fs/cgroup"), "memory.max")):
        d = root / f"firstlight-test-{uuid.uuid4().hex[:8]}"
        try:
            d.mkdir()
        except OSError:
            continue
        try:
            (d / limit_file).write_text(str(LIMIT))
        except OSError:
            d.rmdir()
            continue
        try:
            yield d
        finally:
            def removed(d: Path = d) -> bool:
                try:
                    d.rmdir()
                    return True
                except OSError:  # its last process is still leaving
                    return False

            wait_for(removed, 30, f"{d} to be removable")
        return
    pytest.skip("no memory cgroup can be made here (needs root and a writable cgroup hierarchy)")


def test_a_kernel_oom_kill_after_ready_is_oom(tmp_path: Path, memory_cgroup: Path):
    port, trigger = free_port(), tmp_path / "allocate"
    script = tmp_path / "hog.py"
    script.write_text(HOG)
    procs = memory_cgroup / "cgroup.procs"

    def join_cgroup() -> None:
        procs.write_text(str(os.getpid()))

    fl = subprocess.Popen(firstlight_cmd("up", "--json", "--no-history", "--poll-min", "0.05", "--serving-interval",
                                         "0", "--", sys.executable, str(script), str(trigger), "--scenario",
                                         "normal", "--port", str(port), "--load-seconds", "0.3"),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL,
                          preexec_fn=join_cgroup)
    try:
        output = Output(fl)
        output.wait_event("summary", 90, "READY")
        trigger.write_text("now")
        out, _ = output.rest(timeout=120)
    finally:
        if fl.poll() is None:
            fl.kill()
    summary = json.loads(out.splitlines()[-1])
    assert summary["verdict"] == "failed" and summary["phase"] == "serving", summary
    assert summary["failure"] == "oom", summary["evidence"]
    assert any("OOM kill" in str(e["value"]) for e in summary["evidence"]), summary["evidence"]
