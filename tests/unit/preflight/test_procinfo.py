"""Who a process is (``firstlight.preflight.procinfo``), for the GPU, port and stale-server evidence: what is said
of a process in this PID namespace, one outside it, one this user may not read, and the systemd unit that would
restart it. This process and scripted psutil answers; /proc files written for the test."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from firstlight.preflight import procinfo
from firstlight.preflight.procinfo import ProcInfo, proc_info, unit_from_cgroup
from firstlight.redact import Redactor

NO_PID = 2 ** 22 + 12345  # above Linux's pid_max limit: never a process


def test_a_visible_process_is_named_with_its_unit_and_command_line():
    info = ProcInfo(4242, True, "python3", "python3 -m vllm serve m", "vllm.service")
    assert info.describe() == "PID 4242 python3, unit vllm.service: python3 -m vllm serve m"
    assert info.stop_hint() == "systemctl stop vllm.service"  # kill would be undone by Restart=
    plain = ProcInfo(4242, True, "python3", "python3 x.py")
    assert plain.describe() == "PID 4242 python3: python3 x.py" and plain.stop_hint() == "kill 4242"


def test_a_command_line_is_cut_at_200_characters():
    at = ProcInfo(1, True, "p", "x" * 200)
    assert at.describe() == "PID 1 p: " + "x" * 200
    over = ProcInfo(1, True, "p", "y" * 201)
    assert over.describe() == "PID 1 p: " + "y" * 200 + "..."


def test_a_process_of_another_pid_namespace_is_said_to_be_elsewhere():
    info = ProcInfo(777, False)
    assert info.describe() == ("PID 777 (not visible from here: NVML reports host PIDs, so it runs in another PID "
                               "namespace, e.g. outside this container)")
    assert info.stop_hint() == "stop PID 777 where it runs (on the host: `kill 777`)"
    assert proc_info(NO_PID) == ProcInfo(NO_PID, False)


def test_this_process_is_read_with_its_unit_from_the_cgroup_file_given(tmp_path: Path):
    (tmp_path / str(os.getpid())).mkdir()
    (tmp_path / str(os.getpid()) / "cgroup").write_text("0::/system.slice/llm.service\n")
    me = proc_info(os.getpid(), proc_root=tmp_path)
    assert me.visible and me.unit == "llm.service" and me.name == psutil.Process().name()
    assert me.cmdline == " ".join(psutil.Process().cmdline())
    assert proc_info(os.getpid(), proc_root=tmp_path / "absent").unit is None  # no cgroup file: no unit


class Scripted:
    def __init__(self, name: str = "srv", argv: list[str] | None = None, error: Exception | None = None) -> None:
        self._name, self._argv, self._error = name, argv if argv is not None else [], error

    def __call__(self, pid: int) -> Scripted:
        if self._error is not None:
            raise self._error
        return self

    def oneshot(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def name(self) -> str:
        return self._name

    def cmdline(self) -> list[str]:
        return self._argv


def test_secrets_in_the_command_line_are_masked_and_a_kernel_thread_is_its_name(monkeypatch: pytest.MonkeyPatch,
                                                                               tmp_path: Path):
    monkeypatch.setattr(procinfo.psutil, "Process", Scripted("vllm", ["vllm", "serve", "--api-key", "s3cr3t-99"]))
    assert proc_info(5, proc_root=tmp_path).cmdline == "vllm serve --api-key ***"
    red = Redactor()
    red.add("org-token-77")
    monkeypatch.setattr(procinfo.psutil, "Process", Scripted("srv", ["srv", "--token-file", "org-token-77"]))
    assert proc_info(5, red, proc_root=tmp_path).cmdline == "srv --token-file ***"
    monkeypatch.setattr(procinfo.psutil, "Process", Scripted("kworker/0:1", []))
    assert proc_info(5, proc_root=tmp_path).cmdline == "[kworker/0:1]"


def test_a_process_this_user_may_not_read_is_visible_but_unnamed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(procinfo.psutil, "Process", Scripted(error=psutil.AccessDenied(5)))
    assert proc_info(5) == ProcInfo(5, True, name="?", cmdline="(access denied)")


@pytest.mark.parametrize(("text", "unit"), [
    ("0::/system.slice/a.service/b.service\n", "b.service"),  # the innermost
    ("0::/system.slice/a.service:x.service\n", "a.service:x.service"),  # a path holding ':' is still the path
    ("5:cpu:/system.slice/v1only.service\n", None),  # a v1 controller's path is not systemd's
    ("1:name=systemd:/system.slice/x.service\n0::/\n", "x.service"),
    ("0::/system.slice/first.service\n1:name=systemd:/system.slice/second.service\n", "first.service"),
    ("garbage\n0:/no-third-field.service\n", None),
])
def test_the_unit_is_the_innermost_service_of_systemds_hierarchy(text: str, unit: str | None):
    assert unit_from_cgroup(text) == unit
