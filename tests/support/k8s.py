"""Helpers shared by the tests that were in tests/test_k8s.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def deployment(path: Path) -> dict[str, Any]:
    return next(d for d in docs(path) if d["kind"] == "Deployment")


def _arg(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]
