"""The kernel's OOM killer (issue 19): its traces read from files in the formats the kernel and systemd write
(cgroup v2 ``memory.events``, v1 ``memory.oom_control`` / ``memory.failcnt``, ``/proc/PID/cgroup``, the kernel
log's ``/dev/kmsg`` records), and the judge's reading of a death: a trace makes a kill ``oom`` with a host-memory
hint; a crash signal is ``crashed`` unless a log line names a more specific cause.

The in-process tests of this subject; the others: ``tests/e2e/samplers/test_oom.py``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from firstlight.samplers import oom
from firstlight.samplers.oom import (
    OomTraces,
    counters,
    kernel_log_cgroup_kills,
    kernel_log_kills,
    memory_dirs,
    read_keyed,
)
from firstlight.timeline import LogLine, ProcessSample
from tests.support.oom_traces import _cgroup, _judge

# as the kernel writes them (mm/memcontrol.c: memory_events_show, mem_cgroup_oom_control_read)
V2_EVENTS = "low 0\nhigh 0\nmax {max}\noom {oom}\noom_kill {kill}\noom_group_kill 0\n"


V1_OOM_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill {kill}\n"


# /dev/kmsg records: "priority,sequence,microseconds,flags;message" (Documentation/ABI/testing/dev-kmsg)
KMSG = "\n".join([
    "6,1021,5123456,-;python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, "
    "oom_score_adj=0",
    "6,1040,5123901,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
    "oom_memcg=/system.slice/llm.service,task_memcg=/system.slice/llm.service,task=python3,pid={pid},uid=0",
    "3,1041,5123950,-;Memory cgroup out of memory: Killed process {pid} (python3) total-vm:9120340kB, "
    "anon-rss:8011220kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:16012kB oom_score_adj:0",
    "3,1042,5124950,-;Out of memory: Killed process 777 (other) total-vm:1kB, anon-rss:1kB, file-rss:0kB, "
    "shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0",
]) + "\n"


def test_v2_memory_events_oom_kill_counts_only_when_it_grew(tmp_path: Path):
    d = _cgroup(tmp_path, "llm.service", memory_events=V2_EVENTS.format(max=3, oom=1, kill=1))
    traces = OomTraces(directories=[d], kmsg=tmp_path / "none")
    assert traces.evidence() == ()  # a kill from before the watch is not this one's
    (d / "memory.events").write_text(V2_EVENTS.format(max=9, oom=2, kill=2))
    assert traces.evidence() == (f"{d / 'memory.events'}: oom_kill 1 -> 2",)


def test_v1_oom_control_and_failcnt(tmp_path: Path):
    d = _cgroup(tmp_path, "memory/llm", memory_oom_control=V1_OOM_CONTROL.format(kill=0), memory_failcnt="12\n")
    assert counters(d) == {"memory.oom_control oom_kill": 0}  # failcnt is noise beside a kill counter
    traces = OomTraces(directories=[d], kmsg=tmp_path / "none")
    (d / "memory.oom_control").write_text(V1_OOM_CONTROL.format(kill=1))
    (d / "memory.failcnt").write_text("40\n")
    assert traces.evidence() == (f"{d / 'memory.oom_control'}: oom_kill 0 -> 1",)
    # a kernel before 4.13 counts no kills: the limit being hit is what is left
    old = _cgroup(tmp_path, "memory/old", memory_oom_control="oom_kill_disable 0\nunder_oom 0\n",
                  memory_failcnt="0\n")
    traces = OomTraces(directories=[old], kmsg=tmp_path / "none")
    (old / "memory.failcnt").write_text("7\n")
    assert traces.evidence() == (f"{old / 'memory.failcnt'}: 0 -> 7 (the memory limit was hit)",)


def test_the_cgroups_of_a_process_come_from_proc_pid_cgroup(tmp_path: Path):
    root, proc = tmp_path / "sys", tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    # a hybrid host: v1 controllers, and the unified (v2) line "0::"
    (proc / "4242" / "cgroup").write_text("12:memory:/system.slice/llm.service\n11:cpu,cpuacct:/system.slice\n"
                                          "0::/system.slice/llm.service\n")
    (root / "memory" / "system.slice" / "llm.service").mkdir(parents=True)
    (root / "system.slice" / "llm.service").mkdir(parents=True)
    assert memory_dirs(4242, root, proc) == [root / "memory/system.slice/llm.service",
                                             root / "system.slice/llm.service"]
    assert memory_dirs(999, root, proc) == []


def test_the_kernel_log_names_the_killed_pid(tmp_path: Path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(KMSG.format(pid=4242))
    found = kernel_log_kills([4242], kmsg)
    assert len(found) == 2 and found[0].startswith("oom-kill:constraint=CONSTRAINT_MEMCG")
    assert found[1].startswith("Memory cgroup out of memory: Killed process 4242 (python3)")
    assert kernel_log_kills([4243], kmsg) == []
    assert kernel_log_kills([4242], tmp_path / "unreadable") == []


def test_the_real_kernel_log_is_read_without_blocking():
    kernel_log_kills([2 ** 22 + 1])  # /dev/kmsg here, or nothing where it is not readable: never waits


def test_a_unit_result_oom_kill_is_a_trace(tmp_path: Path):
    traces = OomTraces(directories=[], unit_result=lambda: "oom-kill", kmsg=tmp_path / "none")
    assert traces.evidence() == ("systemd: Result=oom-kill",)
    assert OomTraces(directories=[], unit_result=lambda: "signal", kmsg=tmp_path / "none").evidence() == ()


def test_a_named_log_cause_wins_over_the_crash_signal_and_the_signal_over_a_generic_line():
    j = _judge()
    j.feed(LogLine(1.0, "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
                        "cudaMalloc failed: out of memory", "stderr", 1))
    j.feed(ProcessSample(1.1, alive=False, exit_code=-6))
    a = j.assess(1.2)
    assert a.failure == "oom" and "VRAM" in (a.hint or "")  # the CUDA OOM line, not SIGABRT

    j = _judge()
    j.feed(LogLine(1.0, "srv  load_model: failed to load model", "stderr", 1))  # a generic wrapper
    j.feed(ProcessSample(1.1, alive=False, exit_code=-6))
    a = j.assess(1.2)
    assert a.failure == "crashed" and "abort()" in (a.hint or "")
    assert "server process died of SIGABRT (signal 6) before serving, in phase weights_loading" in \
        [e.value for e in a.evidence]


def test_sigill_says_the_binary_was_built_for_another_cpu():
    j = _judge()
    j.feed(LogLine(1.0, "cmn          init: llama threadpool init, n_threads = 2", "stderr", 1))
    j.feed(ProcessSample(1.1, alive=False, exit_code=-4))
    a = j.assess(1.2)
    assert (a.failure, a.phase) == ("crashed", "warmup")
    assert "another CPU" in (a.hint or "") and "SIGILL (signal 4)" in a.evidence[0].value


def test_a_crash_said_in_words_is_crashed_below_a_named_cause():
    """Where the signal itself cannot be read (a launcher shell's child, a worker): the words for it."""
    j = _judge()
    j.feed(LogLine(1.0, "./serve.sh: line 3:  4243 Segmentation fault      (core dumped) llama-server", "stderr", 1))
    j.feed(ProcessSample(1.1, alive=False, exit_code=139))  # the shell's exit: 128 + 11
    a = j.assess(1.2)
    assert (a.verdict, a.failure) == ("failed", "crashed") and "coredumpctl" in (a.hint or "")

    j = _judge()
    j.feed(LogLine(1.0, "RuntimeError: CUDA error: an illegal memory access was encountered", "stderr", 1))
    j.feed(LogLine(1.1, "terminate called after throwing an instance of 'c10::Error'", "stderr", 2))
    j.feed(ProcessSample(1.2, alive=False, exit_code=-6))
    assert j.assess(1.3).failure == "other"  # the CUDA error, printed before the abort, stays the root cause


# -- the readers at their edges -------------------------------------------------------------------------------
def test_a_keyed_line_counts_only_as_a_key_and_a_whole_number(tmp_path: Path):
    f = tmp_path / "memory.events"
    f.write_text("oom_kill 3\nlow\nhigh x\nmax 1 2\noom -1\n\noom_group_kill 0\n")
    assert read_keyed(f) == {"oom_kill": 3, "oom_group_kill": 0}
    assert read_keyed(tmp_path / "absent") == {}


def test_the_memory_controller_is_found_beside_others_and_in_paths_with_colons(tmp_path: Path):
    root, proc = tmp_path / "sys", tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    # v1 controllers mounted together; a cgroup name holding ':' (systemd escapes nothing there); a v2 path at
    # the root whose name starts with the letters of nothing special
    (proc / "7" / "cgroup").write_text("4:cpu,memory:/pod:a\n0::/Xvnc.scope\n")
    (root / "memory" / "pod:a").mkdir(parents=True)
    (root / "Xvnc.scope").mkdir(parents=True)
    assert memory_dirs(7, root, proc) == [root / "memory" / "pod:a", root / "Xvnc.scope"]


def test_a_plain_log_line_counts_and_a_semicolon_in_a_process_name_is_kept(tmp_path: Path):
    kmsg = tmp_path / "dmesg.txt"
    kmsg.write_text("Out of memory: Killed process 4242 (py;thon) total-vm:1kB\n"
                    "3,1041,5123950,-;Memory cgroup out of memory: Killed process 4243 (a;b) total-vm:1kB\n"
                    "3,1042,5123951;Out of memory: Killed process 4244 (c) total-vm:1kB\n")
    assert kernel_log_kills([4242, 4243, 4244], kmsg) == [
        "Out of memory: Killed process 4242 (py;thon) total-vm:1kB",
        "Memory cgroup out of memory: Killed process 4243 (a;b) total-vm:1kB",
        "Out of memory: Killed process 4244 (c) total-vm:1kB"]  # flags are optional in the prefix


def test_a_kernel_line_is_quoted_to_300_characters(tmp_path: Path):
    kmsg = tmp_path / "kmsg"
    line = "Out of memory: Killed process 4242 (python3) " + "x" * 400
    kmsg.write_text(f"3,1,2,-;{line}\n")
    assert kernel_log_kills([4242], kmsg) == [line[:300]]


def test_invalid_utf8_in_the_log_is_replaced_not_fatal(tmp_path: Path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_bytes(b"6,1,2,-;usb \xff\xfe garbage\n3,2,3,-;Out of memory: Killed process 4242 (x\xff)\n")
    assert kernel_log_kills([4242], kmsg) == ["Out of memory: Killed process 4242 (x\ufffd)"]


def test_a_file_in_the_logs_place_is_read_to_16_mib(tmp_path: Path):
    kmsg = tmp_path / "huge"
    with kmsg.open("wb") as f:
        f.truncate(16 << 20)  # 16 MiB of one line (sparse: nothing written)
        f.seek(16 << 20)
        f.write(b"\nOut of memory: Killed process 4242 (x)\n")
    assert kernel_log_kills([4242], kmsg) == []  # past the bound: never read
    kmsg.write_text("x" * 100 + "\nOut of memory: Killed process 4242 (x)\n")
    assert kernel_log_kills([4242], kmsg) == ["Out of memory: Killed process 4242 (x)"]


def test_a_file_in_the_logs_place_is_bounded_in_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(oom, "MAX_KMSG_RECORDS", 3)
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("a\nb\nc\nOut of memory: Killed process 4242 (x)\n")
    assert oom._kmsg_records(kmsg) == ["a", "b", "c"] and kernel_log_kills([4242], kmsg) == []


def test_a_device_is_read_one_record_a_read_to_the_bound(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(oom, "MAX_KMSG_RECORDS", 5)
    zeros = oom._kmsg_records(Path("/dev/zero"))  # a device that never ends: the bound ends it
    assert len(zeros) == 5 and {len(r) for r in zeros} == {8192}
    assert len(oom._kmsg_records(Path("/dev/urandom"))) == 5  # bytes that are not UTF-8: replaced


class ScriptedReads:
    """os.read for one descriptor, from a script: bytes, or an errno to raise (as /dev/kmsg answers)."""

    def __init__(self, script: list[bytes | int]) -> None:
        self.script, self.real, self.real_open, self.fd = list(script), os.read, os.open, -1

    def __call__(self, fd: int, n: int) -> bytes:
        if fd != self.fd:
            return self.real(fd, n)
        step = self.script.pop(0)
        if isinstance(step, int):
            raise OSError(step, os.strerror(step))
        return step

    def opened(self, path: Any, flags: int) -> int:
        self.fd = self.real_open(path, flags)
        return self.fd


def _kmsg_script(monkeypatch: pytest.MonkeyPatch, script: list[bytes | int]) -> list[str]:
    reads = ScriptedReads(script)
    monkeypatch.setattr(oom.os, "read", reads)
    monkeypatch.setattr(oom.os, "open", reads.opened)
    try:
        return oom._kmsg_records(Path("/dev/null"))  # a device: read a record at a time
    finally:
        monkeypatch.undo()


def test_kmsg_overwritten_while_read_goes_on_and_eagain_ends_it(monkeypatch: pytest.MonkeyPatch):
    kill = b"3,9,9,-;Out of memory: Killed process 4242 (x)"
    assert _kmsg_script(monkeypatch, [b"6,1,1,-;a", errno.EPIPE, kill, errno.EAGAIN]) == [
        "6,1,1,-;a", kill.decode()]
    assert _kmsg_script(monkeypatch, [b"6,1,1,-;a", errno.EPERM, kill]) == ["6,1,1,-;a"]  # not readable: stop
    assert _kmsg_script(monkeypatch, [b"6,1,1,-;a", b"", kill]) == ["6,1,1,-;a"]  # the end


# -- a container's kills, by its cgroup ------------------------------------------------------------------------
CID = "0123456789abcdef0123"
CGROUP_KMSG = "\n".join([
    f"6,1,1,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/machine.slice/libpod-{CID}.scope,"
    f"task_memcg=/machine.slice/libpod-{CID}.scope,task=python3,pid=5151,uid=0",
    "3,2,2,-;Memory cgroup out of memory: Killed process 5151 (python3) total-vm:9kB",
    "6,3,3,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/machine.slice/libpod-ffff.scope,task=x,pid=6161",
    "3,4,4,-;Memory cgroup out of memory: Killed process 6161 (x) total-vm:1kB",
    "3,5,5,-;Out of memory: Killed process 7171 (y) total-vm:1kB",
]) + "\n"


def test_a_containers_kills_are_found_by_its_cgroup_and_the_pid_it_names(tmp_path: Path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(CGROUP_KMSG)
    found = kernel_log_cgroup_kills(f"libpod-{CID}", kmsg)
    assert len(found) == 2 and found[0].startswith("oom-kill:constraint=CONSTRAINT_MEMCG") and "pid=5151" in found[0]
    assert found[1] == "Memory cgroup out of memory: Killed process 5151 (python3) total-vm:9kB"
    assert kernel_log_cgroup_kills(CID[:12], kmsg) == found  # 12 characters: Docker's short id
    assert kernel_log_cgroup_kills(CID[:11], kmsg) == []  # shorter would match other cgroups
    assert kernel_log_cgroup_kills("libpod-" + "e" * 20, kmsg) == []
    assert kernel_log_cgroup_kills(CID, tmp_path / "unreadable") == []


def test_a_containers_kill_lines_are_quoted_to_300_characters(tmp_path: Path):
    kmsg = tmp_path / "kmsg"
    long_oom = f"oom-kill:constraint=CONSTRAINT_MEMCG,task_memcg=/docker/{CID},task=python3,pid=5151," + "k=v," * 90
    long_kill = "Out of memory: Killed process 5151 (python3) " + "y" * 400
    kmsg.write_text(f"6,1,1,-;{long_oom}\n3,2,2,-;{long_kill}\n")
    assert kernel_log_cgroup_kills(CID, kmsg) == [long_oom[:300], long_kill[:300]]


# -- OomTraces as the watch builds it ---------------------------------------------------------------------------
def test_traces_of_a_pid_read_its_cgroups_and_the_kernel_log_of_that_pid(tmp_path: Path):
    root, proc = tmp_path / "sys", tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text("0::/llm.service\n")
    d = _cgroup(root, "llm.service", memory_events=V2_EVENTS.format(max=0, oom=0, kill=0))
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    traces = OomTraces(pid=4242, kmsg=kmsg, root=root, proc=proc)
    assert (traces.pid, traces.directories, traces.kmsg) == (4242, [d], kmsg)
    (d / "memory.events").write_text(V2_EVENTS.format(max=1, oom=1, kill=1))
    kmsg.write_text(KMSG.format(pid=4242))
    assert traces.evidence() == (f"{d / 'memory.events'}: oom_kill 0 -> 1",
                                 "kernel log: " + KMSG.splitlines()[1].partition(";")[2].format(pid=4242),
                                 "kernel log: " + KMSG.splitlines()[2].partition(";")[2].format(pid=4242))
    assert traces.evidence([777])[-1].startswith("kernel log: Out of memory: Killed process 777")
    assert OomTraces(kmsg=kmsg, root=root, proc=proc).directories == []  # no pid: nothing to read


def test_a_unit_result_that_cannot_be_read_leaves_the_other_traces(tmp_path: Path):
    def broken() -> str:
        raise RuntimeError("systemctl timed out")

    kmsg = tmp_path / "kmsg"
    kmsg.write_text(KMSG.format(pid=4242))
    traces = OomTraces(pid=4242, directories=[], unit_result=broken, kmsg=kmsg)
    assert len(traces.evidence()) == 2 and traces.evidence()[0].startswith("kernel log: oom-kill:")


def test_a_kmsg_records_continuation_lines_are_not_its_message(monkeypatch: pytest.MonkeyPatch):
    # /dev/kmsg: a record's dictionary follows its message, one " KEY=value" line each (dev-kmsg ABI)
    record = b"3,9,9,-;Out of memory: Killed process 4242 (x)\n SUBSYSTEM=memory\n DEVICE=+memory:oom\n"
    reads = ScriptedReads([record, errno.EAGAIN])
    monkeypatch.setattr(oom.os, "read", reads)
    monkeypatch.setattr(oom.os, "open", reads.opened)
    assert oom._kernel_messages(Path("/dev/null")) == ["Out of memory: Killed process 4242 (x)"]
