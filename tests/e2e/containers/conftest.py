"""The docker CLI's fixture for the tests of this package."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.common import require


@pytest.fixture
def docker_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short socket path (unix sockets: 108 bytes) as DOCKER_HOST, and a docker config of the test's own."""
    require(shutil.which("docker") is not None, "the docker CLI (this machine kind has it: ../.library/env)")
    d = Path(tempfile.mkdtemp(prefix="fl-dk-", dir="/tmp"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{d / 'd.sock'}")
    monkeypatch.setenv("DOCKER_CONFIG", str(d / "config"))
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    try:
        yield d / "d.sock"
    finally:
        shutil.rmtree(d, ignore_errors=True)
