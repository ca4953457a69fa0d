"""Rules at their edges: each test here was written against a change that broke the rule and that the rest of the
suite let through (a mutant that survived). Real sockets, files and processes where the rule is about one.

Each test names its rule; ``docs/development.md`` lists the mutant each one kills.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from firstlight.config import JudgeConfig, ProbeConfig
from firstlight.engines import get_profile
from firstlight.interpret import ROOT_WINDOW_LINES, LineInterpreter
from firstlight.preflight.base import FAIL, OK
from firstlight.preflight.checkpoint import check_checkpoint, scan_checkpoint
from firstlight.preflight.gpus import check_gpus, read_gpus
from firstlight.preflight.interpreter import InterpreterInfo
from firstlight.preflight.port import check_port
from firstlight.preflight.quantization import check_quantization
from firstlight.preflight.target import read_target
from firstlight.probes.ladder import Ladder
from firstlight.samplers.gpu import NvmlSnapshot
from firstlight.samplers.process import ProcessTreeSampler
from firstlight.timeline import GpuDevice, GpuSample, Level, ProcessSample
from firstlight.wire import Wire, WireError
from tests.support.common import run_firstlight, wait_for
from tests.test_judge import proc, run
from tests.test_ladder_rules import server


# -- wire/deadline.py: the deadline shortens every single read -----------------------------------------------
@contextmanager
def _silent_mid_read() -> Iterator[str]:
    """A real server that answers a status line, headers and 5 of 100 body bytes, then says nothing more
    while it keeps the connection open."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except OSError:
                continue
            conns.append(conn)
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                             b'{"ok"')
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{lsock.getsockname()[1]}"
    finally:
        stop.set()
        lsock.close()
        for c in conns:
            c.close()


def test_the_deadline_shortens_a_single_read_on_a_server_gone_silent_mid_body():
    # 1 s deadline, 8 s read timeout: the read that waits for the rest of the body must end by the deadline.
    with _silent_mid_read() as url, Wire(url, connect_timeout=1.0) as wire:
        t0 = time.monotonic()
        with pytest.raises(WireError) as e:
            wire.get("/health", read_timeout=8.0, deadline_at=t0 + 1.0)
        took = time.monotonic() - t0
    said = re.search(r"within ([\d.]+)s \(the request's deadline\)", str(e.value))
    assert e.value.timed_out and said is not None and 0.5 < float(said.group(1)) <= 1.0, e.value  # not 8 s
    assert took < 6.0, f"held {took:.1f}s: the 8 s read timeout, not the 1 s deadline, ended the read"


# -- probes/ladder.py: 408, 425 and 429 on generation are "not yet" -------------------------------------------
def _climb(url: str, **kw: Any) -> list[Any]:
    cfg = ProbeConfig(url=url, connect_timeout=0.5, read_timeout=1.0, generation_timeout=2.0, **kw)
    with Ladder(cfg) as ladder:
        return ladder.climb()


UP_TO_MODELS = {("GET", "/health"): (200, {"status": "ok"}), ("GET", "/v1/models"): (200, {"data": [{"id": "m"}]})}


@pytest.mark.parametrize("status", [408, 425, 429])
def test_a_busy_answer_on_generation_is_not_yet_never_a_definitive_no(status: int):
    routes = {**UP_TO_MODELS, ("POST", "/v1/completions"): (status, {"error": "busy"})}
    with server(routes) as (url, _):
        last = _climb(url)[-1]
    assert last.level == Level.GENERATION and not last.ok and last.status == status
    assert last.transient, f"{status} was taken as a definitive bad answer"


def test_other_4xx_on_generation_is_a_definitive_no():
    routes = {**UP_TO_MODELS, ("POST", "/v1/completions"): (400, {"error": "bad model"})}
    with server(routes) as (url, _):
        last = _climb(url)[-1]
    assert last.level == Level.GENERATION and not last.ok and not last.transient


# -- wire/content.py: a whitespace-only completion is not a generation ----------------------------------------
@pytest.mark.parametrize("api, choice", [("completions", {"text": " \n\t "}),
                                         ("chat", {"message": {"role": "assistant", "content": "\n  \n"}})])
def test_a_whitespace_only_completion_is_not_a_generation(api: str, choice: dict[str, Any]):
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    routes = {**UP_TO_MODELS, ("POST", path): (200, {"choices": [choice]})}
    with server(routes) as (url, _):
        results = _climb(url, api=api)
    last = results[-1]
    assert last.level == Level.GENERATION and not last.ok and not last.transient
    assert "empty completion" in last.detail


# -- preflight/checkpoint.py: size = 8 + N + the LARGEST data_offsets end, exactly ----------------------------
def _safetensors_largest_first(path: Path, extra: int = 0) -> int:
    """Two U8 tensors, the one at the end of the data written first in the header (writers order tensors by
    name, not by offset); ``extra`` bytes past (or, negative, short of) the exact size. Returns the exact size."""
    header = {"z.weight": {"dtype": "U8", "shape": [4096], "data_offsets": [1024, 5120]},
              "a.weight": {"dtype": "U8", "shape": [1024], "data_offsets": [0, 1024]}}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    exact = 8 + len(raw) + 5120
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(exact + extra)
    return exact


