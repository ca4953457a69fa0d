"""Helpers shared by tests/e2e/hostile/test_preflight.py, tests/e2e/preflight/test_preflight.py,
tests/unit/preflight/test_checkpoint.py, tests/unit/preflight/test_preflight.py."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from firstlight.preflight.checkpoint import check_checkpoint, scan_checkpoint
from firstlight.preflight.gpus import check_gpus, read_gpus
from firstlight.preflight.target import read_target as target_of
from firstlight.samplers.gpu import NvmlSnapshot
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import REPO

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


@pytest.fixture(scope="session")
def llama() -> dict[str, str]:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"), "--print-paths"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        need("llama-server and SmolLM2", f"{p.stderr.strip()[-200:]}; run: python scripts/setup_llama_server.py")
    return dict(json.loads(p.stdout))


# -- GPUs, through recorded NVML snapshots -----------------------------------------------------------------
def _snapshot(foreign_pid: int) -> NvmlSnapshot:
    """The 8-GPU fixture before launch: the server's own processes removed, the stale one on GPU 0 kept."""
    data = json.loads((FIXTURES / "nvml_8gpu_stale_process.json").read_text())
    for d in data["devices"]:
        ours = sum(p["used_gpu_memory"] for p in d["processes"] if p["pid"] == "SERVER")
        d["memory_used"] -= ours
        d["processes"] = [{**p, "pid": foreign_pid} for p in d["processes"] if p["pid"] == "FOREIGN"]
    return NvmlSnapshot(data)


def gpu_check(argv: list[str], snap: NvmlSnapshot, env: dict[str, str] | None = None) -> Any:
    return check_gpus(target_of(argv, env=env or {}), read_gpus(snap))
