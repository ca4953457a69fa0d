"""Preflight against real files, real environments, real sockets and a real llama-server.

Checkpoints: a truncated safetensors shard, a shard missing from the index, a Git LFS pointer, a broken
Hugging Face cache symlink, the real SmolLM2 GGUF (whole and truncated), GGUFs written by llama.cpp's own
gguf-py. Environments: venvs made with ``python -m venv --without-pip`` holding compressed-tensors 0.8.1 or
0.10.0 (installed from PyPI with --no-deps: only their metadata is read). GPUs through recorded NVML
snapshots (scripts/check_gpu_preflight.py runs the same checks on a real GPU machine).

The in-process tests of this subject; the others: ``tests/e2e/preflight/test_preflight.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from firstlight.preflight import FAIL, OK, WARN
from firstlight.preflight.checkpoint import check_checkpoint, scan_checkpoint
from firstlight.preflight.gguf import GGML_BLOCK, read_layout
from firstlight.preflight.gpus import check_gpus
from firstlight.preflight.procinfo import proc_info, unit_from_cgroup
from firstlight.preflight.target import read_target as target_of
from tests.support.preflight import (
    IN_CI,
    _snapshot,
    checkpoint_check,
    gpu_check,
    llama,  # noqa: F401 (a fixture)
    make_checkpoint,
    need,
)


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


def test_a_missing_model_path_is_model_not_found(tmp_path: Path):
    t = target_of(["llama-server", "-m", str(tmp_path / "absent.gguf")])
    c = check_checkpoint(t, None)
    assert c.status == FAIL and c.category == "model_not_found"


def test_a_pid_this_container_cannot_see_is_said_to_be_such():
    invisible = 4_194_000  # above any pid_max in use here
    c = gpu_check(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "8"], _snapshot(invisible))
    assert c.status == FAIL and f"PID {invisible} (not visible from here" in c.evidence
    assert "where it runs" in (c.hint or "")


def test_no_gpu_is_one_ok_line_never_a_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("FIRSTLIGHT_NVML_SNAPSHOT", raising=False)
    c = check_gpus(target_of(["llama-server", "-m", "x.gguf"]), "unavailable: NVML: no driver")
    assert c.status == OK and c.evidence.startswith("skipped")


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
