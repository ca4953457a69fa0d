#!/usr/bin/env python3
"""Run preflight's GPU checks on a machine with NVIDIA GPUs (the test suite uses recorded NVML snapshots).

    python scripts/check_gpu_preflight.py [--gpu 0] [--hold-fraction 0.2]

With real NVML (nvidia-ml-py and the driver) it starts a child process that holds --hold-fraction of GPU
--gpu's memory through the CUDA driver API (libcuda via ctypes: no PyTorch needed), then checks that:

1. vLLM's rule fails: `vllm serve` with the default --gpu-memory-utilization 0.9 on that GPU is `fail`
   (gpu_occupied) and names the holder's PID, command line and fix;
2. a utilization that fits turns it into `warn`, still naming the holder;
3. with two GPUs or more, SGLang's rule fails for TP 2 over the held GPU and a free one ("memory capacity
   is unbalanced");
4. `firstlight preflight --json -- vllm serve DIR` (the real CLI, real NVML) exits 1 with the gpus check
   failed, and once the holder is gone the gpus check is no longer `fail` because of it.

Exit 0 when every check holds, 1 otherwise, 2 when there is no GPU to check.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from firstlight.preflight.gpus import check_gpus, read_gpus
from firstlight.preflight.target import read_target
from firstlight.sim.fixtures import make_weights
from firstlight.timeline import GpuSample

HOLD = """
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
for rc in (cuda.cuInit(0), cuda.cuDeviceGet(ctypes.byref(dev), 0), cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev),
           cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(int(sys.argv[1])))):
    if rc != 0:
        print(f"CUDA error {rc}", flush=True)
        sys.exit(1)
print("allocated", flush=True)
time.sleep(300)
"""


def report(name: str, ok: bool, detail: str) -> bool:
    print(f"[{'ok' if ok else 'FAIL'}] {name}: {detail}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU to hold memory on")
    ap.add_argument("--hold-fraction", type=float, default=0.2)
    args = ap.parse_args()
    reading = read_gpus()
    if not isinstance(reading, GpuSample):
        print(f"no GPU to check: {reading}")
        return 2
    for d in reading.devices:
        print(f"GPU {d.index} {d.name}: {(d.memory_total - d.memory_used) / 2**30:.1f} GiB free of "
              f"{d.memory_total / 2**30:.1f}")
    gpu = reading.devices[args.gpu]
    size = int(gpu.memory_total * args.hold_fraction)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(args.gpu), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(size), "--api-key", "sk-notarealkey1234567890"],
                              stdout=subprocess.PIPE, text=True, env=env)
    ok = True
    model = Path(tempfile.mkdtemp()) / "model"
    make_weights(model, 1 << 20, shards=2)
    cvd = {"CUDA_VISIBLE_DEVICES": str(args.gpu)}
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline().strip()
        if line != "allocated":
            print(f"the holder could not allocate {size >> 20} MiB: {line or 'no output'}")
            return 1
        held = read_gpus()
        assert isinstance(held, GpuSample)
        free = held.devices[args.gpu].memory_total - held.devices[args.gpu].memory_used
        c = check_gpus(read_target(["vllm", "serve", str(model)], env=cvd), held)
        ok &= report("vLLM 0.9 rule", c.status == "fail" and f"PID {holder.pid}" in c.evidence
                     and "sk-notarealkey" not in c.evidence, f"{c.status}: {c.evidence} | fix: {c.hint}")
        util = round(free / held.devices[args.gpu].memory_total - 0.05, 2)
        c = check_gpus(read_target(["vllm", "serve", str(model), "--gpu-memory-utilization", str(util)], env=cvd),
                       held)
        ok &= report(f"vLLM at {util} fits", c.status == "warn" and f"PID {holder.pid}" in c.evidence,
                     f"{c.status}: {c.evidence}")
        others = [d.index for d in held.devices if d.index != args.gpu]
        if others:
            pair = {"CUDA_VISIBLE_DEVICES": f"{args.gpu},{others[0]}"}
            c = check_gpus(read_target(["python", "-m", "sglang.launch_server", "--model-path", str(model), "--tp",
                                        "2"], env=pair), held)
            ok &= report("SGLang TP 2 unbalanced", c.status == "fail" and "unbalanced" in c.evidence,
                         f"{c.status}: {c.evidence}")
        else:
            print("[skip] SGLang TP 2: one GPU only")
        cli = [sys.executable, "-m", "firstlight", "preflight", "--json", "--no-disk-sample", "--", "vllm", "serve",
               str(model)]
        p = subprocess.run(cli, capture_output=True, text=True, timeout=120, env={**os.environ, **cvd})
        checks = {c["name"]: c for c in json.loads(p.stdout.splitlines()[-1])["checks"]}
        ok &= report("CLI exit 1, gpus fail", p.returncode == 1 and checks["gpus"]["status"] == "fail",
                     f"rc {p.returncode}: {checks['gpus']['evidence']}")
    finally:
        holder.kill()
        holder.wait()
    after = read_gpus()
    if isinstance(after, GpuSample):
        c = check_gpus(read_target(["vllm", "serve", str(model)], env=cvd), after)
        ok &= report("holder gone", f"PID {holder.pid}" not in c.evidence, f"{c.status}: {c.evidence}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
