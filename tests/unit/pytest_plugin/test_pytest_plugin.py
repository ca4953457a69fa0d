"""The pytest plugin (firstlight.pytest_plugin): registered as an entry point, free for projects that do not use
it, a session's server from the real llama-server, and a server that never becomes READY as a clean error.

Each run is a real pytest in a temporary directory (a subprocess, as a user's project runs it), importing this
checkout's firstlight.

The in-process tests of this subject; the others: ``tests/e2e/pytest_plugin/test_pytest_plugin.py``.
"""

from __future__ import annotations

import re

from tests.support.common import REPO
from tests.support.llama_server import llama  # noqa: F401  (llama: the fixture)


def test_pyproject_registers_the_plugin_as_a_pytest11_entry_point():
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[project.entry-points.pytest11]", 1)
    assert len(section) == 2, "no [project.entry-points.pytest11] table"
    body = section[1].split("\n[", 1)[0]
    assert re.search(r'^firstlight = "firstlight\.pytest_plugin"', body, re.M), body
