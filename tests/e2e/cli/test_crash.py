"""A crash is named (issue 19): a real native crash (a NULL dereference through ctypes, after llama.cpp's start
lines) under ``up``, ``watch --pid`` (a zombie child of ours, and a process reaped by its own parent), in a
unit's journal (watch and replay) and in the history; a real SIGKILL from outside."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from firstlight.config import Config, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import get_profile
from firstlight.history import History
from firstlight.redact import Redactor
from firstlight.report.jsonl import JsonLinesReporter
from firstlight.sim.fixtures import free_port
from firstlight.units.systemctl import UnitState
from firstlight.units.watch import UnitOptions, UnitWatch
from tests.support.common import firstlight_cmd, run_firstlight, wait_for
from tests.support.journal_export import MSG_FAILURE_RESULT, MSG_PROCESS_EXIT, UnitRun, journal_remote, write_journal

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2", "--engine", "llamacpp"]
# llama-server b11434's own start lines (scripts/llama_server_notes.md), up to where the issue's AMX build died
LLAMA_LINES = [
    "srv  llama_server: initializing ...",
    "srv    load_model: loading model '/models/SmolLM2-135M-Instruct.Q4_1.gguf'",
    "cmn          init: llama threadpool init, n_threads = 2",
]
# Prints the lines, waits for the trigger file when given (so a watcher is attached first), then dereferences
# NULL: the kernel sends SIGSEGV, exactly as for a native kernel's fault. SIGKILL waits for the test instead.
CRASHER = f"""
import ctypes, os, sys, time
for line in {LLAMA_LINES!r}:
    print(line, file=sys.stderr, flush=True)
trigger = sys.argv[1] if len(sys.argv) > 1 else None
deadline = time.monotonic() + 120
while trigger and not os.path.exists(trigger) and time.monotonic() < deadline:
    time.sleep(0.02)
if os.environ.get("CRASH", "segv") == "segv":
    ctypes.string_at(0)
while time.monotonic() < deadline:
    time.sleep(0.05)
