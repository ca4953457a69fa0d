"""A hub model's folder in the Hugging Face cache, while the server downloads it: the bytes of its blobs and of
those still arriving (``blobs/*.incomplete``: huggingface_hub writes each file there and renames it when it is
whole). Only observes: a :class:`~firstlight.timeline.HubDownload` when the bytes changed, nothing while they
stand still (the judge reads a standing folder as no progress)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from firstlight.samplers.base import Sampler
from firstlight.timeline import HubDownload, Observation


def hub_cache(env: Mapping[str, str]) -> Path:
    """The hub cache the server uses: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ~/.cache/huggingface/hub."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    home = env.get("HF_HOME") or (str(Path(env["XDG_CACHE_HOME"]) / "huggingface") if env.get("XDG_CACHE_HOME")
                                  else "~/.cache/huggingface")
    return Path(home).expanduser() / "hub"


def hub_id(model: str | None) -> str | None:
    """``ORG/NAME`` when ``model`` reads as a hub id rather than a path on this machine; else None."""
    if not model or model.startswith(("/", ".", "~")) or model.count("/") != 1 or Path(model).exists():
        return None
    org, name = model.split("/")
    return model if org and name and " " not in model else None


def model_folder(cache: Path, repo: str) -> Path:
    """The repo's folder in the hub cache: ``models--ORG--NAME``."""
    return cache / ("models--" + repo.replace("/", "--"))


class HubCacheSampler(Sampler):
    """The model's hub-cache folder, every ``interval`` seconds: an observation whenever its bytes changed."""

    name = "hub_cache"

    def __init__(self, folder: Path, interval: float, clock: Callable[[], float] = time.time) -> None:
        super().__init__(interval)
        self.clock = clock
        self.folder = folder
        self._last: tuple[int, int, int] | None = None

    def sample(self) -> list[Observation]:
        blobs = self.folder / "blobs"
        total = incomplete_bytes = incomplete = 0
        largest, largest_size = "", -1
        try:
            entries = list(os.scandir(blobs))
        except FileNotFoundError:  # nothing fetched yet (or nothing to fetch: a local model)
            entries = []
        for e in entries:
            try:
                size = e.stat(follow_symlinks=False).st_size
            except FileNotFoundError:  # renamed whole between the listing and the stat
                continue
            total += size
            if e.name.endswith(".incomplete"):
                incomplete += 1
                incomplete_bytes += size
                if size > largest_size:
                    largest, largest_size = e.path, size
        now = (total, incomplete_bytes, incomplete)
        self.moved = now != self._last  # the first sample is always said: what was cached before the start
        if not self.moved:
            return []
        self._last = now
        return [HubDownload(self.clock(), str(self.folder), total, incomplete_bytes, incomplete, largest)]
