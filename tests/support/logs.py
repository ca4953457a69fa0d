"""A log file followed for a test: the follower started on a real file, what it delivered, stopped at the end."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from firstlight.samplers.logs import FileFollower
from firstlight.timeline import Observation


@contextlib.contextmanager
def following(path: Path, **kw: Any) -> Iterator[tuple[FileFollower, list[Observation]]]:
    """``FileFollower(path, **kw)`` started, with the list it delivers to; stopped when the block ends."""
    got: list[Observation] = []
    f = FileFollower(path, **kw)
    f.start(got.append)
    try:
        yield f, got
    finally:
        f.stop()
