"""Preflight against real files, real environments, real sockets and a real llama-server.

Checkpoints: a truncated safetensors shard, a shard missing from the index, a Git LFS pointer, a broken
Hugging Face cache symlink, the real SmolLM2 GGUF (whole and truncated), GGUFs written by llama.cpp's own
gguf-py. Environments: venvs made with ``python -m venv --without-pip`` holding compressed-tensors 0.8.1 or
0.10.0 (installed from PyPI with --no-deps: only their metadata is read). GPUs through recorded NVML
snapshots (scripts/check_gpu_preflight.py runs the same checks on a real GPU machine).

The process-starting tests of this subject; the others: ``tests/unit/preflight/test_preflight.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from firstlight.preflight import FAIL, OK, WARN, PreflightOptions, read_target, run_preflight
from firstlight.preflight.gguf import read_layout
from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, wait_for
from tests.support.preflight import (
    _snapshot,
    checkpoint_check,
    gpu_check,
    llama,  # noqa: F401 (a fixture)
    make_checkpoint,
    need,
)


def test_a_broken_hf_cache_symlink_fails_through_the_cli(tmp_path: Path):
    """The hub cache layout: snapshots/REV/FILE -> ../../blobs/SHA; the blob of one shard was deleted."""
    repo = tmp_path / "hub" / "models--acme--tiny"
    blobs, snap = repo / "blobs", repo / "snapshots" / "0123abc"
    src = make_checkpoint(tmp_path / "src")
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    for i, f in enumerate(sorted(src.iterdir())):
        shutil.move(str(f), blobs / f"blob{i}")
        (snap / f.name).symlink_to(f"../../blobs/blob{i}")
    (blobs / "blob1").unlink()  # model-00001-of-00003.safetensors
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", "vllm", "serve", "acme/tiny",
                       "--port", str(free_port()), env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert r.rc == 1, r.stderr
    event = r.events[-1]
    assert event["event"] == "preflight" and event["verdict"] == "fail"
    c = next(c for c in event["checks"] if c["name"] == "checkpoint")
    assert c["status"] == "fail" and "model-00001-of-00003.safetensors -> ../../blobs/blob1" in c["evidence"]


def truncated_copy(src: str, dst: Path, size: int) -> Path:
    with open(src, "rb") as s, open(dst, "wb") as d:
        d.write(s.read(size))
    return dst


def test_the_real_smollm2_gguf_is_complete_and_its_truncated_copies_fail(llama: dict[str, str], tmp_path: Path):  # noqa: F811
    model = Path(llama["model"])
    layout = read_layout(model)
    assert layout.required_size == model.stat().st_size  # the tensor data ends exactly at the end of the file
    assert checkpoint_check(model).status == OK
    half = truncated_copy(llama["model"], tmp_path / "half.gguf", model.stat().st_size // 2)
    c = checkpoint_check(half)
    assert c.status == FAIL and "half.gguf" in c.evidence
    assert str(half.stat().st_size) in c.evidence and str(layout.required_size) in c.evidence
    header_only = truncated_copy(llama["model"], tmp_path / "cut.gguf", layout.data_start // 2)
    c = checkpoint_check(header_only)
    assert c.status == FAIL and "header truncated" in c.evidence


# -- the server's Python: pip and library versions ----------------------------------------------------------
NVFP4_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "quantization_config": {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "config_groups": {"group_0": {"format": "nvfp4-pack-quantized", "targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True}}},
    },
}


def _venv(root: Path, package: str | None) -> Path:
    """``python -m venv --without-pip`` (as a uv venv without --seed), the package installed into it by
    this interpreter's pip (``pip --python``) from PyPI, without dependencies."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    if package:
        p = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                            package], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            need(package, f"pip install failed: {p.stderr.strip()[-300:]}")
    return python


@pytest.fixture(scope="session")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("venvs")
    return {"old": _venv(root / "ct081", "compressed-tensors==0.8.1"),
            "new": _venv(root / "ct0100", "compressed-tensors==0.10.0")}


