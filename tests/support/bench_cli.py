"""Helpers shared by tests/e2e/cli/test_bench.py, tests/unit/cli/test_bench.py."""

from __future__ import annotations

from click.testing import CliRunner, Result


def invoke(cmd, args: list[str]) -> Result:  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cmd, args, catch_exceptions=False)
