"""preflight/gpus.py: which GPUs the server will use, who else holds memory on them, and the engines' own start-up
memory rules, each at its edge. The GPUs are recorded NVML snapshots (no GPU on this machine); the processes
holding memory are real processes.

The in-process tests of this subject; the others: ``tests/e2e/preflight/test_gpus.py``.
"""

from __future__ import annotations

import os

import pytest

from firstlight.preflight.base import FAIL, OK
from firstlight.preflight.gpus import GIB, read_gpus, selected_devices
from firstlight.preflight.target import read_target
from firstlight.samplers.gpu import NvmlSnapshot
from firstlight.timeline import GpuDevice
from tests.support.preflight_gpus import TOTAL, check_gpus, dev, reading, tgt

SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "/m"]


# -- the reading ----------------------------------------------------------------------------------------------
def test_no_reading_says_why():
    assert read_gpus(NvmlSnapshot({"devices": []})) == "unavailable: NVML sees no GPU; carrying on without GPU signals"

    class Broken(NvmlSnapshot):
        def nvmlInit(self) -> None:
            raise RuntimeError("Driver Not Loaded")

    r = read_gpus(Broken({"devices": []}))
    assert r == "unavailable: NVML: Driver Not Loaded; carrying on without GPU signals"
    c = check_gpus(tgt(["vllm", "serve", "/m"]), r)
    assert c.status == OK and c.category == "gpu_occupied" and c.evidence == f"skipped: {r}", c


# -- which GPUs ------------------------------------------------------------------------------------------------
def _devices(n: int) -> tuple[GpuDevice, ...]:
    return tuple(GpuDevice(i, "H100", 0, TOTAL, None) for i in range(n))


def test_without_cuda_visible_devices_the_first_tp_gpus_are_used():
    used, problem = selected_devices(tgt([*SGLANG, "--tp", "2"]), _devices(4))
    assert [d.index for d in used] == [0, 1] and problem is None


def test_cuda_visible_devices_picks_the_gpus_in_its_order():
    used, problem = selected_devices(tgt([*SGLANG, "--tp", "2"], "3,1,0"), _devices(4))
    assert [d.index for d in used] == [3, 1] and problem is None


def test_an_ordinal_that_does_not_exist_is_skipped():
    used, problem = selected_devices(tgt([*SGLANG, "--tp", "2"], "7,2,3"), _devices(4))
    assert [d.index for d in used] == [2, 3] and problem is None


def test_cuda_stops_at_the_first_negative_ordinal():
    used, problem = selected_devices(tgt([*SGLANG, "--tp", "2"], "1,-1,2"), _devices(4))
    assert [d.index for d in used] == [1]
    assert problem == "TP 2 needs 2 GPUs; 1 visible (CUDA_VISIBLE_DEVICES=1,-1,2, TP 2)"


def test_ordinal_0_is_a_gpu():
    used, problem = selected_devices(tgt([*SGLANG, "--tp", "2"], "0,1"), _devices(4))
    assert [d.index for d in used] == [0, 1] and problem is None


def test_an_entry_that_is_not_an_ordinal_is_matched_to_no_index():
    used, problem = selected_devices(tgt([*SGLANG, "--tp", "2"], "X1,2"), _devices(4))
    assert [d.index for d in used] == [0, 1] and problem is None


def test_gpu_uuids_cannot_be_matched_so_the_first_tp_gpus_are_assumed():
    used, problem = selected_devices(tgt([*SGLANG, "--tp", "2"], "2,GPU-8a1b,MIG-1"), _devices(4))
    assert [d.index for d in used] == [0, 1] and problem is None


def test_exactly_tp_visible_gpus_are_enough_one_fewer_is_a_bad_argument():
    r = reading(dev(70 * GIB), dev(70 * GIB), dev(70 * GIB))
    c = check_gpus(tgt([*SGLANG, "--tp", "3"]), r)
    assert c.status == OK, c
    c = check_gpus(tgt([*SGLANG, "--tp", "4"]), r)
    assert c.status == FAIL and c.category == "bad_argument", c
    assert c.evidence == "TP 4 needs 4 GPUs; 3 visible (CUDA_VISIBLE_DEVICES=unset, TP 4)"
    assert c.hint == "lower the TP size or make more GPUs visible (CUDA_VISIBLE_DEVICES)"


