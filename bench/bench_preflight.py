"""Preflight of a 300 GB checkpoint in 64 shards, reading only headers. Run by hand:

    .venv/bin/python bench/bench_preflight.py [--runs 9] [--tensors 1000]

Builds (once, in a temporary directory) 64 sparse safetensors shards of 4.69 GB each (300 GB apparent, no
data written) with real headers of --tensors tensors each (MoE-style names, as a large checkpoint has),
a model.safetensors.index.json mapping every tensor, and a compressed-tensors config.json. Then runs the
whole preflight (every check; --no-disk-sample) --runs times in-process and prints the median and max:

- `vllm serve DIR` (no Python of the server found here: no subprocess), and
- `python -m sglang.launch_server --model-path DIR --tp 8` with this interpreter (adds one subprocess in
  the server's Python for library versions and pip, run concurrently with the header reads),

and the checkpoint scan alone; wall and CPU time (of this process: the subprocess's is not counted). The
files are sparse, so the page cache holds no data and residency is measured over 300 GB of holes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.preflight import PreflightOptions, read_target, run_preflight  # noqa: E402
from firstlight.preflight.checkpoint import scan_checkpoint  # noqa: E402
from firstlight.sim.fixtures import free_port  # noqa: E402

TOTAL = 300 * 10**9
SHARDS = 64


def build(d: Path, tensors: int) -> None:
    shard_size = TOTAL // SHARDS
    weight_map = {}
    for s in range(SHARDS):
        name = f"model-{s + 1:05d}-of-{SHARDS:05d}.safetensors"
        per = shard_size // (tensors + 1) // 4 * 4  # the header takes a little; whole I32 elements
        header: dict[str, object] = {"__metadata__": {"format": "pt"}}
        for t in range(tensors):
            key = f"model.layers.{s}.mlp.experts.{t // 3}.{('gate', 'up', 'down')[t % 3]}_proj.weight_packed"
            header[key] = {"dtype": "I32", "shape": [per // 4], "data_offsets": [t * per, (t + 1) * per]}
            weight_map[key] = name
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        with open(d / name, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            f.truncate(8 + len(raw) + tensors * per)
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": TOTAL},
                                                                "weight_map": weight_map}))
    (d / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "strategy": "group"}}}}}))


def timed(fn: Callable[[], object], runs: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds of this process) per run: on a shared machine the CPU time says what the
    work costs, the wall time what a user waits."""
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--tensors", type=int, default=1000, help="tensors per shard")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="bench-preflight-"))
    try:
        build(d, args.tensors)
        scan = scan_checkpoint(d)
        assert not scan.problems, scan.problems[:3]
        print(f"checkpoint: {len(scan.files)} shards, {scan.total_bytes / 1e9:.1f} GB apparent, "
              f"{args.tensors * SHARDS} tensors")
        port = str(free_port())
        opts = PreflightOptions(disk_sample=False)
        cases = {
            "scan_checkpoint alone": lambda: scan_checkpoint(d),
            "preflight: vllm serve DIR": lambda: run_preflight(read_target(["vllm", "serve", str(d), "--port", port]),
                                                               opts),
            "preflight: python -m sglang.launch_server --tp 8": lambda: run_preflight(read_target(
                [sys.executable, "-m", "sglang.launch_server", "--model-path", str(d), "--tp", "8", "--port", port]),
                opts),
        }
        for name, fn in cases.items():
            fn()  # warm: imports, the first open of each file
            wall, cpu = timed(fn, args.runs)
            print(f"{name:<48} wall median {statistics.median(wall):.3f}s max {max(wall):.3f}s, CPU median "
                  f"{statistics.median(cpu):.3f}s ({args.runs} runs)")
        report = run_preflight(read_target(["vllm", "serve", str(d), "--port", port]), opts)
        for c in report.checks:
            print(f"  {c.name:<13} {c.status:<4} {c.evidence[:150]}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