def test_a_complete_file_whose_largest_offset_is_not_last_passes(tmp_path: Path):
    _safetensors_largest_first(tmp_path / "model.safetensors")
    c = check_checkpoint(read_target(["vllm", "serve", str(tmp_path)]), scan_checkpoint(tmp_path))
    assert c.status == OK, c


def test_a_file_cut_at_the_last_written_offset_is_truncated(tmp_path: Path):
    _safetensors_largest_first(tmp_path / "model.safetensors", extra=-4096)  # ends where "a.weight" ends
    c = check_checkpoint(read_target(["vllm", "serve", str(tmp_path)]), scan_checkpoint(tmp_path))
    assert c.status == FAIL and "truncated" in c.evidence, c


def test_a_file_longer_than_its_header_says_fails(tmp_path: Path):
    exact = _safetensors_largest_first(tmp_path / "model.safetensors", extra=1)
    c = check_checkpoint(read_target(["vllm", "serve", str(tmp_path)]), scan_checkpoint(tmp_path))
    assert c.status == FAIL and c.category == "corrupt_weights", c
    assert f"{exact + 1} bytes on disk, the header says {exact}" in c.evidence and "longer than" in c.evidence


# -- preflight/quantization.py: nvfp4-pack-quantized needs compressed-tensors 0.10.0 exactly ------------------
@pytest.mark.parametrize("installed, status", [("0.9.4", FAIL), ("0.9.99", FAIL), ("0.10.0", OK), ("0.10.1", OK)])
def test_nvfp4_needs_compressed_tensors_0_10_0(tmp_path: Path, installed: str, status: str):
    # nvfp4 is the only value used (no tensor_group strategy), so its row alone decides.
    q = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
         "config_groups": {"g": {"format": "nvfp4-pack-quantized", "weights": {"num_bits": 4}}}}
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": q}))
    info = InterpreterInfo("/venv/bin/python", "3.12", "/venv", {"compressed-tensors": installed})
    c = check_quantization(read_target(["vllm", "serve", str(tmp_path)]), info)
    assert c.status == status, c
    if status == FAIL:
        assert "'compressed-tensors>=0.10.0'" in (c.hint or "") and "nvfp4-pack-quantized" in c.evidence


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


# -- preflight/port.py: a busy port is a failure, whoever holds it --------------------------------------------
@contextmanager
def _listening_socket() -> Iterator[int]:
    """A plain listening socket (no engine, no HTTP): the port is taken all the same."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def test_a_port_held_by_a_plain_socket_fails_preflight():
    with _listening_socket() as port:
        c = check_port(read_target(["llama-server", "-m", "m.gguf", "--host", "127.0.0.1", "--port", str(port)]))
        assert c.status == FAIL and c.category == "port_in_use", c
        assert f"127.0.0.1:{port} is in use" in c.evidence
        r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", "llama-server", "--host", "127.0.0.1",
                           "--port", str(port))
    checks = {c["name"]: c for c in r.events[-1]["checks"]}
    assert checks["port"]["status"] == "fail", checks["port"]
    assert r.rc == 1, r.stderr


# -- interpret.py: phases only move forward; a non-fatal root cause just before the fatal line is kept --------
SGLANG = get_profile("sglang")
FRAME_KV = '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 412, in init_memory_pool'
FRAME_LOAD = '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 230, in load_model'


def test_a_traceback_frame_never_moves_the_phase_backwards():
    it = LineInterpreter(SGLANG)
    it.feed("Traceback (most recent call last):")
    assert it.feed(FRAME_KV).phase == "kv_cache"
    assert it.feed(FRAME_LOAD).phase is None  # an outer frame (weights) is earlier: the phase stays
    assert it.phase == "kv_cache"


def test_a_root_traceback_frame_never_moves_the_phase_backwards_after_the_fatal_line():
    it = LineInterpreter(SGLANG)
    it.feed("[2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):")
    assert it.first_fatal is not None
    assert it.feed(FRAME_KV).phase == "kv_cache"
    assert it.feed(FRAME_LOAD).phase is None and it.phase == "kv_cache"


NCCL_OOM = "misc.cc:44 NCCL WARN Cuda failure 'out of memory'"  # non-fatal, an oom
NCCL_FATAL = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error"


@pytest.mark.parametrize("gap, root", [(1, "oom"), (ROOT_WINDOW_LINES, "oom"), (ROOT_WINDOW_LINES + 1, "nccl")])
def test_a_non_fatal_root_cause_just_before_the_first_fatal_line_is_kept(gap: int, root: str):
    it = LineInterpreter(SGLANG)
    it.feed(NCCL_OOM)
    for _ in range(gap - 1):
        it.feed("plain line")
    it.feed(NCCL_FATAL)
    cause = it.root_cause(ended=True)
    assert cause is not None and cause.failure.category == root, cause


# -- samplers/process.py: bytes read by children that exited still count --------------------------------------
READER = """
import sys
with open(sys.argv[1], "rb") as f:
    while f.read(1 << 20):
        pass
