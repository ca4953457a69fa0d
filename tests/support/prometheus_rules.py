"""Helpers shared by tests/e2e/deploy/test_prometheus_rules.py, tests/unit/deploy/test_prometheus_rules.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.support.common import REPO, require

RULES_DIR = REPO / "deploy" / "prometheus"


# scripts/mutate_rules.py points the in-process tests at each mutant of the rules file through this variable
RULES = Path(os.environ.get("FIRSTLIGHT_RULES_FILE") or RULES_DIR / "firstlight-rules.yml")


UNIT_TESTS = RULES_DIR / "tests" / "firstlight-rules.test.yml"


def alerts(rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r]


def promtool(*args: str, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess[str]:
    require(shutil.which("promtool") is not None, "promtool (Debian package prometheus)")
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
