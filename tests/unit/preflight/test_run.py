"""``run_preflight``, the preflight's one driver, in process: every check replaced by a recorder, so what each is
given (the target, the interpreter's answers, the GPUs, the scan, the redactor, the disk-sample switch), the
order of the report, a check that raises, and the deadline (with what each unfinished check was reading) are
read without the machine's answers. The checks themselves: the other files of this folder."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import firstlight.preflight as pf
from firstlight.preflight import Check, PreflightOptions
from firstlight.preflight.checkpoint import Scan
from firstlight.preflight.interpreter import InterpreterInfo
from firstlight.preflight.target import read_target
from firstlight.redact import Redactor
from firstlight.timeline import GpuSample

ORDER = ["checkpoint", "quantization", "pip", "gpus", "port", "stale_server", "memory_disk", "fit"]
CATEGORY = {"checkpoint": "corrupt_weights", "quantization": "quantization", "pip": "import_error",
            "gpus": "gpu_occupied", "port": "port_in_use", "stale_server": "other", "memory_disk": "oom",
            "fit": "kv_cache"}


class Machine:
    """The checks and the background reads, recorded; ``block`` names the checks that never return."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.got: dict[str, tuple[Any, ...]] = {}
        self.threads: dict[str, threading.Thread] = {}
        self.block: set[str] = set()
        self.raise_in: dict[str, BaseException] = {}
        self.release = threading.Event()
        self.info = InterpreterInfo("/venv/bin/python3", python="3.11")
        self.gpus: GpuSample | Exception = GpuSample(1.0)
        self.probed: list[tuple[Any, ...]] = []
        for name, fn in (("checkpoint", "check_checkpoint"), ("quantization", "check_quantization"),
                         ("pip", "check_pip"), ("gpus", "check_gpus"), ("port", "check_port"),
                         ("stale_server", "check_stale"), ("memory_disk", "check_resources"),
                         ("fit", "check_fit")):
            monkeypatch.setattr(pf, fn, self._check(name))
        monkeypatch.setattr(pf, "probe_interpreter", self._probe)
        monkeypatch.setattr(pf, "read_gpus", self._read_gpus)
        monkeypatch.setattr(pf, "scan_into", lambda scan: scan)

    def _check(self, name: str) -> Any:
        def check(*args: Any) -> Check:
            self.got[name] = args
            self.threads[name] = threading.current_thread()
            if name in self.raise_in:
                raise self.raise_in[name]
            if name in self.block:
                self.release.wait(30)
            return Check(name, "ok", CATEGORY[name], f"{name} read")
        return check

    def _probe(self, interpreter: str, env: dict[str, str]) -> InterpreterInfo:
        self.probed.append((interpreter, env))
        return self.info

    def _read_gpus(self, nvml: Any) -> GpuSample:
        self.probed.append(("nvml", nvml))
        if isinstance(self.gpus, Exception):
            raise self.gpus
        return self.gpus


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Any:
    m = Machine(monkeypatch)
    yield m
    m.release.set()


PYTHON = dataclasses.replace(read_target(["vllm", "serve", "/m", "--port", "8001"], env={"HF_HOME": "/hf"}),
                             interpreter="/venv/bin/python3", model_path=Path("/models/m"))


def test_every_check_in_a_stable_order_each_given_what_it_reads(machine: Machine):
    red = Redactor()
    report = pf.run_preflight(PYTHON, PreflightOptions(disk_sample=False, nvml="the nvml"), red)
    assert [c.name for c in report.checks] == ORDER and report.verdict == "ok"
    assert ("/venv/bin/python3", PYTHON.env) in machine.probed
    assert ("nvml", "the nvml") in machine.probed
    scan = machine.got["checkpoint"][1]
    assert machine.got["checkpoint"][0] is PYTHON and isinstance(scan, Scan) and scan.root == Path("/models/m")
    assert machine.got["quantization"] == (PYTHON, machine.info) and machine.got["pip"] == (PYTHON, machine.info)
    assert machine.got["gpus"] == (PYTHON, machine.gpus, red)
    assert machine.got["port"] == (PYTHON, red) and machine.got["stale_server"] == (PYTHON, red)
    assert machine.got["memory_disk"] == (PYTHON, scan, machine.gpus, False)
    assert machine.got["fit"] == (PYTHON, scan, machine.gpus)
    assert len({t.name for t in machine.threads.values()}) == 1 and all(
        t.name == "preflight" and t.daemon for t in machine.threads.values())
    assert 0 <= report.elapsed_s < 30


def test_a_native_server_without_weights_is_given_none_for_both(machine: Machine):
    native = dataclasses.replace(PYTHON, interpreter=None, model_path=None)
    pf.run_preflight(native)
    assert machine.got["checkpoint"] == (native, None) and machine.got["pip"] == (native, None)
    assert machine.got["memory_disk"] == (native, None, machine.gpus, True)  # the disk sample is on by default
    assert all(p[0] == "nvml" for p in machine.probed)  # no interpreter asked