def _checks(r: Any) -> dict[str, dict[str, Any]]:
    event = r.events[-1]
    assert event["event"] == "preflight", r.stdout
    return {c["name"]: c for c in event["checks"]}


def test_old_compressed_tensors_in_the_servers_venv_fails_naming_both_versions(venvs: dict[str, Path],
                                                                              tmp_path: Path):
    model = make_checkpoint(tmp_path / "k2", config=NVFP4_CONFIG)
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", str(venvs["old"]), "-m",
                       "sglang.launch_server", "--model-path", str(model), "--port", str(free_port()))
    assert r.rc == 1, r.stderr
    checks = _checks(r)
    q = checks["quantization"]
    assert q["status"] == "fail" and q["category"] == "quantization"
    assert "0.8.1" in q["evidence"] and "0.10.0" in q["evidence"] and "nvfp4-pack-quantized" in q["evidence"]
    assert "0.8.1" in q["hint"] and "'compressed-tensors>=0.10.0'" in q["hint"] and str(venvs["old"]) in q["hint"]
    pip = checks["pip"]
    assert pip["status"] == "warn" and "ensurepip" in pip["hint"]  # the venv cannot repair itself either
    assert "FAIL" in r.stderr and "fix:" in r.stderr


def test_a_compressed_tensors_that_knows_the_format_is_ok(venvs: dict[str, Path], tmp_path: Path):
    model = make_checkpoint(tmp_path / "k2", config=NVFP4_CONFIG)
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", str(venvs["new"]), "-m",
                       "sglang.launch_server", "--model-path", str(model), "--port", str(free_port()))
    checks = _checks(r)
    assert checks["quantization"]["status"] == "ok", checks["quantization"]
    assert "compressed-tensors 0.10.0" in checks["quantization"]["evidence"]
    assert r.rc == 0, r.stderr  # pip missing is only a warning


def test_a_console_scripts_shebang_names_the_interpreter(venvs: dict[str, Path], tmp_path: Path):
    script = venvs["old"].parent / "vllm"
    script.write_text(f"#!{venvs['old']}\nimport sys\nsys.exit(0)\n")
    script.chmod(0o755)
    model = make_checkpoint(tmp_path / "k2", config=NVFP4_CONFIG)
    t = read_target([str(script), "serve", str(model)])
    assert t.interpreter == str(venvs["old"]) and t.engine == "vllm"
    report = run_preflight(t, PreflightOptions(disk_sample=False))
    q = next(c for c in report.checks if c.name == "quantization")
    assert q.status == FAIL and "0.8.1" in q.evidence


def test_pip_in_a_venv_with_pip_is_ok(tmp_path: Path):
    t = read_target([sys.executable, "-m", "sglang.launch_server", "--model-path", str(make_checkpoint(tmp_path))])
    report = run_preflight(t, PreflightOptions(disk_sample=False))
    pip = next(c for c in report.checks if c.name == "pip")
    assert pip.status == OK and "pip " in pip.evidence


# -- port and stale servers ----------------------------------------------------------------------------------
def test_a_busy_port_fails_naming_who_holds_it(llama: dict[str, str]):  # noqa: F811
    with socket.socket() as blocker:
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", llama["llama_server"], "-m",
                           llama["model"], "--host", "127.0.0.1", "--port", str(port))
    assert r.rc == 1, r.stderr
    c = _checks(r)["port"]
    assert c["status"] == "fail" and c["category"] == "port_in_use"
    assert f"PID {os.getpid()}" in c["evidence"] and f"kill {os.getpid()}" in c["hint"]