print("read", flush=True)
sys.stdin.readline()
"""
ROOT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdin=subprocess.PIPE)
print(child.pid, flush=True)
sys.stdin.readline()
child.stdin.close()  # the child exits; it stays a zombie (never waited for), so our own counters keep out its I/O
sys.stdin.readline()
"""


def test_bytes_read_by_a_child_that_exited_still_count(tmp_path: Path):
    data = tmp_path / "weights.bin"
    size = 64 << 20
    with open(data, "wb") as f:
        f.truncate(size)
    p = subprocess.Popen([sys.executable, "-c", ROOT, READER, str(data)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdin is not None
        child = int(p.stdout.readline())
        assert p.stdout.readline().strip() == "read"
        sampler = ProcessTreeSampler(p.pid, interval=0.1)
        before = sampler.sample()[-1]
        assert isinstance(before, ProcessSample) and before.read_bytes >= size
        p.stdin.write("exit\n")
        p.stdin.flush()

        def died() -> ProcessSample | None:
            s = sampler.sample()[-1]
            return s if isinstance(s, ProcessSample) and any(d.pid == child for d in s.died) else None

        after = wait_for(died, 30, "the reading child to exit")
        assert after.read_bytes >= size, f"{after.read_bytes} bytes: the exited child's reads were dropped"
        assert child not in {i.pid for i in after.procs}
    finally:
        p.kill()
        p.wait()


# -- judge.py: GPU utilisation alone is weak progress ---------------------------------------------------------
def test_gpu_utilisation_alone_is_weak_progress_hung_only_after_the_spin_timeout():
    rules = JudgeConfig(timeout=600, stall_timeout=10, spin_timeout=30)

    def busy(t: float) -> GpuSample:  # 100 % busy, memory never changes
        return GpuSample(t + 1_700_000_000.0, (GpuDevice(0, "H100", 40 << 30, 80 << 30, 100.0),))

    obs = [proc(0), *(busy(i) for i in range(1, 40))]
    a = run(obs[:26], 25, rules=rules)
    assert a.verdict == "starting", a  # 25 s of utilisation alone, stall 10 s: not hung
    a = run(obs, 39, rules=rules)
    assert a.verdict == "hung" and a.detail == "busy-wait suspected", a
    assert any("utilisation" in e.value for e in a.evidence)


# -- tests' free ports cannot race ----------------------------------------------------------------------------
def test_free_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice():
    import random

    from firstlight.sim.server import _ephemeral_low, free_port

    random.seed(25)  # both processes draw the same candidates: only the reservation keeps them apart
    mine = [free_port() for _ in range(20)]
    code = ("import random; random.seed(25); from firstlight.sim.server import free_port; "
            "print(*(free_port() for _ in range(20)))")
    theirs = [int(p) for p in subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                             timeout=60, check=True).stdout.split()]
    assert len(set(mine)) == 20 and not set(mine) & set(theirs)  # the other process held none of ours
    assert all(p < _ephemeral_low() for p in mine + theirs)
    for p in mine:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # free: nobody listens on it


# -- units/journal.py: the invocation replayed by default is the last one that printed a line -----------------
def test_an_invocation_without_lines_is_not_picked_over_the_last_one_that_has_some(tmp_path: Path):
    from firstlight.units.journal import journal_lines, list_invocations, read_entries
    from tests.support.journal_export import UnitRun, write_journal

    unit, t0 = "llm.service", 1_790_000_000.0
    spoke = UnitRun(unit, t0, pid=100)
    spoke.started()
    spoke.lines(["loading", "error: failed to load model"])
    spoke.main_exited(1, restart=1)
    silent = UnitRun(unit, t0 + 10, pid=200)  # the restart: systemd started it, it printed nothing yet
    silent.started()
    path = tmp_path / "restart.journal"
    write_journal(path, bytes(spoke.out + silent.out))
    invs = list_invocations(read_entries(path, unit), unit)
    assert [(i.id, i.lines) for i in invs] == [(spoke.invocation, 2), (silent.invocation, 0)]
    chosen, _, pairs = journal_lines(path, unit)
    assert chosen.id == spoke.invocation
    assert [text for _, text in pairs] == ["loading", "error: failed to load model"]


# -- the README's development tools are wired ----------------------------------------------------------------
def test_test_sh_reports_coverage_and_mutation_sh_covers_every_rule_module_with_existing_tests():
    import re as _re

    from tests.support.common import REPO

    assert "--cov=firstlight" in (REPO / "scripts" / "test.sh").read_text()
    script = (REPO / "scripts" / "mutation.sh").read_text()
    table = dict(_re.findall(r'^  \[([\w/]+)\]="([^"]+)"$', script, _re.M))
    for module in ("judge", "interpret", "wire", "preflight", "probes", "units/journal", "samplers"):
        assert module in table, module
    for module, tests in table.items():
        assert (REPO / "firstlight" / module).is_dir() or (REPO / "firstlight" / f"{module}.py").is_file(), module
        for t in tests.split():
            assert (REPO / t).is_file(), (module, t)
