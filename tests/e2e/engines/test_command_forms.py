"""The classic vLLM launch command, ``env X=Y python -m vllm.entrypoints.openai.api_server --model DIR``, run for
real through ``up`` and ``preflight``: both read the same checkpoint from it (the interpreter's ``-m`` is not the
model), so the live start has its weights fraction, ETA, residency at start and anatomy cut.

The server is the simulator in vLLM's dialect behind a package named ``vllm`` whose
``entrypoints/openai/api_server`` module starts it (``--model`` given as the simulator's ``--model-path``): the
real command form, a real process, port and weights, without vLLM's minutes of start."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]
SHIM = """import sys

from firstlight.sim.server import main

main(["--dialect", "vllm", *["--model-path" if a == "--model" else a for a in sys.argv[1:]]])
"""


def _vllm_shim(root: Path) -> Path:
    pkg = root / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (root / "vllm", root / "vllm" / "entrypoints", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(SHIM)
    return root


def _classic(shim: Path, weights: Path, port: int) -> list[str]:
    return ["env", f"PYTHONPATH={shim}", "VLLM_CPU_KVCACHE_SPACE=1", sys.executable, "-m",
            "vllm.entrypoints.openai.api_server", "--model", str(weights), "--port", str(port)]


def test_up_and_preflight_of_the_classic_vllm_command_read_the_same_weights(tmp_path: Path, weights: Path) -> None:
    port = free_port()
    command = _classic(_vllm_shim(tmp_path / "shim"), weights, port)
    pre = run_firstlight("preflight", "--json", "--", *command, timeout=120)
    assert pre.rc == 0, pre.stderr[-3000:]
    checks = {c["name"]: c for c in json.loads(pre.stdout.splitlines()[-1])["checks"]}
    assert checks["checkpoint"]["evidence"].startswith(f"{weights}: 4 weight files, 67.1 MB")
    assert checks["memory_disk"]["evidence"].startswith("weights 67.1 MB in 4 files")

    r = run_firstlight("up", "--json", "--stop-when-ready", "--no-history", *FAST, "--", *command, timeout=180)
    assert r.rc == 0, r.stderr[-3000:]
    s: dict[str, Any] = r.summary
    assert s["engine"] == "vllm" and s["url"] == f"http://127.0.0.1:{port}"
    assert f"weights: 67 MB in 4 files at {weights}" in r.stderr  # the live note names the same checkpoint
    assert not [n for n in s["notes"] if "not a local path" in n], s["notes"]
    progress = s["progress"]
    assert progress["weights_bytes"] == 64 << 20 and progress["weights_fraction"] == 1.0  # the fraction read
    assert progress["eta_weights_s"] is not None  # and its ETA
    cache = s["anatomy"]["cache"]  # what the anatomy's cuts are computed from
    assert cache["weights_bytes"] == 64 << 20 and cache["page_cache_resident"] is not None  # residency at start