def test_a_stale_llama_server_on_the_same_model(llama: dict[str, str], tmp_path: Path):  # noqa: F811
    port = free_port()
    stale = subprocess.Popen([llama["llama_server"], "-m", llama["model"], "--host", "127.0.0.1", "--port",
                              str(port), "-c", "512"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        wait_for(lambda: _listening(port), 60, "the stale llama-server's port")
        other = run_firstlight("preflight", "--json", "--no-disk-sample", "--", llama["llama_server"], "-m",
                               llama["model"], "--port", str(free_port()))
        same = run_firstlight("preflight", "--json", "--no-disk-sample", "--", llama["llama_server"], "-m",
                              llama["model"], "--port", str(port))
    finally:
        stale.terminate()
        stale.wait(timeout=30)
    c = _checks(other)["stale_server"]
    assert other.rc == 0 and c["status"] == "warn" and f"same model: PID {stale.pid}" in c["evidence"], c
    checks = _checks(same)
    assert same.rc == 1 and checks["stale_server"]["status"] == "fail", checks["stale_server"]
    assert f"same port: PID {stale.pid}" in checks["stale_server"]["evidence"]
    assert checks["port"]["status"] == "fail" and f"PID {stale.pid}" in checks["port"]["evidence"]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# -- up: a failed preflight starts nothing -----------------------------------------------------------------
def test_up_on_a_truncated_gguf_fails_in_preflight_and_starts_no_server(llama: dict[str, str], tmp_path: Path):  # noqa: F811
    model = truncated_copy(llama["model"], tmp_path / "truncated.gguf", Path(llama["model"]).stat().st_size // 2)
    witness = tmp_path / "llama-server.log"  # llama-server creates its --log-file as soon as it starts

    def up(*extra: str) -> Any:
        return run_firstlight("up", "--json", *extra, "--poll-min", "0.05", "--", llama["llama_server"], "-m",
                              str(model), "--host", "127.0.0.1", "--port", str(free_port()), "--log-file",
                              str(witness))

    r = up()
    assert r.rc == 1, r.stderr[-2000:]
    kinds = [e["event"] for e in r.events]
    assert kinds.index("preflight") < kinds.index("summary") == len(kinds) - 1 and "started" not in kinds
    s = r.summary
    assert s["verdict"] == "failed" and s["failure"] == "corrupt_weights" and s["pid"] is None
    assert "truncated.gguf" in s["evidence"][0]["value"] and s["preflight"]["verdict"] == "fail"
    assert not witness.exists(), "llama-server was started"
    # The witness works: without preflight the real server starts (and fails on the same file by itself).
    r = up("--no-preflight")
    assert r.rc == 1 and r.summary["failure"] == "corrupt_weights" and r.summary["pid"] is not None
    assert witness.exists()


def test_preflight_usage_errors_exit_64():
    assert run_firstlight("preflight").rc == 64
    assert run_firstlight("preflight", "--engine", "nope", "--", "x").rc == 64


@pytest.fixture
def foreign() -> Any:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--api-key",
                          "sk-abcdefghijklmnopqrstu"])
    yield p
    p.kill()
    p.wait()


def test_sglang_tp8_with_a_stale_process_on_gpu0_is_unbalanced_and_names_it(foreign: Any):
    c = gpu_check(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "8"], _snapshot(foreign.pid))
    assert c.status == FAIL and c.category == "gpu_occupied"
    assert "memory capacity is unbalanced" in c.evidence and "GPU 0" in c.evidence
    assert f"PID {foreign.pid} python" in c.evidence and "time.sleep(120)" in c.evidence
    assert "sk-abc" not in c.evidence  # its command line's secrets are masked
    assert c.hint == f"kill {foreign.pid}"


def test_sglang_on_gpus_without_the_stale_process_is_ok(foreign: Any):
    c = gpu_check(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "2"],
                  _snapshot(foreign.pid), {"CUDA_VISIBLE_DEVICES": "3,4"})
    assert c.status == OK and "GPU 3" in c.evidence and "GPU 0" not in c.evidence, c


