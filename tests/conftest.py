"""Shared fixtures: free ports, fake weights, running the real CLI in a subprocess, and waiting on conditions
with deadlines (never sleeping to let things settle)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from firstlight.sim.server import make_weights

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell (CI's job, ``nohup ... &``) inherits SIGINT
    ignored, and so would every process the tests start: a Ctrl-C test's SIGINT then reaches nothing. A handler
    (not SIG_IGN) here is reset to the default in each child at exec, as in a terminal."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real-vLLM tests first (a stable sort: the rest keep their order): they take the longest (each vLLM
    start is minutes of torch.compile)."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("vllm") else 1)


VLLM_MODULE = "tests/test_vllm_server.py"


@pytest.hookimpl(optionalhook=True)  # pytest without xdist (-p no:xdist) must not reject it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist (scripts/test.sh runs 2 workers): every test is its own unit of work, except the
    real-vLLM module, which is one unit on one worker (its tests share module-scoped servers and must never run
    two vLLMs at once). Being the largest unit, it is handed out first, so it runs beside the rest of the suite
    instead of being its tail. (xdist's own ``loadgroup`` cannot do this under pytest 9: it renames node ids
    through an attribute that pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "load":  # an explicit --dist mode is the user's
        return None
    from xdist.scheduler import LoadScopeScheduling

    class VllmTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return VLLM_MODULE if nodeid.startswith(VLLM_MODULE + "::") else nodeid

    return VllmTogether(config, log)


def wait_for(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Poll ``cond`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]

    @property
    def summary(self) -> dict[str, Any]:
        events = self.events
        assert events, f"no JSON output; stderr:\n{self.stderr[-3000:]}"
        assert events[-1]["event"] == "summary", events[-1]
        return events[-1]


def firstlight_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "firstlight", *args]


def sim_cmd(scenario: str = "normal", port: int | None = None, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "firstlight.sim", "--scenario", scenario]
    if port is not None:
        cmd += ["--port", str(port)]
    return [*cmd, *extra]


def run_firstlight(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
                   preexec_fn: Callable[[], None] | None = None) -> Run:
    p = subprocess.run(firstlight_cmd(*args), capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
    return Run(p.returncode, p.stdout, p.stderr)


def children(pid: int) -> list[psutil.Process]:
    """The children of ``pid``; none once it is gone (a condition polled by wait_for must not raise)."""
    try:
        return psutil.Process(pid).children()
    except psutil.Error:
        return []


def pids_in_group(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                out.append(p.pid)
        except (OSError, psutil.Error):
            continue
    return out


@pytest.fixture(autouse=True, scope="session")
def _private_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs of the suite never touch the user's own run history."""
    old = os.environ.get("FIRSTLIGHT_HISTORY")
    os.environ["FIRSTLIGHT_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite3")
    yield
    if old is None:
        os.environ.pop("FIRSTLIGHT_HISTORY", None)
    else:
        os.environ["FIRSTLIGHT_HISTORY"] = old


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    make_weights(d, 64 << 20, shards=4)
    return d


@pytest.fixture
def reap() -> Iterator[list[int]]:
    """Process groups a test started: killed at the end whatever happened."""
    groups: list[int] = []
    yield groups
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass


IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1")


def require(present: bool, what: str) -> None:
    """A real part the test needs (a binary, ../shared/logs, a package). Under CI (``CI`` is true or 1) its
    absence fails the run; elsewhere the test is skipped with the reason."""
    if present:
        return
    if IN_CI:
        pytest.fail(f"CI: {what} is missing (the setup must provide it)", pytrace=False)
    pytest.skip(f"{what} is missing")


@pytest.fixture
def shared_logs() -> Path:
    """The real startup logs in ../shared/logs (required under CI)."""
    require((SHARED / "logs" / "INDEX.tsv").is_file(), f"the real startup logs at {SHARED / 'logs'}")
    return SHARED / "logs"
