"""Model weights on disk: the total bytes to read, for the fraction-read progress and its ETA (the model a
command names: ``firstlight.engines.read_command``)."""

from __future__ import annotations

import os
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth")


def resolve_model_dir(model: str) -> Path | None:
    """A local path, or a Hugging Face id found in the local hub cache; None if neither exists."""
    p = Path(model).expanduser()
    if p.exists():
        return p
    if "/" in model and not model.startswith(("/", ".")):
        hub = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", "~/.cache/huggingface"))
                   .expanduser() / "hub")
        snapshots = hub / ("models--" + model.replace("/", "--")) / "snapshots"
        if snapshots.is_dir():
            candidates = sorted(snapshots.iterdir(), key=lambda d: d.stat().st_mtime, reverse=True)
            if candidates:
                return candidates[0]
    return None


def weight_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = [f for f in path.rglob("*") if f.suffix in WEIGHT_SUFFIXES and f.is_file()]
    # A checkpoint in safetensors often ships .bin duplicates that the loader skips: count one format.
    safetensors = [f for f in files if f.suffix == ".safetensors"]
    return safetensors or files


def total_weight_bytes(path: Path) -> tuple[int, int]:
    """(bytes, files) of the weight files under ``path`` (symlinks into a hub cache followed)."""
    files = weight_files(path)
    return sum(f.stat().st_size for f in files), len(files)
