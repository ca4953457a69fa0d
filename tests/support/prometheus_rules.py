"""Helpers shared by tests/e2e/deploy/test_prometheus_rules.py, tests/unit/deploy/test_prometheus_rules.py."""

from __future__ import annotations

from typing import Any

from tests.support.common import REPO

RULES_DIR = REPO / "deploy" / "prometheus"


RULES = RULES_DIR / "firstlight-rules.yml"


UNIT_TESTS = RULES_DIR / "tests" / "firstlight-rules.test.yml"


def alerts(rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
