"""The stale-server check (``firstlight.preflight.stale``) in process, over a scripted process table: which
processes count (the engine's own program, not firstlight, not this process or its parents, not a word further
on), what makes them stale (the same port: a failure; the same model, by name or by file: a warning), and a
server's workers counted as that server. The real processes behind it: ``tests/e2e/preflight/test_stale.py``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from firstlight.preflight import stale
from firstlight.preflight.target import read_target


@dataclass
class Proc:
    pid: int
    cmdline: list[str]
    ppid: int = 1
    cwd_is: str | None = "/"
    info: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.info = {"pid": self.pid, "ppid": self.ppid, "cmdline": self.cmdline}

    def cwd(self) -> str:
        if self.cwd_is is None:
            raise psutil.AccessDenied(self.pid)
        return self.cwd_is


@dataclass
class Info:
    pid: int

    def describe(self) -> str:
        return f"PID {self.pid} (desc)"

    def stop_hint(self) -> str:
        return f"kill {self.pid}"


ATTRS = {"pid", "ppid", "cmdline", "name", "username", "cwd", "status"}  # some of psutil's


def _table(monkeypatch: pytest.MonkeyPatch, *procs: Proc) -> None:
    def process_iter(attrs: list[str] | None) -> Any:
        # as psutil: info holds the attributes asked for (None: all); a name it does not know is a ValueError
        attrs = list(ATTRS) if attrs is None else attrs
        if unknown := set(attrs) - ATTRS:
            raise ValueError(f"invalid attr name {unknown}")
        for p in procs:
            p.info = {k: v for k, v in p.info.items() if k in attrs}
            yield p

    monkeypatch.setattr(stale.psutil, "process_iter", process_iter)
    monkeypatch.setattr(stale, "proc_info", lambda pid, redactor: Info(pid))


VLLM = read_target(["vllm", "serve", "org/model-a", "--port", "8001"], env={})


def test_an_unknown_engine_is_skipped(monkeypatch: pytest.MonkeyPatch):
    _table(monkeypatch, Proc(10, ["vllm", "serve", "org/model-a", "--port", "8001"]))
    check = stale.check_stale(read_target(["./serve.sh"], env={}))
    assert (check.name, check.status, check.evidence) == ("stale_server", "ok",
                                                          "skipped: the engine is not known from the command")


def test_the_same_port_fails_and_names_the_process_and_how_to_stop_it(monkeypatch: pytest.MonkeyPatch):
    _table(monkeypatch, Proc(10, ["vllm", "serve", "org/other", "--port", "8001"]))
    check = stale.check_stale(VLLM)
    assert (check.name, check.status, check.category) == ("stale_server", "fail", "port_in_use")
    assert check.evidence == "another vllm still runs: same port: PID 10 (desc)" and check.hint == "kill 10"


def test_the_same_model_warns_that_it_may_hold_the_memory(monkeypatch: pytest.MonkeyPatch):
    _table(monkeypatch, Proc(10, ["vllm", "serve", "org/model-a", "--port", "9000"]),
           Proc(11, ["vllm", "serve", "org/model-b", "--port", "9001"]))
    check = stale.check_stale(VLLM)
    assert (check.name, check.status, check.category, check.hint) == ("stale_server", "warn", "gpu_occupied", "kill 10")
    assert check.evidence == ("another vllm still runs: same model: PID 10 (desc) (it may hold the GPU memory or "
                              "RAM this start needs)")


def test_both_stale_servers_are_named_and_a_port_clash_wins(monkeypatch: pytest.MonkeyPatch):
    _table(monkeypatch, Proc(10, ["vllm", "serve", "org/model-a", "--port", "9000"]),
           Proc(20, ["vllm", "serve", "org/model-z", "--port", "8001"]))
    check = stale.check_stale(VLLM)
    assert check.status == "fail" and check.hint == "kill 10 or kill 20"
    assert check.evidence == "another vllm still runs: same model: PID 10 (desc); same port: PID 20 (desc)"


def test_a_servers_workers_are_that_server(monkeypatch: pytest.MonkeyPatch):
    cmd = ["vllm", "serve", "org/model-a", "--port", "8001"]
    _table(monkeypatch, Proc(10, cmd, ppid=1), Proc(11, cmd, ppid=10), Proc(12, cmd, ppid=11),
           Proc(30, cmd, ppid=29))
    check = stale.check_stale(VLLM)
    assert check.evidence == "another vllm still runs: same port: PID 10 (desc); same port: PID 30 (desc)"


def test_the_same_model_file_by_another_path_is_the_same_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    weights = tmp_path / "models" / "m.gguf"
    weights.parent.mkdir()
    weights.write_bytes(b"GGUF")
    (tmp_path / "link.gguf").symlink_to(weights)
    target = read_target(["llama-server", "-m", str(weights), "--port", "8080"], env={})
    _table(monkeypatch, Proc(10, ["llama-server", "-m", "models/m.gguf", "--port", "9"], cwd_is=str(tmp_path)),
           Proc(11, ["llama-server", "-m", str(tmp_path / "link.gguf"), "--port", "10"]),
           Proc(12, ["llama-server", "-m", "models/m.gguf", "--port", "11"], cwd_is=None),  # cwd unreadable
           Proc(13, ["llama-server", "-m", "models/m.gguf", "--port", "12"], cwd_is="/"),  # another file
           Proc(14, ["llama-server", "-m", str(tmp_path / "absent.gguf"), "--port", "13"]))
    check = stale.check_stale(target)
    assert check.status == "warn" and check.hint == "kill 10 or kill 11"


def test_only_the_engines_own_program_counts_not_firstlight_nor_this_process(monkeypatch: pytest.MonkeyPatch):
    cmd = ["vllm", "serve", "org/model-a", "--port", "8001"]
    parent = psutil.Process().ppid()
    _table(monkeypatch,
           Proc(os.getpid(), cmd), Proc(parent, cmd),  # this process and its parents: the start being checked
           Proc(10, ["firstlight", "up", "--", *cmd]), Proc(11, ["/usr/bin/firstlight", "up", "--", *cmd]),
           Proc(12, ["grep", "-r", "-n", "vllm", "serve", "org/model-a", "--port", "8001"]),  # words further on
           Proc(13, ["sglang.launch_server", "--model-path", "org/model-a", "--port", "8001"]),  # another engine
           Proc(14, []),  # a kernel thread: no command line
           Proc(15, ["python3", "-m", "firstlight", "up", "--", *cmd]))
    check = stale.check_stale(VLLM)
    assert (check.name, check.status, check.evidence) == ("stale_server", "ok",
                                                          "no other vllm process with this model or port")


def test_a_process_run_by_a_firstlight_path_is_not_a_server():
    assert stale._is_firstlight(["/opt/venv/bin/firstlight", "up"])
    assert stale._is_firstlight(["python3", "-m", "firstlight"]) and stale._is_firstlight(["a", "b", "firstlight"])
    assert not stale._is_firstlight(["a", "b", "c", "firstlight"])  # a word further on
    assert not stale._is_firstlight(["vllm", "serve", "firstlight-model"])


def test_the_scan_goes_past_other_processes_and_hands_the_redactor_on(monkeypatch: pytest.MonkeyPatch):
    from firstlight.redact import Redactor

    _table(monkeypatch, Proc(5, ["bash"]), Proc(6, ["sglang.launch_server", "--port", "8001"]),
           Proc(10, ["vllm", "serve", "org/model-a", "--port", "9000"]))
    asked: list[Any] = []
    monkeypatch.setattr(stale, "proc_info", lambda pid, redactor: asked.append((pid, redactor)) or Info(pid))
    red = Redactor()
    check = stale.check_stale(VLLM, red)
    assert check.status == "warn" and asked == [(10, red)]
