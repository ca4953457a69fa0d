"""The suite's pytest hooks. The shared helpers are in tests/support/ (waiting on conditions, running the real CLI,
fault servers...), the shared fixtures in tests/support/fixtures.py, registered here.

Layout: tests/unit/ holds the in-process tests, laid out like the package (tests/unit/engines/test_profile.py for
firstlight/engines/profile.py); tests/e2e/ the tests that start processes, servers or engines. Each test gets the
marker of its folder (``unit`` or ``e2e``): ``pytest tests/unit`` or ``pytest -m unit`` is the fast lane."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.common import end_epoch

pytest_plugins = ["tests.support.fixtures"]

TESTS = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell (CI's job, ``nohup ... &``) inherits SIGINT
    ignored, and so would every process the tests start: a Ctrl-C test's SIGINT then reaches nothing. A handler
    (not SIG_IGN) here is reset to the default in each child at exec, as in a terminal."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # llama.cpp's worker threads spin at each barrier: with one per core on a 2-core machine beside another busy
    # worker (a vLLM start), one preempted thread stalls the rest, and generation fell to 0.37 tokens/s (52 with
    # one thread). Every llama-server the tests start, directly or through firstlight, reads this.
    os.environ.setdefault("LLAMA_ARG_THREADS", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets the marker of its folder (tests/unit: ``unit``, tests/e2e: ``e2e``). The real-vLLM tests
    run first (a stable sort: the rest keep their order): they take the longest (each vLLM start is minutes of
    torch.compile)."""
    for item in items:
        try:
            top = Path(item.path).resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        if top in ("unit", "e2e"):
            item.add_marker(getattr(pytest.mark, top))
    items.sort(key=lambda item: 0 if item.get_closest_marker("vllm") else 1)


@pytest.fixture(autouse=True)
def _stops_stay_in_their_test() -> Iterator[None]:
    """A stop a test's thread sends after the test has ended is dropped (``tests.support.common.signal_self``,
    ``drive``): a daemon thread of one test once sent SIGTERM into the next test's run, which ended
    ``interrupted``."""
    yield
    end_epoch()


VLLM_MODULE = "tests/e2e/vllm/test_server.py"
# modules whose tests share one costly module-scoped fixture (the real vLLM, the built wheel and its venv, the
# built image): each is one unit of work on one worker
TOGETHER = (VLLM_MODULE, "tests/e2e/packaging/test_wheel.py", "tests/e2e/packaging/test_image.py")


@pytest.hookimpl(optionalhook=True)  # pytest without xdist (-p no:xdist) must not reject it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist (scripts/test.sh runs 2 workers): every test is its own unit of work, except the
    real-vLLM module, which is one unit on one worker (its tests share module-scoped servers and must never run
    two vLLMs at once), and the others of ``TOGETHER`` (the wheel's module builds and installs it once). Being
    the largest unit, the vLLM module is handed out first, so it runs beside the rest of the suite instead of
    being its tail. (xdist's own ``loadgroup`` cannot do this under pytest 9: it renames node ids
    through an attribute that pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "load":  # an explicit --dist mode is the user's
        return None
    from tests.support.scheduling import TogetherScheduling

    return TogetherScheduling(config, log, together=TOGETHER)