def test_vllm_rule_free_memory_against_gpu_memory_utilization(foreign: Any):
    snap = _snapshot(foreign.pid)
    c = gpu_check(["vllm", "serve", "/m"], snap)
    assert c.status == FAIL and "--gpu-memory-utilization 0.9" in c.evidence  # 84.4 of 102.6 GB free
    c = gpu_check(["vllm", "serve", "/m", "--gpu-memory-utilization", "0.8"], snap)
    assert c.status == WARN and f"PID {foreign.pid}" in c.evidence  # fits, but the foreign process is named


def test_tp_larger_than_the_visible_gpus_is_a_bad_argument(foreign: Any):
    c = gpu_check(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "4"],
                  _snapshot(foreign.pid), {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert c.status == FAIL and c.category == "bad_argument"


def test_the_cli_reads_a_snapshot_and_fails_sglang_on_the_stale_gpu(foreign: Any, tmp_path: Path):
    snap = tmp_path / "nvml.json"
    snap.write_text(json.dumps({"devices": _snapshot(foreign.pid).devices}))
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", "python", "-m", "sglang.launch_server",
                       "--model-path", str(make_checkpoint(tmp_path / "m")), "--tp", "8", "--port",
                       str(free_port()), env={"FIRSTLIGHT_NVML_SNAPSHOT": str(snap)})
    assert r.rc == 1
    assert _checks(r)["gpus"]["status"] == "fail"


def test_up_with_a_truncated_model_given_by_model_starts_nothing(tmp_path: Path):
    """Without llama-server: the command would create a witness file as its first act."""
    model = make_checkpoint(tmp_path / "m")
    shard = model / "model-00001-of-00003.safetensors"
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 1000)
    witness = tmp_path / "started"
    history = tmp_path / "history.sqlite3"
    cmd = ["up", "--json", "--model", str(model), "--url", f"http://127.0.0.1:{free_port()}", "--timeout", "20",
           "--history", str(history)]
    server = ["sh", "-c", f"touch {witness}; exit 3"]
    r = run_firstlight(*cmd, "--", *server)
    assert r.rc == 1 and r.summary["failure"] == "corrupt_weights", r.stderr[-2000:]
    assert "no server was started" in r.stderr and not witness.exists()
    assert r.summary["evidence"][0]["signal"] == "preflight:checkpoint"
    # The failed start is a run of its deployment in the history, with its checks.
    from firstlight.history import History

    runs = History(history).runs()
    assert len(runs) == 1 and not runs[0].ok
    assert History(history).get(runs[0].id).summary["preflight"]["verdict"] == "fail"  # type: ignore[union-attr]
    r = run_firstlight(*cmd, "--no-preflight", "--", *server)
    assert r.rc == 1 and witness.exists()  # the witness works


def test_up_reports_a_passing_preflight_before_starting_and_keeps_it_with_the_run(tmp_path: Path):
    from firstlight.history import History
    from firstlight.sim.fixtures import make_weights

    make_weights(tmp_path / "m", 4 << 20, shards=2)
    history = tmp_path / "history.sqlite3"
    r = run_firstlight("up", "--json", "--stop-when-ready", "--poll-min", "0.05", "--history", str(history), "--",
                       sys.executable, "-m", "firstlight.sim", "--port", str(free_port()), "--model-path",
                       str(tmp_path / "m"))
    assert r.rc == 0, r.stderr[-2000:]
    kinds = [e["event"] for e in r.events]
    assert kinds[0] == "preflight" and r.events[0]["verdict"] in ("ok", "warn") and "started" in kinds
    assert "preflight checkpoint    ok" in r.stderr
    assert r.summary["preflight"] == r.events[0]  # the summary carries the same report
    stored = History(history).get(r.summary["history_run"])
    assert stored is not None and stored.summary["preflight"]["checks"][0]["name"] == "checkpoint"
    r = run_firstlight("up", "--json", "--stop-when-ready", "--no-preflight", "--history", str(history), "--",
                       sys.executable, "-m", "firstlight.sim", "--port", str(free_port()))
    assert r.rc == 0 and r.summary["preflight"] is None and r.events[0]["event"] == "started"