"""


def crasher(tmp_path: Path) -> Path:
    path = tmp_path / "crasher.py"
    path.write_text(CRASHER)
    return path


def summary_of(stdout: str) -> dict[str, Any]:
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert events and events[-1]["event"] == "summary", stdout[-2000:]
    return events[-1]


def values(summary: dict[str, Any]) -> list[str]:
    return [e["value"] for e in summary["evidence"]]


def assert_named_segv(summary: dict[str, Any], phase: str = "warmup") -> None:
    assert (summary["verdict"], summary["failure"], summary["phase"]) == ("failed", "crashed", phase), summary
    ev = values(summary)
    assert f"server process died of SIGSEGV (signal 11) before serving, in phase {phase}" in ev, ev
    assert any("llama threadpool init, n_threads = 2" in v and v.startswith("last line") for v in ev), ev
    assert "coredumpctl gdb" in summary["hint"] and "ulimit -c" in summary["hint"]
    assert not any("code unknown" in v or "code -11" in v for v in ev), ev


def _until_started(stream: IO[str]) -> dict[str, Any]:
    for line in stream:
        if line.startswith("{"):
            ev: dict[str, Any] = json.loads(line)
            if ev.get("event") == "started":
                return ev
    raise AssertionError("firstlight ended without a 'started' event")


def test_up_names_a_native_crash_by_its_signal_phase_and_last_lines(tmp_path: Path):
    history = tmp_path / "h.sqlite3"
    run = run_firstlight("up", "--json", *FAST, "--history", str(history), "--url",
                         f"http://127.0.0.1:{free_port()}", "--", sys.executable, str(crasher(tmp_path)))
    assert run.rc == 1, run.stderr[-2000:]
    summary = summary_of(run.stdout)
    assert_named_segv(summary)
    assert "Traceback" not in run.stderr
    # the history keeps the run as failed, with the category and the evidence
    hist = run_firstlight("history", "--json", "--history", str(history))
    assert hist.rc == 0, hist.stderr
    assert [r["ok"] for r in json.loads(hist.stdout)["runs"]] == [False]
    with History(history) as h:
        (stored,) = h.runs()
    assert (stored.summary["verdict"], stored.summary["failure"]) == ("failed", "crashed")
    assert any("SIGSEGV (signal 11)" in e["value"] for e in stored.summary["evidence"])


def _watch_pid(tmp_path: Path, pid: int, log: Path, trigger: Path) -> dict[str, Any]:
    """``watch --pid`` the process, let it go on once firstlight is watching, and return the summary."""
    cmd = firstlight_cmd("watch", "--json", *FAST, "--no-history", "--pid", str(pid), "--log", str(log),
                         "--log-from-start", "--timeout", "120", f"http://127.0.0.1:{free_port()}")
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          stdin=subprocess.DEVNULL) as fl:
        try:
            assert fl.stdout is not None
            _until_started(fl.stdout)
            trigger.touch()
            out, err = fl.communicate(timeout=120)
        finally:
            if fl.poll() is None:
                fl.kill()
    assert fl.returncode == 1, err[-2000:]
    assert "Traceback" not in err
    return summary_of(out)


def test_watch_pid_reads_the_signal_of_a_crashed_process_that_is_not_its_child(tmp_path: Path):
    """The crasher is the test's child, not firstlight's: until the test reaps it, it is a zombie whose wait
    status /proc/PID/stat shows."""
    log, trigger = tmp_path / "server.log", tmp_path / "go"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(crasher(tmp_path)), str(trigger)], stderr=out,
                                stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: log.read_text().count("\n") >= len(LLAMA_LINES), 60, "the crasher's start lines")
        summary = _watch_pid(tmp_path, proc.pid, log, trigger)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGSEGV
    assert_named_segv(summary)


# A parent that ignores SIGCHLD: the kernel reaps its child at once, so nobody can read how it ended.
REAPING_PARENT = """
import signal, subprocess, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, *sys.argv[1:]], stderr=open(sys.argv[-1] + ".log", "w"))
print(child.pid, flush=True)
sys.stdin.read()
"""


def test_watch_pid_of_a_process_reaped_by_its_own_parent_says_its_status_is_unknown(tmp_path: Path):
    trigger = tmp_path / "go"
    log = Path(str(trigger) + ".log")
    parent = subprocess.Popen([sys.executable, "-c", REAPING_PARENT, str(crasher(tmp_path)), str(trigger)],
                              stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        wait_for(lambda: log.is_file() and log.read_text().count("\n") >= len(LLAMA_LINES), 60, "start lines")
        summary = _watch_pid(tmp_path, pid, log, trigger)
    finally:
        parent.kill()
        parent.wait(timeout=30)
    assert (summary["verdict"], summary["failure"]) == ("failed", "other"), summary
    ev = values(summary)
    assert "server process ended; not our child, status unknown; before serving, in phase warmup" in ev, ev
    assert not any("code unknown" in v for v in ev), ev


def test_a_sigkill_from_outside_is_said_so(tmp_path: Path):
    cmd = firstlight_cmd("up", "--json", *FAST, "--no-history", "--url", f"http://127.0.0.1:{free_port()}", "--",
                         sys.executable, str(crasher(tmp_path)))
    env = {**os.environ, "CRASH": "no"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          stdin=subprocess.DEVNULL) as fl:
        try:
            assert fl.stdout is not None
            pid = int(_until_started(fl.stdout)["pid"])
            os.kill(pid, signal.SIGKILL)
            out, err = fl.communicate(timeout=120)
        finally:
            if fl.poll() is None:
                fl.kill()
    assert fl.returncode == 1, err[-2000:]
    summary = summary_of(out)
    assert (summary["verdict"], summary["failure"]) == ("failed", "other"), summary
    ev = values(summary)
    assert any(v.startswith("server process died of SIGKILL (signal 9) before serving") for v in ev), ev
    assert any("killed by SIGKILL from outside" in v for v in ev), ev
    assert "OOM" in summary["hint"] and "dmesg" in summary["hint"]


# --- a unit's journal ------------------------------------------------------------------------------------
UNIT = "llm.service"


def real_crash_lines(tmp_path: Path) -> tuple[list[str], int]:
    """The crasher's real output and its real exit status."""
    p = subprocess.run([sys.executable, str(crasher(tmp_path))], capture_output=True, text=True, timeout=60)
    return p.stderr.splitlines(), p.returncode


def crashed_unit(tmp_path: Path, status: str | int, how: str = "dumped", oom: bool = False) -> Path:
    lines, rc = real_crash_lines(tmp_path)
    assert rc == -signal.SIGSEGV and lines[:len(LLAMA_LINES)] == LLAMA_LINES
    run = UnitRun(UNIT, 1_790_000_000.0, pid=4242)
    run.started()
    run.lines(lines)
    if oom:
        run.manager(f"{UNIT}: A process of this unit has been killed by the OOM killer.",
                    "fe6faa94e7774663a0da52717891d8ef")
    number = {"SEGV": 11, "KILL": 9}.get(str(status), status)
    name = {11: "SEGV", 9: "KILL"}[int(number)]
    # the message as systemd words it; the EXIT_STATUS field as given (a number, or a name as in ExecStopPost=)
    run.manager(f"{UNIT}: Main process exited, code={how}, status={number}/{name}", MSG_PROCESS_EXIT,
                EXIT_CODE=how, EXIT_STATUS=status, COMMAND="ExecStart")
    result = "oom-kill" if oom else ("core-dump" if how == "dumped" else "signal")
    run.manager(f"{UNIT}: Failed with result '{result}'.", MSG_FAILURE_RESULT, UNIT_RESULT=result)
    path = tmp_path / "u.journal"
    write_journal(path, bytes(run.out))
    return path


