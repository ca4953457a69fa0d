"""``watch --unit --journal-file`` through to READY of a real llama-server, and ``replay --unit`` of the same
journal: the server's own output goes into a real journal file as it is written (systemd-journal-remote
appends a batch at a time, journalctl -f follows), and its process is found through a cgroup directory whose
cgroup.procs lists it (these machines have no systemd to make the cgroup).

The unit's journal has two invocations: a start that fails (a real llama-server given a model that does not
exist) and a good one, which also carries a message over 4 KiB and one that is not UTF-8.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from firstlight.sim.fixtures import free_port
from firstlight.units.journal.invocations import journal_lines
from tests.support.common import firstlight_cmd, run_firstlight, wait_for
from tests.support.journal_export import UnitRun, journal_remote, write_journal
from tests.support.llama_server import llama, server_cmd  # noqa: F401 (the fixture)

pytestmark = pytest.mark.llama
UNIT = "llama.service"
LONG = b"request: " + b"the prompt goes on " * 300  # over 4 KiB: journalctl -o json gives null without --all
LATIN1 = b"request: caf\xe9 cr\xe8me \xff"  # not UTF-8: journalctl gives an array of byte numbers


class JournalPump:
    """journald's stdout stream for one invocation: reads the server's output and appends its lines to the
    journal file, each stamped when it arrived, in batches as they come."""

    def __init__(self, stream: IO[bytes], path: Path, run: UnitRun, extra_after_first: list[bytes]) -> None:
        self.stream, self.path, self.run, self.extra = stream, path, run, extra_after_first
        self.lines = 0
        self.thread = threading.Thread(target=self._pump, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _flush(self) -> None:
        if self.run.out:
            write_journal(self.path, bytes(self.run.out))
            self.run.out.clear()

    def _pump(self) -> None:
        last = time.monotonic()
        for raw in iter(self.stream.readline, b""):
            self.run.line(raw.rstrip(b"\n"), t=time.time())
            self.lines += 1
            if self.extra and self.lines == 1:
                for x in self.extra:
                    self.run.line(x, t=time.time())
                    self.lines += 1
            if time.monotonic() - last > 0.2:
                self._flush()
                last = time.monotonic()
        self._flush()


def _failed_start(llama_paths: dict[str, str], path: Path, tmp_path: Path) -> UnitRun:
    """A real failed start: llama-server with a model file that does not exist, its output into the journal."""
    p = subprocess.run(server_cmd(llama_paths, free_port(), model=str(tmp_path / "missing.gguf")),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    assert p.returncode != 0
    run = UnitRun(UNIT, time.time() - 30, pid=1234)
    run.started()
    for raw in p.stdout.split(b"\n"):
        if raw:
            run.line(raw)
    run.main_exited(p.returncode, restart=1)
    write_journal(path, bytes(run.out))
    return run


def _reader(stream: IO[str], into: list[dict[str, Any]]) -> threading.Thread:
    def read() -> None:
        for line in stream:
            if line.startswith("{"):
                into.append(json.loads(line))
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def test_watch_follows_a_growing_journal_through_a_failed_attempt_to_ready(llama: dict[str, str],  # noqa: F811
                                                                            tmp_path: Path):
    journal_remote()
    path = tmp_path / "llama.journal"
    failed = _failed_start(llama, path, tmp_path)
    cgroup = tmp_path / "cgroup" / "system.slice" / UNIT
    cgroup.mkdir(parents=True)
    (cgroup / "cgroup.procs").write_text("")  # the failed start's process is gone
    port = free_port()
    events: list[dict[str, Any]] = []
    fl = subprocess.Popen(firstlight_cmd("watch", "--unit", "llama", "--journal-file", str(path), "--url",
                                         f"http://127.0.0.1:{port}", "--cgroup", str(cgroup), "--max-attempts",
                                         "3", "--restart-wait", "120", "--json", "--poll-min", "0.05",
                                         "--sample-interval", "0.2", "--timeout", "300", "--no-history"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    server: subprocess.Popen[bytes] | None = None
    try:
        assert fl.stdout is not None
        reader = _reader(fl.stdout, events)
        attempt = wait_for(lambda: next((e for e in events if e["event"] == "attempt"), None), 120,
                           "attempt 1 (the failed start) to be reported")
        assert attempt["invocation"] == failed.invocation and attempt["verdict"] == "failed"
        assert any("missing.gguf" in str(ev["value"]) for ev in attempt["evidence"]), attempt
        # systemd's restart: the real server starts, in the unit's cgroup, writing into the journal as it goes
        server = subprocess.Popen(server_cmd(llama, port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        (cgroup / "cgroup.procs").write_text(f"{server.pid}\n")
        good = UnitRun(UNIT, time.time(), pid=server.pid)
        good.started()
        assert server.stdout is not None
        pump = JournalPump(server.stdout, path, good, [LONG, LATIN1])
        pump.start()
        rc = fl.wait(timeout=300)
        reader.join(10)
    finally:
        if fl.poll() is None:
            fl.kill()
        if server is not None:
            server.terminate()
            server.wait(30)
    stderr = fl.stderr.read() if fl.stderr else ""
    assert rc == 0, stderr[-3000:]
    summary = events[-1]
    assert summary["event"] == "summary" and summary["verdict"] == "ready", summary
    assert summary["first_generation"]["text"].strip()
    assert summary["engine"] == "llamacpp"
    unit = summary["unit"]
    assert [(a["number"], a["verdict"]) for a in unit["attempts"]] == [(1, "failed"), (2, "ready")]
    assert unit["invocation"] == good.invocation
    # the processes came from the cgroup interface
    assert summary["pid"] == server.pid
    assert any(n.startswith("cgroup ") and "every process in cgroup.procs" in n for n in summary["notes"])
    assert summary["started_at"] <= summary["levels"]["process"] <= summary["ready_at"]  # seen, when it was
    assert summary["progress"]["procs"] >= 1 and summary["progress"]["rss_bytes"] > 0  # sampled from the cgroup
    # phases from llama.cpp's own lines, read from the journal
    names = [p["name"] for p in summary["phases"]]
    assert "weights_loading" in names and names[-1] == "ready", names
    # replay of the same journal: the last invocation is the good one, the first one failed
    r = run_firstlight("replay", "--unit", UNIT, "--journal-file", str(path), "--json")
    assert r.rc == 0 and json.loads(r.stdout)["outcome"] == "ready", r.stderr
    r = run_firstlight("replay", "--unit", UNIT, "--journal-file", str(path), "--invocation", failed.invocation,
                       "--json")
    assert r.rc == 1 and json.loads(r.stdout)["outcome"] == "failed", r.stderr
    # the over-4-KiB and the non-UTF-8 messages came through whole (journalctl --all), the latter decoded
    _, _, pairs = journal_lines(path, UNIT)
    texts = [t for _, t in pairs]
    assert LONG.decode() in texts
    assert "request: caf\ufffd cr\ufffdme \ufffd" in texts
    assert os.path.getsize(path) > 0
