"""A sidecar's first start, watched in this process and then stopped as its stop signal would stop it (no signal
sent to the test's own process): for the tests that count what one start of a sidecar does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from firstlight.cli import sidecar
from firstlight.runner.outcome import Outcome
from firstlight.runner.rewatch import Rewatch
from tests.support.common import wait_for


def _answers_ready(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def one_start(monkeypatch: pytest.MonkeyPatch, readiness_port: int) -> Iterator[None]:
    """While the block runs the sidecar (``watch ... --serve-readiness 127.0.0.1:PORT``), its loop is stopped once
    its /readyz says ready: the sidecar serves on until stopped, and one start is enough."""
    loops: list[Rewatch] = []

    class Recorded(Rewatch):
        def run(self) -> Outcome:
            loops.append(self)
            return super().run()

    monkeypatch.setattr(sidecar, "Rewatch", Recorded)

    def stop_once_ready() -> None:
        try:
            wait_for(lambda: _answers_ready(f"http://127.0.0.1:{readiness_port}/readyz"), 60, "the sidecar's /readyz")
        finally:
            wait_for(lambda: loops, 5, "the sidecar's loop")
            loops[0].stop.set()

    stopper = threading.Thread(target=stop_once_ready, daemon=True)
    stopper.start()
    try:
        yield
    finally:
        stopper.join(5)