def test_reads_that_failed_reach_the_checks_as_none_or_a_reason(machine: Machine, monkeypatch: pytest.MonkeyPatch):
    machine.gpus = RuntimeError("NVML_ERROR_UNINITIALIZED")
    monkeypatch.setattr(pf, "probe_interpreter", lambda *a: (_ for _ in ()).throw(OSError("no such file")))
    pf.run_preflight(PYTHON)
    assert machine.got["gpus"][1] == "NVML could not be read" and machine.got["memory_disk"][2] == (
        "NVML could not be read")
    assert machine.got["pip"] == (PYTHON, None) and machine.got["quantization"] == (PYTHON, None)


def test_a_check_that_raises_is_a_warning_with_the_reason(machine: Machine):
    machine.raise_in["port"] = PermissionError("/proc/net/tcp6")
    report = pf.run_preflight(PYTHON)
    port = report.checks[ORDER.index("port")]
    assert (port.name, port.status, port.category) == ("port", "warn", "port_in_use")
    assert port.evidence == "could not check: PermissionError: /proc/net/tcp6"
    assert port.hint == "run it again; if it persists, check with --no-preflight and report it"
    assert report.verdict == "warn" and [c.status for c in report.checks].count("ok") == len(ORDER) - 1


def test_checks_unfinished_at_the_deadline_say_what_they_were_reading(machine: Machine):
    machine.block = set(ORDER)
    t0 = time.monotonic()
    report = pf.run_preflight(PYTHON, PreflightOptions(deadline_s=0.3))
    took = time.monotonic() - t0
    said = {c.name: (c.status, c.evidence, c.hint) for c in report.checks}
    hint = "a hung mount or device? check the path named; the start goes on"
    assert said["checkpoint"] == ("warn", "timed out after 0.3s reading the checkpoint (not checked)", hint)
    assert said["pip"] == ("warn", "timed out after 0.3s running /venv/bin/python3 (not checked)", hint)
    assert said["gpus"] == ("warn", "timed out after 0.3s reading NVML (not checked)", hint)
    assert said["port"] == ("warn", "timed out after 0.3s probing port 8001 (not checked)", hint)
    assert said["stale_server"] == ("warn", "timed out after 0.3s reading the processes (not checked)", hint)
    assert said["quantization"] == ("warn", "timed out after 0.3s running /venv/bin/python3 (not checked)", hint)
    assert said["memory_disk"] == ("warn", "timed out after 0.3s reading the checkpoint (not checked)", hint)
    assert [(c.name, c.category) for c in report.checks] == [(n, CATEGORY[n]) for n in ORDER]
    assert 0.3 <= took < 10 and report.elapsed_s >= 0.3  # the deadline, not the blocked checks' 30 s


def test_a_stuck_scan_names_the_file_it_was_reading(machine: Machine, monkeypatch: pytest.MonkeyPatch):
    stuck = threading.Event()

    def scan_into(scan: Scan) -> Scan:
        scan.current = Path("/models/m/model-00003-of-00008.safetensors")
        stuck.wait(30)
        return scan

    monkeypatch.setattr(pf, "scan_into", scan_into)
    try:
        report = pf.run_preflight(dataclasses.replace(PYTHON, interpreter=None), PreflightOptions(deadline_s=2.0))
    finally:
        stuck.set()
    said = {c.name: c.evidence for c in report.checks}
    assert said["checkpoint"] == ("timed out after 2s reading /models/m/model-00003-of-00008.safetensors "
                                  "(not checked)")
    assert said["memory_disk"] == said["checkpoint"]  # it waits on the same scan
    assert said["pip"] == "pip read"  # a native server: nothing to wait for (2 s: time for its thread to run)


def test_a_result_is_waited_for_in_slices_of_a_tenth_of_a_second():
    from concurrent.futures import Future

    slices: list[float | None] = []

    class Slow(Future):  # type: ignore[type-arg]
        def result(self, timeout: float | None = None) -> Any:
            slices.append(timeout)
            raise TimeoutError

    with pytest.raises(TimeoutError):
        pf._result_by(Slow(), time.monotonic() + 0.35)
    assert slices and all(s is not None and 0 <= s <= 0.1 for s in slices) and max(slices) == 0.1  # type: ignore
    assert len(slices) >= 3
    done: Future[Check] = Future()
    done.set_result(Check("port", "ok", "port_in_use", "free"))
    assert pf._result_by(done, time.monotonic() - 1).evidence == "free"  # a result at hand, even past the deadline


def test_a_background_read_hands_its_error_to_whoever_waits():
    def boom() -> None:
        raise KeyError("gone")

    future = pf._background(boom)
    with pytest.raises(KeyError):
        future.result(timeout=10)
    assert pf._result(future) is None and pf._result(None) is None
    assert pf._background(lambda: 42).result(timeout=10) == 42


def test_a_native_servers_python_checks_wait_for_nothing_when_they_time_out(machine: Machine):
    machine.block = {"quantization", "pip"}
    report = pf.run_preflight(dataclasses.replace(PYTHON, interpreter=None), PreflightOptions(deadline_s=0.3))
    said = {c.name: c.evidence for c in report.checks}
    assert said["quantization"] == said["pip"] == "timed out after 0.3s waiting (not checked)"
