"""The kernel's OOM killer (issue 19): its traces read from files in the formats the kernel and systemd write
(cgroup v2 ``memory.events``, v1 ``memory.oom_control`` / ``memory.failcnt``, ``/proc/PID/cgroup``, the kernel
log's ``/dev/kmsg`` records), and the judge's reading of a death: a trace makes a kill ``oom`` with a host-memory
hint; a crash signal is ``crashed`` unless a log line names a more specific cause.

The process-starting tests of this subject; the others: ``tests/unit/samplers/test_oom.py``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from firstlight.samplers.oom import OomTraces
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.timeline import ProcessSample, from_dict
from tests.support.common import wait_for
from tests.support.oom_traces import _cgroup, _judge

# as the kernel writes them (mm/memcontrol.c: memory_events_show, mem_cgroup_oom_control_read)
V2_EVENTS = "low 0\nhigh 0\nmax {max}\noom {oom}\noom_kill {kill}\noom_group_kill 0\n"


def test_a_real_process_killed_with_an_oom_kill_counted_is_oom_with_that_evidence(tmp_path: Path):
    d = _cgroup(tmp_path, "llm.service", memory_events=V2_EVENTS.format(max=0, oom=0, kill=0))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        sampler = ProcessTreeSampler(proc.pid, 0.1, proc.poll, oom=OomTraces(proc.pid, directories=[d],
                                                                             kmsg=tmp_path / "none"))
        judge = _judge()
        for obs in sampler.sample():
            judge.feed(obs)
        (d / "memory.events").write_text(V2_EVENTS.format(max=5, oom=1, kill=1))  # what the kernel does
        proc.send_signal(signal.SIGKILL)
        wait_for(lambda: proc.poll() is not None, 30, "the kill")
        (dead,) = sampler.sample()
    finally:
        proc.kill()
        proc.wait()
    assert isinstance(dead, ProcessSample) and dead.exit_code == -9 and dead.oom
    judge.feed(dead)
    a = judge.assess(dead.t)
    assert (a.verdict, a.failure) == ("failed", "oom")
    values = [e.value for e in a.evidence]
    assert values[0].startswith("server process died of SIGKILL (signal 9) before serving")
    assert f"OOM kill: {d / 'memory.events'}: oom_kill 0 -> 1" in values
    assert "host" in (a.hint or "") and "VRAM" not in (a.hint or "")
    assert from_dict(dead.to_dict()) == dead  # a recorded timeline replays to the same verdict


def test_a_clean_exit_reads_no_oom_trace(tmp_path: Path):
    d = _cgroup(tmp_path, "x", memory_events=V2_EVENTS.format(max=0, oom=0, kill=0))
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    sampler = ProcessTreeSampler(proc.pid, 0.1, proc.poll, oom=OomTraces(directories=[d], kmsg=tmp_path / "n"))
    (d / "memory.events").write_text(V2_EVENTS.format(max=0, oom=1, kill=1))
    (dead,) = sampler.sample()
    assert isinstance(dead, ProcessSample) and (dead.exit_code, dead.oom) == (3, ())
