"""deploy/prometheus: the rules pass `promtool check rules`, their unit tests pass `promtool test rules`, every
alert has a test that sees it fire and one that sees it stay silent, and those tests fail when the alert is
broken (each alert's expression swapped for one that never fires, then for one that always fires).

The process-starting tests of this subject; the others: ``tests/unit/deploy/test_prometheus_rules.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.prometheus_rules import RULES, RULES_DIR, UNIT_TESTS, alerts, promtool


def test_promtool_checks_the_rules():
    p = promtool("check", "rules", RULES.name)
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


def test_the_rules_unit_tests_pass():
    p = promtool("test", "rules", str(UNIT_TESTS.relative_to(RULES_DIR)))
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("mutation", ["never", "always"])
def test_the_unit_tests_fail_for_a_broken_alert(tmp_path: Path, mutation: str):
    rules = yaml.safe_load(RULES.read_text())
    names = [a["alert"] for a in alerts(rules)]
    (tmp_path / "tests").mkdir()
    shutil.copy(UNIT_TESTS, tmp_path / "tests" / UNIT_TESTS.name)
    survivors = []
    for name in names:
        broken = yaml.safe_load(RULES.read_text())
        for a in alerts(broken):
            if a["alert"] == name:  # never: an empty vector; always: every instance, at once
                a["expr"] = "vector(1) < 0" if mutation == "never" else "firstlight_info"
                a.pop("for", None)
        (tmp_path / RULES.name).write_text(yaml.safe_dump(broken))
        if promtool("test", "rules", f"tests/{UNIT_TESTS.name}", cwd=tmp_path).returncode == 0:
            survivors.append(name)
    assert not survivors, f"the unit tests pass with these alerts broken ({mutation} firing): {survivors}"
