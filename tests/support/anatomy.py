"""Helpers shared by tests/e2e/anatomy/test_anatomy.py, tests/unit/anatomy/test_anatomy.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from firstlight.sim.fixtures import make_weights


def _phase(anat: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in anat["phases"] if p["name"] == name)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("anatomy") / "w"
    make_weights(d, 200_000_000)
    return d
