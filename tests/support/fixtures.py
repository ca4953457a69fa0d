"""The suite's shared fixtures (registered by tests/conftest.py): a private run history, fake weights, the
process groups a test started, the real startup logs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstlight.sim.fixtures import make_weights
from tests.support.common import SHARED, require


@pytest.fixture(autouse=True, scope="session")
def _private_history_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs of the suite never touch the user's own run history (this one covers module-scoped fixtures)."""
    old = os.environ.get("FIRSTLIGHT_HISTORY")
    os.environ["FIRSTLIGHT_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite3")
    yield
    if old is None:
        os.environ.pop("FIRSTLIGHT_HISTORY", None)
    else:
        os.environ["FIRSTLIGHT_HISTORY"] = old


@pytest.fixture(autouse=True)
def _private_history(_private_history_of_the_session: None, tmp_path_factory: pytest.TempPathFactory,
                     ) -> Iterator[None]:
    """Each test has a history of its own. Since the deployment key has no port (firstlight.history.key), two
    tests starting the same model used to share a baseline: a start 20% slower than another test's, on a busy
    machine, was judged a regression (CI: ``'regression' == 'ready'``)."""
    session = os.environ["FIRSTLIGHT_HISTORY"]
    os.environ["FIRSTLIGHT_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite3")
    yield
    os.environ["FIRSTLIGHT_HISTORY"] = session


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


@pytest.fixture
def shared_logs() -> Path:
    """The real startup logs in ../shared/logs (required under CI)."""
    require((SHARED / "logs" / "INDEX.tsv").is_file(), f"the real startup logs at {SHARED / 'logs'}")
    return SHARED / "logs"
