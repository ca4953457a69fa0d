"""Helpers shared by tests/e2e/hostile/test_signals.py, tests/e2e/runner/test_session.py."""

from __future__ import annotations

import os


def _full_pipe() -> tuple[int, int]:
    """A pipe with its buffer already full: the next write to it blocks until somebody reads."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    return r, w
