"""The session is a composer, not a hub: once a run begins, its parts (the sources and their threads, the pump,
the feed into the judge, the expectations from the history) talk to each other, and nothing but what starts
runs (the API, the CLI, the restart loop) calls into runner/session.py. Counted on a live sidecar of the
simulator (``watch --pid --serve-readiness``: a URL followed from its first probe to READY and on) with a
profiler on every thread, as calls into session.py's functions from code outside it."""

from __future__ import annotations

import collections
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from click.testing import CliRunner

from firstlight.cli.app import cli
from firstlight.sim.fixtures import free_port
from tests.support import sidecar as sidecar_start
from tests.support.common import sim_cmd, started_sim

SESSION = str(Path("firstlight") / "runner" / "session.py")
# What may start a run: the CLI and the API (by way of the sidecar's restart loop)
STARTERS = ("firstlight/api.py", "firstlight/cli/", "firstlight/runner/rewatch.py", "firstlight/runner/restarts.py")
WATCH = ["--poll-min", "0.05", "--sample-interval", "0.2", "--plain"]


@pytest.fixture
def entries() -> Iterator[collections.Counter[tuple[str, str]]]:
    """(caller's file:function, session function) -> calls, on every thread, while the test runs."""
    seen: collections.Counter[tuple[str, str]] = collections.Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not frame.f_code.co_filename.endswith(SESSION):
            return
        caller = frame.f_back
        if caller is not None and not caller.f_code.co_filename.endswith(SESSION):
            where = caller.f_code.co_filename.rsplit("/firstlight/", 1)[-1]
            seen[(f"{where}:{caller.f_code.co_qualname}", frame.f_code.co_qualname)] += 1

    threading.setprofile(profile)  # type: ignore[arg-type]
    sys.setprofile(profile)  # type: ignore[arg-type]
    try:
        yield seen
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def test_a_sidecars_run_enters_the_session_only_from_what_starts_it(
        entries: collections.Counter[tuple[str, str]], weights: Path, tmp_path: Path, reap: list[int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    port, rport = free_port(), free_port()
    sim = started_sim(sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "1"), reap)
    with sidecar_start.one_start(monkeypatch, rport):
        r = CliRunner().invoke(cli, ["watch", f"http://127.0.0.1:{port}", "--pid", str(sim.pid), "--serve-readiness",
                                     f"127.0.0.1:{rport}", "--history", str(tmp_path / "h.db"), *WATCH])
    assert "ready" in r.output.lower(), r.output[-2000:]
    callers = {caller for caller, _ in entries}
    assert entries and all(c.startswith(tuple(s.removeprefix("firstlight/") for s in STARTERS)) for c in callers), \
        entries
    # one start: the session made, run, and its outcome read; far from the 124 calls over 10 paths of a hub
    assert sum(entries.values()) <= 4 and len(entries) <= 4, entries
