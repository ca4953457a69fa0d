"""The serving checks after READY: the tracker's rules (firstlight.serving), what the endpoints, systemd's watchdog
and Prometheus make of its status, and the sidecar's --pid-from never taking an older process (real processes).

The process-starting tests of this subject; the others: ``tests/unit/serving/test_serving.py``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid

from firstlight.runner.rewatch import ProcessMatcher, Rewatch, Target
from firstlight.sim.fixtures import free_port
from tests.support.common import wait_for


def _sleeper(tag: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", tag],
                            stdin=subprocess.DEVNULL, start_new_session=True)


class _Counting(ProcessMatcher):
    looks = 0

    def find(self, port: int | None = None) -> Target | None:
        self.looks += 1
        return super().find(port)


def test_pid_from_takes_the_newest_match_and_never_an_older_decoy():
    tag = f"engine-{uuid.uuid4().hex[:8]}"
    procs = [_sleeper(tag)]  # the decoy: an older process whose command line matches
    try:
        decoy = wait_for(lambda: ProcessMatcher(tag).find(), 10, "the decoy to be visible")
        # creation times have 10 ms ticks: the engine must be born in a later one
        wait_for(lambda: time.time() - (decoy.create_time or 0) > 0.05, 5, "a later creation tick")
        procs.append(_sleeper(tag))
        engine = wait_for(lambda: (f := ProcessMatcher(tag).find()) and f.pid == procs[1].pid and f, 10,
                          "the newer process to be found")
        # That start ended: the sidecar waits for a start newer than it, and never takes the older decoy.
        procs[1].kill()
        procs[1].wait()
        matcher = _Counting(tag)
        rw = Rewatch(lambda t: None, _Quiet(), "http://127.0.0.1:1", matcher=matcher, poll_s=0.02)  # type: ignore[arg-type,return-value]
        found: list[Target | None] = []
        waiter = threading.Thread(target=lambda: found.append(rw._next_target(engine)), daemon=True)
        waiter.start()
        wait_for(lambda: matcher.looks >= 10, 30, "the sidecar to look ten times")
        assert found == [], f"took {found}, older than the previous start"
        procs.append(_sleeper(tag))
        waiter.join(timeout=30)
        assert found and found[0] is not None and found[0].pid == procs[2].pid
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_pid_from_prefers_the_match_that_listens_on_the_engine_port_over_a_newer_one():
    tag, port = f"engine-{uuid.uuid4().hex[:8]}", free_port()
    listen = (f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); "
              "print('up', flush=True); time.sleep(120)")
    engine = subprocess.Popen([sys.executable, "-c", listen, tag], stdout=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    procs = [engine]
    try:
        assert engine.stdout is not None and engine.stdout.readline() == "up\n"
        first = wait_for(lambda: ProcessMatcher(tag).find(), 10, "the engine to be visible")
        wait_for(lambda: time.time() - (first.create_time or 0) > 0.05, 5, "a later creation tick")
        procs.append(_sleeper(tag))  # newer, matching (a `tail -f` of the engine's log with the pattern in it)
        wait_for(lambda: (f := ProcessMatcher(tag).find()) and f.pid == procs[1].pid, 10, "the newer match")
        found = ProcessMatcher(tag).find(port)
        assert found is not None and found.pid == engine.pid
    finally:
        for p in procs:
            p.kill()
            p.wait()


class _Quiet:
    def message(self, text: str) -> None:
        pass
