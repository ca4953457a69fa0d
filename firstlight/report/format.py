"""Plain-text renderings shared by the reporters."""

from __future__ import annotations

from firstlight.assessment import Assessment, Progress
from firstlight.formats import duration, size


def progress_parts(p: Progress) -> list[str]:
    parts = []
    if p.download_bytes is not None or p.download_fraction is not None:
        d = "download"
        if p.download_fraction is not None:
            d += f" {p.download_fraction * 100:.0f}%"
        if p.download_bytes is not None:
            d += f" {size(p.download_bytes)}"
        if p.download_rate:
            d += f" at {size(p.download_rate)}/s"
        parts.append(d)
    if p.weights_fraction is not None:
        w = f"weights {p.weights_fraction * 100:.0f}%"
        if p.weights_bytes and p.weights_source == "disk":
            w += f" of {size(p.weights_bytes)}"
        if p.shard is not None:
            w += f" (shard {p.shard[0]}/{p.shard[1]})"
        parts.append(w)
    if p.read_rate:
        parts.append(f"read {size(p.read_rate)}/s")
    if p.eta_weights_s is not None and (p.weights_fraction or 0) < 1:
        parts.append(f"weights ETA {duration(p.eta_weights_s)}")
    if p.eta_total_s is not None:
        parts.append(f"ready ETA {duration(p.eta_total_s)}")
    if p.cpu_cores is not None:
        parts.append(f"CPU {p.cpu_cores * 100:.0f}%")
    if p.rss_bytes:
        parts.append(f"RSS {size(p.rss_bytes)}")
    if p.gpu_memory_bytes is not None:
        g = f"GPU {size(p.gpu_memory_bytes)}"
        if p.gpu_util is not None:
            g += f" {p.gpu_util:.0f}%"
        parts.append(g)
    if p.since_last_log_s is not None:
        parts.append(f"log {duration(p.since_last_log_s)} ago")
    return parts


def status_line(a: Assessment) -> str:
    verdict = a.verdict
    if a.verdict == "starting":
        verdict = "engine says ready, confirming" if a.engine_ready else "progressing"
    head = f"{a.phase} | {duration(a.elapsed_s)} | {a.level.label}"
    return " | ".join([head, *progress_parts(a.progress), verdict])
