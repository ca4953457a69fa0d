#!/usr/bin/env python3
"""Check firstlight's GPU sampler on a machine with NVIDIA GPUs (the test suite uses a recorded snapshot).

    python scripts/check_gpu_sampler.py [--allocate-mib 2048]

It samples every GPU through firstlight.samplers.gpu.GpuSampler (real NVML), compares memory used per device
with `nvidia-smi --query-gpu`, and, when PyTorch with CUDA is importable, allocates --allocate-mib on GPU 0
in a child process and checks that the sampler (a) sees the device's memory grow and (b) lists the child's
PID among the processes holding GPU 0 (what firstlight reports as "held by a process outside the server's
tree"). Exit 0 when every check holds, 1 otherwise, 2 when there is no GPU to check.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from firstlight.samplers.gpu import GpuSampler
from firstlight.timeline import GpuSample

HOLD = """
import sys, time, torch
x = torch.empty(int(sys.argv[1]) << 20, dtype=torch.uint8, device="cuda:0")
print("allocated", flush=True)
time.sleep(60)
"""


def sample() -> GpuSample | None:
    out = GpuSampler().sample()
    if not out or not isinstance(out[0], GpuSample):
        print(f"no GPU sample: {out[0] if out else 'nothing'}")
        return None
    return out[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allocate-mib", type=int, default=2048)
    args = ap.parse_args()
    ok = True
    g = sample()
    if g is None:
        return 2
    for d in g.devices:
        print(f"GPU {d.index} {d.name}: {d.memory_used / 2**20:.0f} / {d.memory_total / 2**20:.0f} MiB, "
              f"util {d.utilization}%")
    for p in g.processes:
        print(f"  GPU {p.gpu}: pid {p.pid} {p.name} {None if p.memory_used is None else p.memory_used >> 20} MiB")
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout.split("\n")
        for line in filter(None, smi):
            idx, used = (int(x) for x in line.split(","))
            ours = g.devices[idx].memory_used / 2**20
            same = abs(ours - used) <= max(64, 0.02 * used)
            ok &= same
            print(f"GPU {idx}: nvidia-smi {used} MiB, sampler {ours:.0f} MiB: {'ok' if same else 'MISMATCH'}")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch not importable: allocation check skipped")
        return 0 if ok else 1
    before = g.devices[0].memory_used
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(args.allocate_mib)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "allocated":
            print("the allocating child failed")
            return 1
        deadline = time.monotonic() + 10
        grew = seen = False
        while time.monotonic() < deadline and not (grew and seen):
            g2 = sample()
            if g2 is None:
                return 1
            grew = g2.devices[0].memory_used - before >= (args.allocate_mib << 20) * 0.9
            seen = any(p.gpu == 0 and p.pid == holder.pid for p in g2.processes)
            time.sleep(0.2)
        print(f"memory grew by {args.allocate_mib} MiB: {'ok' if grew else 'NO'}; "
              f"holder pid {holder.pid} listed on GPU 0: {'ok' if seen else 'NO'}")
        ok &= grew and seen
    finally:
        holder.kill()
        holder.wait()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