def replay_unit(path: Path) -> tuple[int, dict[str, Any], str]:
    run = run_firstlight("replay", "--json", "--unit", UNIT, "--journal-file", str(path))
    assert "Traceback" not in run.stderr
    return run.rc, json.loads(run.stdout), run.stderr


@pytest.mark.parametrize("status", [11, "SEGV"])
def test_a_unit_that_dumped_core_is_crashed_live_and_in_replay(tmp_path: Path, status: str | int):
    journal_remote()
    path = crashed_unit(tmp_path, status)
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cgroup.procs").write_text("")  # its processes are gone
    seen = io.StringIO()
    cfg = Config(probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}", connect_timeout=0.2),
                 judge=JudgeConfig(timeout=60, stall_timeout=30), history=HistoryConfig(enabled=False),
                 echo_server_output=False, sample_interval=0.2)
    outcome = UnitWatch(UnitOptions(UNIT, path, cgroup=cgroup), cfg, get_profile("llamacpp"),
                        JsonLinesReporter(seen), Redactor()).run()
    summary = [json.loads(x) for x in seen.getvalue().splitlines()][-1]
    assert outcome.verdict == "failed"
    assert_named_segv(summary)

    code, report, _err = replay_unit(path)
    assert (code, report["outcome"], report["failure"], report["phase"]) == (1, "failed", "crashed", "warmup")
    texts = [e["text"] for e in report["evidence"]]
    assert "server process died of SIGSEGV (signal 11) before serving, in phase warmup" in texts, texts
    assert "coredumpctl gdb" in report["hint"]
    text = run_firstlight("replay", "--unit", UNIT, "--journal-file", str(path))
    assert "Failure: crashed\n  process: server process died of SIGSEGV (signal 11)" in text.stdout, text.stdout


def test_a_unit_killed_by_signal_9_is_never_exit_code_9_and_oom_when_systemd_says_so(tmp_path: Path):
    journal_remote()
    killed = crashed_unit(tmp_path, 9, how="killed")
    code, report, err = replay_unit(killed)
    assert (code, report["failure"]) == (1, "other"), report
    texts = [e["text"] for e in report["evidence"]]
    assert any("died of SIGKILL (signal 9)" in t for t in texts) and "killed by SIGKILL from outside" in str(texts)
    assert "code 9" not in err + str(texts)

    oom_dir = tmp_path / "oom"
    oom_dir.mkdir()
    code, report, _ = replay_unit(crashed_unit(oom_dir, 9, how="killed", oom=True))
    assert (code, report["failure"]) == (1, "oom"), report
    texts = [e["text"] for e in report["evidence"]]
    assert any("killed by the OOM killer" in t for t in texts) and any("Result=oom-kill" in t for t in texts)
    assert "host" in report["hint"] and "VRAM" not in report["hint"]


class OomKilledUnit:
    """systemctl for a unit whose main process the kernel's OOM killer ended (systemd 252's words)."""

    def __init__(self, invocation: str) -> None:
        self.invocation = invocation

    def show(self, unit: str) -> UnitState:
        return UnitState.parse(f"Id={unit}\nLoadState=loaded\nActiveState=failed\nSubState=failed\n"
                               f"Result=oom-kill\nType=simple\nRestart=no\nMainPID=0\nExecMainCode=2\n"
                               f"ExecMainStatus=9\nNRestarts=0\nInvocationID={self.invocation}\nControlGroup=\n")


def test_a_live_unit_that_systemd_says_was_oom_killed_is_oom(tmp_path: Path):
    journal_remote()
    run = UnitRun(UNIT, 1_790_000_000.0, pid=4242)
    run.started()
    run.lines(LLAMA_LINES)  # the exit comes from systemctl only: ExecMainCode=2 (killed), status 9, Result=oom-kill
    path = tmp_path / "u.journal"
    write_journal(path, bytes(run.out))
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cgroup.procs").write_text("")
    seen = io.StringIO()
    cfg = Config(probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}", connect_timeout=0.2),
                 judge=JudgeConfig(timeout=60, stall_timeout=30), history=HistoryConfig(enabled=False),
                 echo_server_output=False, sample_interval=0.2)
    systemd = OomKilledUnit(run.invocation)
    outcome = UnitWatch(UnitOptions(UNIT, path, cgroup=cgroup), cfg, get_profile("llamacpp"), JsonLinesReporter(seen),
                        Redactor(), systemctl=systemd).run(systemd.show(UNIT))  # type: ignore[arg-type]
    summary = [json.loads(x) for x in seen.getvalue().splitlines()][-1]
    assert (outcome.verdict, summary["failure"]) == ("failed", "oom"), summary
    ev = values(summary)
    assert any(v.startswith("server process died of SIGKILL (signal 9) before serving") for v in ev), ev
    assert "OOM kill: systemd: Result=oom-kill" in ev and "host" in summary["hint"]
