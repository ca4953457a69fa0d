"""The kernel's OOM killer (issue 19): its traces read from files in the formats the kernel and systemd write
(cgroup v2 ``memory.events``, v1 ``memory.oom_control`` / ``memory.failcnt``, ``/proc/PID/cgroup``, the kernel
log's ``/dev/kmsg`` records), and the judge's reading of a death: a trace makes a kill ``oom`` with a host-memory
hint; a crash signal is ``crashed`` unless a log line names a more specific cause.

The in-process tests of this subject; the others: ``tests/e2e/test_oom.py``.
"""

from __future__ import annotations

from pathlib import Path

from firstlight.samplers.oom import OomTraces, counters, kernel_log_kills, memory_dirs
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
    assert "server process died of SIGABRT (signal 6) before serving, in phase process_start" in \
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
