"""Memory and disk: will the weights fit, and how long will reading them take?

The weights' total size against free RAM and the free memory of the GPUs the server will use; how much of
the weights already sits in the page cache (a warm restart reads from memory); and, unless turned off, a
bounded read-rate sample of an uncached part of a shard, giving the expected read time of the rest.
"""

from __future__ import annotations

import psutil

from firstlight.formats import size as human_bytes
from firstlight.preflight.base import OK, WARN, Check
from firstlight.preflight.checkpoint import Scan
from firstlight.preflight.gpus import selected_devices
from firstlight.preflight.pagecache import cached_bytes, sample_read_rate
from firstlight.preflight.target import Target
from firstlight.timeline import GpuSample

NAME = "memory_disk"
CATEGORY = "oom"


def check_resources(target: Target, scan: Scan | None, gpus: GpuSample | str, disk_sample: bool = True) -> Check:
    if scan is None or not scan.files:
        return Check(NAME, OK, CATEGORY, "skipped: no weight files to size")
    total = scan.total_bytes
    ram = psutil.virtual_memory().available
    files = f"{len(scan.files)} file{'s' if len(scan.files) > 1 else ''}"
    parts = [f"weights {human_bytes(total)} in {files}", f"RAM {human_bytes(ram)} available"]
    status, hint = OK, None
    gpu_free: int | None = None
    if isinstance(gpus, GpuSample):
        used, problem = selected_devices(target, gpus.devices)
        if problem is None and used:
            gpu_free = sum(d.memory_total - d.memory_used for d in used)
            parts.append(f"GPU {human_bytes(gpu_free)} free on {len(used)} GPUs")
    if gpu_free is not None and total > gpu_free:
        status, hint = WARN, "use more GPUs (a larger TP), a smaller quantization, or free GPU memory"
        parts.append("the weights alone exceed the GPUs' free memory")
    elif gpu_free is None and total > ram:
        status, hint = WARN, "free RAM or expect the load to page from disk throughout"
        parts.append("the weights exceed the available RAM")
    facts: dict[str, float | int | None] = {"weights_bytes": total, "uncached_bytes": total, "resident": None,
                                            "read_rate": None}
    sizes = [(f, f.stat().st_size) for f in scan.files]
    cached = [cached_bytes(f) for f, _ in sizes]
    known = [(c, s) for c, (_, s) in zip(cached, sizes, strict=True) if c is not None]
    uncached = total
    if known:
        in_cache = sum(c for c, _ in known)
        uncached = max(sum(s for _, s in known) - in_cache, 0)
        share = in_cache / max(sum(s for _, s in known), 1)
        facts.update(uncached_bytes=uncached, resident=round(share, 4))
        parts.append(f"page cache holds {share:.0%} ({human_bytes(in_cache)})")
    else:
        parts.append("page-cache residency unknown")
    if disk_sample and uncached > 0:
        sample = sample_read_rate([f for f, _ in sizes])
        if sample is None:
            parts.append("read-rate sample: no uncached data to read (holes or cached)")
        elif sample.bytes and sample.rate > 0:
            facts["read_rate"] = round(sample.rate, 1)
            parts.append(f"read rate {sample.rate / 1e6:.0f} MB/s ({human_bytes(sample.bytes)} of "
                         f"{sample.path.name} at offset {sample.offset} in {sample.seconds:.2f}s): the uncached "
                         f"{human_bytes(uncached)} need about {uncached / sample.rate:.1f}s")
    return Check(NAME, status, CATEGORY, "; ".join(parts), hint, facts={"weights": facts})
