"""Helpers shared by tests/e2e/logreplay/test_live_vs_replay.py, tests/unit/logreplay/test_logreplay.py."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Labelled:
    path: Path
    engine: str
    outcome: str
    phase: tuple[str, ...]
    failure: tuple[str, ...]


def _index(folder: Path) -> list[Labelled]:
    index = folder / "INDEX.tsv"
    if not index.is_file():
        return []
    with index.open(newline="", encoding="utf-8") as fh:
        return [Labelled(folder / r["file"], r["engine"], r["outcome"], tuple(r["phase"].split("|")),
                         tuple(r["failure"].split("|"))) for r in csv.DictReader(fh, delimiter="\t")]