# -- SGLang: least free >= 0.9 x most free, with TP > 1 --------------------------------------------------------
def test_sglang_balance_passes_at_exactly_0_9():
    c = check_gpus(tgt([*SGLANG, "--tp", "2"]), reading(dev(60 * GIB), dev(54 * GIB)))
    assert c.status == OK, c
    c = check_gpus(tgt([*SGLANG, "--tp", "2"]), reading(dev(60 * GIB), dev(54 * GIB - 1)))
    assert c.status == FAIL, c


def test_sglang_balance_names_the_gpu_with_the_least_free_memory_and_both_figures():
    r = reading(dev(60 * GIB), dev(70 * GIB), dev(40 * GIB), dev(65 * GIB))
    c = check_gpus(tgt([*SGLANG, "--tp", "4"]), r)
    assert c.status == FAIL and c.category == "gpu_occupied", c
    assert c.evidence.startswith("SGLang's rule fails: the least free memory in the TP group (GPU 2: 40.0 GiB) is "
                                 "under 0.9 x the most (70.0 GiB), so SGLang will stop with \"The memory capacity "
                                 "is unbalanced\"; NVML: GPU 0 60.0 GiB free of 80.0 GiB; GPU 1 70.0 GiB free"), c
    assert c.hint == "free the GPU memory held outside this server"


def test_sglang_balance_is_only_for_tp_above_1_and_only_for_sglang():
    r = reading(dev(10 * GIB), dev(70 * GIB))
    assert check_gpus(tgt(SGLANG), r).status == OK
    assert check_gpus(tgt(["llama-server", "-m", "m.gguf"]), r).status == OK
    c = check_gpus(tgt([*SGLANG, "--tp", "2"]), r)
    assert c.status == FAIL, c


def test_sglang_balance_counts_only_the_gpus_it_will_use():
    r = reading(dev(10 * GIB), dev(70 * GIB), dev(69 * GIB))
    c = check_gpus(tgt([*SGLANG, "--tp", "2"], "1,2"), r)
    assert c.status == OK, c
    assert c.evidence == ("NVML: GPU 1 70.0 GiB free of 80.0 GiB; GPU 2 69.0 GiB free of 80.0 GiB "
                          "(CUDA_VISIBLE_DEVICES=1,2, TP 2)")


# -- vLLM: free >= --gpu-memory-utilization x total, on each GPU -----------------------------------------------
def test_vllm_passes_with_exactly_its_share_free_and_fails_a_byte_under():
    argv = ["vllm", "serve", "/m", "--gpu-memory-utilization", "0.5"]
    assert check_gpus(tgt(argv), reading(dev(40 * GIB))).status == OK
    c = check_gpus(tgt(argv), reading(dev(40 * GIB - 1)))
    assert c.status == FAIL and c.category == "gpu_occupied", c
    assert c.evidence.startswith("vLLM's rule fails on GPU 0: free 40.0 GiB of 80.0 GiB is less than "
                                 "--gpu-memory-utilization 0.5 x total (40.0 GiB); NVML: GPU 0"), c


def test_vllm_names_every_gpu_that_fails_its_rule():
    argv = ["vllm", "serve", "/m", "--tensor-parallel-size", "3"]  # the default share, 0.9
    c = check_gpus(tgt(argv), reading(dev(70 * GIB), dev(75 * GIB), dev(60 * GIB)))
    assert c.status == FAIL, c
    assert "vLLM's rule fails on GPU 0: free 70.0 GiB" in c.evidence and "on GPU 2: free 60.0 GiB" in c.evidence
    assert "on GPU 1" not in c.evidence
    assert "--gpu-memory-utilization 0.9 x total (72.0 GiB)" in c.evidence


def test_sglangs_balance_rule_is_not_vllms():
    argv = ["vllm", "serve", "/m", "--tp", "2", "--gpu-memory-utilization", "0.1"]
    c = check_gpus(tgt(argv), reading(dev(10 * GIB), dev(70 * GIB)))
    assert c.status == OK, c  # 10/70 would fail SGLang's rule; vLLM's asks 8 GiB free of each


def test_vllms_rule_is_not_sglangs():
    c = check_gpus(tgt(["vllm", "serve", "/m", "--tp", "2"]), reading(dev(79 * GIB), dev(73 * GIB)))
    assert c.status == OK, c  # 73/79 < 0.9 would fail SGLang's rule, but both are over 0.9 x total


