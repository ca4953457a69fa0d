"""Preflight against real files, real environments, real sockets and a real llama-server.

Checkpoints: a truncated safetensors shard, a shard missing from the index, a Git LFS pointer, a broken
Hugging Face cache symlink, the real SmolLM2 GGUF (whole and truncated), GGUFs written by llama.cpp's own
gguf-py. Environments: venvs made with ``python -m venv --without-pip`` holding compressed-tensors 0.8.1 or
0.10.0 (installed from PyPI with --no-deps: only their metadata is read). GPUs through recorded NVML
snapshots (scripts/check_gpu_preflight.py runs the same checks on a real GPU machine).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from firstlight.preflight import FAIL, OK, WARN, PreflightOptions, read_target, run_preflight
from firstlight.preflight.checkpoint import check_checkpoint, scan_checkpoint
from firstlight.preflight.gguf import GGML_BLOCK, read_layout
from firstlight.preflight.gpus import check_gpus, read_gpus
from firstlight.preflight.procinfo import proc_info, unit_from_cgroup
from firstlight.preflight.target import read_target as target_of
from firstlight.samplers.gpu import NvmlSnapshot
from firstlight.sim.server import free_port
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import REPO, run_firstlight, wait_for

FIXTURES = _FIXTURES
IN_CI = os.environ.get("CI") in ("true", "1")


def need(what: str, why: str) -> None:
    """A missing real part fails the test in CI and skips it elsewhere, with the reason."""
    if IN_CI:
        pytest.fail(f"in CI {what} must be there: {why}")
    pytest.skip(f"{what} unavailable: {why}")


# -- real checkpoints ----------------------------------------------------------------------------------
def write_safetensors(path: Path, tensors: dict[str, int]) -> int:
    """A safetensors file with U8 tensors of the given byte sizes (data zero); returns the file size."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, n in tensors.items():
        header[name] = {"dtype": "U8", "shape": [n], "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + off)
    return 8 + len(raw) + off


def make_checkpoint(d: Path, shards: int = 3, config: dict[str, Any] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {f"layers.{i}.{k}.weight": 4096 + 512 * k for k in range(4)}
        write_safetensors(d / name, tensors)
        weight_map.update({t: name for t in tensors})
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (d / "config.json").write_text(json.dumps(config or {"architectures": ["LlamaForCausalLM"]}))
    return d


def checkpoint_check(path: Path) -> Any:
    return check_checkpoint(target_of(["vllm", "serve", str(path)]), scan_checkpoint(path))


def test_a_complete_sharded_checkpoint_is_ok(tmp_path: Path):
    c = checkpoint_check(make_checkpoint(tmp_path / "m"))
    assert c.status == OK and "3 weight files" in c.evidence, c


def test_a_truncated_safetensors_shard_fails_naming_the_file_and_both_sizes(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    shard = d / "model-00002-of-00003.safetensors"
    full = shard.stat().st_size
    with open(shard, "r+b") as f:
        f.truncate(full - 1000)
    c = checkpoint_check(d)
    assert c.status == FAIL and c.category == "corrupt_weights"
    assert shard.name in c.evidence and str(full - 1000) in c.evidence and str(full) in c.evidence, c.evidence
    assert "truncated" in c.evidence and "re-download" in (c.hint or "")


def test_a_shard_missing_from_disk_but_listed_in_the_index_fails(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    (d / "model-00003-of-00003.safetensors").unlink()
    c = checkpoint_check(d)
    assert c.status == FAIL and "model-00003-of-00003.safetensors: listed in" in c.evidence and "missing" in c.evidence


def test_a_tensor_the_index_maps_to_a_shard_without_it_fails(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    index = json.loads((d / "model.safetensors.index.json").read_text())
    index["weight_map"]["lm_head.weight"] = "model-00001-of-00003.safetensors"
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    c = checkpoint_check(d)
    assert c.status == FAIL and "lm_head.weight" in c.evidence


def test_a_git_lfs_pointer_instead_of_weights_fails_with_git_lfs_pull(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    (d / "model-00001-of-00003.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 4955472224\n")
    c = checkpoint_check(d)
    assert c.status == FAIL and "Git LFS pointer" in c.evidence and "5.0 GB" in c.evidence
    assert "git lfs pull" in (c.hint or "")


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


# -- GGUF -------------------------------------------------------------------------------------------------
def test_gguf_type_table_matches_gguf_py():
    gguf = pytest.importorskip("gguf") if not IN_CI else __import__("gguf")
    assert {int(k): v for k, v in gguf.GGML_QUANT_SIZES.items()} == GGML_BLOCK


@pytest.mark.parametrize("alignment", [32, 64])
def test_gguf_layout_agrees_with_llama_cpps_own_reader_and_writer(tmp_path: Path, alignment: int):
    """Files written by gguf-py (llama.cpp's Python package), odd tensor sizes so that padding matters."""
    try:
        import gguf
        import numpy as np
    except ImportError as e:
        need("gguf (test extra)", str(e))
    path = tmp_path / "t.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment != 32:
        w.add_custom_alignment(alignment)
    w.add_array("tokenizer.ggml.tokens", ["a", "bb", "ccc"] * 100)
    w.add_tensor("a", np.ones((3, 5), dtype=np.float32))
    w.add_tensor("b", np.ones((7,), dtype=np.float16))
    w.add_tensor("c", np.ones((2, 3, 11), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    layout = read_layout(path)
    reader = gguf.GGUFReader(str(path))
    assert layout.alignment == alignment and layout.tensors == 3
    assert layout.data_start == reader.data_offset
    assert layout.required_size == max(t.data_offset + t.n_bytes for t in reader.tensors)
    assert scan_checkpoint(path).problems == []
    with open(path, "r+b") as f:
        f.truncate(layout.required_size - 1)
    assert "truncated" in scan_checkpoint(path).problems[0]


@pytest.fixture(scope="session")
def llama() -> dict[str, str]:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"), "--print-paths"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        need("llama-server and SmolLM2", f"{p.stderr.strip()[-200:]}; run: python scripts/setup_llama_server.py")
    return dict(json.loads(p.stdout))


def truncated_copy(src: str, dst: Path, size: int) -> Path:
    with open(src, "rb") as s, open(dst, "wb") as d:
        d.write(s.read(size))
    return dst


def test_the_real_smollm2_gguf_is_complete_and_its_truncated_copies_fail(llama: dict[str, str], tmp_path: Path):
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


def test_a_missing_model_path_is_model_not_found(tmp_path: Path):
    t = target_of(["llama-server", "-m", str(tmp_path / "absent.gguf")])
    c = check_checkpoint(t, None)
    assert c.status == FAIL and c.category == "model_not_found"


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
def test_a_busy_port_fails_naming_who_holds_it(llama: dict[str, str]):
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


def test_a_stale_llama_server_on_the_same_model(llama: dict[str, str], tmp_path: Path):
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
def test_up_on_a_truncated_gguf_fails_in_preflight_and_starts_no_server(llama: dict[str, str], tmp_path: Path):
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


# -- GPUs, through recorded NVML snapshots -----------------------------------------------------------------
def _snapshot(foreign_pid: int) -> NvmlSnapshot:
    """The 8-GPU fixture before launch: the server's own processes removed, the stale one on GPU 0 kept."""
    data = json.loads((FIXTURES / "nvml_8gpu_stale_process.json").read_text())
    for d in data["devices"]:
        ours = sum(p["used_gpu_memory"] for p in d["processes"] if p["pid"] == "SERVER")
        d["memory_used"] -= ours
        d["processes"] = [{**p, "pid": foreign_pid} for p in d["processes"] if p["pid"] == "FOREIGN"]
    return NvmlSnapshot(data)


@pytest.fixture
def foreign() -> Any:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--api-key",
                          "sk-abcdefghijklmnopqrstu"])
    yield p
    p.kill()
    p.wait()


def gpu_check(argv: list[str], snap: NvmlSnapshot, env: dict[str, str] | None = None) -> Any:
    return check_gpus(target_of(argv, env=env or {}), read_gpus(snap))


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


def test_a_pid_this_container_cannot_see_is_said_to_be_such():
    invisible = 4_194_000  # above any pid_max in use here
    c = gpu_check(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "8"], _snapshot(invisible))
    assert c.status == FAIL and f"PID {invisible} (not visible from here" in c.evidence
    assert "where it runs" in (c.hint or "")


def test_tp_larger_than_the_visible_gpus_is_a_bad_argument(foreign: Any):
    c = gpu_check(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "4"],
                  _snapshot(foreign.pid), {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert c.status == FAIL and c.category == "bad_argument"


def test_no_gpu_is_one_ok_line_never_a_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("FIRSTLIGHT_NVML_SNAPSHOT", raising=False)
    c = check_gpus(target_of(["llama-server", "-m", "x.gguf"]), "unavailable: NVML: no driver")
    assert c.status == OK and c.evidence.startswith("skipped")


def test_the_cli_reads_a_snapshot_and_fails_sglang_on_the_stale_gpu(foreign: Any, tmp_path: Path):
    snap = tmp_path / "nvml.json"
    snap.write_text(json.dumps({"devices": _snapshot(foreign.pid).devices}))
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", "python", "-m", "sglang.launch_server",
                       "--model-path", str(make_checkpoint(tmp_path / "m")), "--tp", "8", "--port",
                       str(free_port()), env={"FIRSTLIGHT_NVML_SNAPSHOT": str(snap)})
    assert r.rc == 1
    assert _checks(r)["gpus"]["status"] == "fail"


def test_systemd_unit_from_cgroup_files():
    assert unit_from_cgroup("0::/system.slice/sglang-k2.service\n") == "sglang-k2.service"
    assert unit_from_cgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/ddtree.service\n") \
        == "ddtree.service"
    assert unit_from_cgroup("12:pids:/x\n1:name=systemd:/system.slice/vllm.service\n") == "vllm.service"
    assert unit_from_cgroup("0::/user.slice/user-0.slice/session-3.scope\n") is None
    assert unit_from_cgroup("0::/\n") is None
    me = proc_info(os.getpid())
    # the kernel's name for it (xdist may retitle a worker "[pytest-xdist running] ...": not "python")
    assert me.visible and me.pid == os.getpid() and me.name == Path(f"/proc/{os.getpid()}/comm").read_text().strip()


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
    from firstlight.sim.server import make_weights

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


def test_a_check_that_cannot_run_is_a_warning_not_a_crash(tmp_path: Path):
    from firstlight.preflight import _guarded

    def broken() -> Any:
        raise PermissionError(13, "Permission denied", str(tmp_path / "x.safetensors"))

    c = _guarded("checkpoint", "corrupt_weights", broken)
    assert c.status == WARN and "PermissionError" in c.evidence and "x.safetensors" in c.evidence


# -- reading the command --------------------------------------------------------------------------------
def test_the_command_reader_takes_env_prefix_tp_flags_and_ports(tmp_path: Path):
    t = target_of(["env", "CUDA_VISIBLE_DEVICES=2,3", "python", "-m", "sglang.launch_server", "--model-path",
                   str(tmp_path), "--tp-size", "2", "--port", "30001"], env={"PATH": os.environ["PATH"]})
    assert t.engine == "sglang" and t.visible_devices == ["2", "3"] and t.tp == 2 and t.port == 30001
    assert t.model_path == tmp_path and t.interpreter and t.gpu_util is None
    t = target_of(["vllm", "serve", "org/absent-model", "--tensor-parallel-size=4"], env={})
    assert t.engine == "vllm" and t.tp == 4 and t.gpu_util == 0.9 and t.port == 8000 and t.model_path is None
    t = target_of(["llama-server", "-m", "x.gguf"], env={})
    assert t.engine == "llamacpp" and t.port == 8080 and t.tp == 1 and t.visible_devices is None


def test_console_script_interpreters_from_shebangs(tmp_path: Path):
    from firstlight.preflight.target import shebang_interpreter

    plain = tmp_path / "vllm"
    plain.write_text("#!/opt/venv/bin/python3.12\nfrom vllm.scripts import main\n")
    # pip's trampoline for interpreter paths too long (or with spaces) for a #! line
    long = tmp_path / "sglang"
    long.write_text("#!/bin/sh\n'''exec' \"/very/long path/venv/bin/python\" \"$0\" \"$@\"\n' '''\nimport sys\n")
    native = tmp_path / "llama-server"
    native.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(100))
    assert shebang_interpreter(plain) == "/opt/venv/bin/python3.12"
    assert shebang_interpreter(native) is None
    assert shebang_interpreter(long) == "/very/long path/venv/bin/python"


# -- page cache ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("syscall", ["cachestat", "mincore"])
def test_page_cache_residency_follows_the_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syscall: str):
    from firstlight.preflight import pagecache

    if syscall == "mincore":
        monkeypatch.setattr(pagecache, "_cachestat_works", False)
    elif pagecache._cachestat(0, 0, 0) is None and pagecache._cachestat_works is False:
        need("cachestat(2)", "this kernel lacks it (Linux < 6.5)")
    path = tmp_path / "shard.bin"
    size = 8 << 20
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
    with open(path, "rb") as f:
        f.read()  # resident now
    resident = pagecache.cached_bytes(path)
    assert resident is not None and resident >= size * 0.9
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, size, os.POSIX_FADV_DONTNEED)  # clean pages: dropped from the cache
    finally:
        os.close(fd)
    dropped = pagecache.cached_bytes(path)
    assert dropped is not None and dropped <= size * 0.1
    sample = pagecache.sample_read_rate([path])
    assert sample is not None and sample.bytes > 0 and sample.path == path