@pytest.mark.parametrize("who", ["self", "parent"])
def test_firstlight_and_its_parent_are_not_foreign(who: str):
    pid = os.getpid() if who == "self" else os.getppid()
    c = check_gpus(tgt(SGLANG), reading(dev(75 * GIB, [{"pid": pid, "used_gpu_memory": GIB}])))
    assert c.status == OK, c


# -- preflight/gpus.py: SGLang's balance rule, least free >= 0.9 x most free ----------------------------------
@pytest.mark.parametrize("ratio, status", [(0.89, FAIL), (0.91, OK)])
def test_sglang_balance_rule_at_0_9(ratio: float, status: str):
    total = 80 << 30
    most = 60 << 30
    devices = [{"name": "H100", "memory_total": total, "memory_used": total - most, "processes": []},
               {"name": "H100", "memory_total": total, "memory_used": total - int(most * ratio), "processes": []}]
    t = read_target(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "2"], env={})
    c = check_gpus(t, read_gpus(NvmlSnapshot({"devices": devices})))
    assert c.status == status, c
    if status == FAIL:
        assert "memory capacity is unbalanced" in c.evidence and "GPU 1" in c.evidence


# -- other processes on the GPUs this server will use --------------------------------------------------------------
def test_memory_held_by_others_on_the_gpus_used_warns_naming_each_and_how_to_stop_them(
        monkeypatch: pytest.MonkeyPatch):
    from firstlight.preflight import gpus as g
    from firstlight.preflight.procinfo import ProcInfo
    from firstlight.redact import Redactor
    from firstlight.timeline import GpuProcess, GpuSample

    asked: list[tuple[int, object]] = []

    def info(pid: int, redactor: object) -> ProcInfo:
        asked.append((pid, redactor))
        return ProcInfo(pid, True, "python3", f"python3 old-server-{pid}.py", "old.service" if pid == 11 else None)

    monkeypatch.setattr(g, "proc_info", info)
    devices = tuple(GpuDevice(i, "H100", 5 * GIB, 80 * GIB, 0.0) for i in range(3))  # vLLM's 0.9 x 80 free
    procs = (GpuProcess(0, 11, 6 * GIB), GpuProcess(1, 11, None), GpuProcess(1, 12, 4 * GIB),
             GpuProcess(2, 13, GIB))  # GPU 2 is not this server's (TP 2)
    red = Redactor()
    c = g.check_gpus(read_target(["vllm", "serve", "/m", "--tensor-parallel-size", "2"], env={}),
                     GpuSample(0.0, devices=devices, processes=procs), red)
    assert (c.name, c.status, c.category) == ("gpus", "warn", "gpu_occupied")
    assert c.evidence == ("NVML: GPU 0 75.0 GiB free of 80.0 GiB; GPU 1 75.0 GiB free of 80.0 GiB "
                          "(CUDA_VISIBLE_DEVICES=unset, TP 2); "
                          "GPU 0: 6.0 GiB held by PID 11 python3, unit old.service: python3 old-server-11.py; "
                          "GPU 1: ? held by PID 11 python3, unit old.service: python3 old-server-11.py; "
                          "GPU 1: 4.0 GiB held by PID 12 python3: python3 old-server-12.py")
    assert c.hint == "systemctl stop old.service or kill 12"  # each fix once
    assert asked == [(11, red), (11, red), (12, red)]


def test_a_rule_broken_by_memory_others_hold_names_them_as_the_fix(monkeypatch: pytest.MonkeyPatch):
    from firstlight.preflight import gpus as g
    from firstlight.preflight.procinfo import ProcInfo
    from firstlight.timeline import GpuProcess, GpuSample

    monkeypatch.setattr(g, "proc_info", lambda pid, r: ProcInfo(pid, True, "python3", "python3 x.py"))
    full = (GpuDevice(0, "H100", 70 * GIB, 80 * GIB, 0.0),)
    t = read_target(["vllm", "serve", "/m", "--gpu-memory-utilization", "0.9"], env={})
    held = g.check_gpus(t, GpuSample(0.0, devices=full, processes=(GpuProcess(0, 77, 70 * GIB),)))
    assert held.status == "fail" and held.hint == "kill 77"
    assert held.evidence.startswith("vLLM's rule fails on GPU 0") and held.evidence.endswith(
        "GPU 0: 70.0 GiB held by PID 77 python3: python3 x.py")
    nobody = g.check_gpus(t, GpuSample(0.0, devices=full))
    assert nobody.status == "fail" and nobody.hint == "free the GPU memory held outside this server"
