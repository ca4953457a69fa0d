"""deploy/prometheus: the rules pass `promtool check rules`, their unit tests pass `promtool test rules`, every
alert has a test that sees it fire and one that sees it stay silent, and those tests fail when the alert is
broken (each alert's expression swapped for one that never fires, then for one that always fires)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.common import REPO, require

RULES_DIR = REPO / "deploy" / "prometheus"
RULES = RULES_DIR / "firstlight-rules.yml"
UNIT_TESTS = RULES_DIR / "tests" / "firstlight-rules.test.yml"


def promtool(*args: str, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess[str]:
    require(shutil.which("promtool") is not None, "promtool (Debian package prometheus)")
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def alerts(rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r]


def test_promtool_checks_the_rules():
    p = promtool("check", "rules", RULES.name)
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


def test_the_rules_unit_tests_pass():
    p = promtool("test", "rules", str(UNIT_TESTS.relative_to(RULES_DIR)))
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


def test_every_alert_is_tested_firing_and_silent():
    names = {a["alert"] for a in alerts(yaml.safe_load(RULES.read_text()))}
    fires: set[str] = set()
    silent: set[str] = set()
    for t in yaml.safe_load(UNIT_TESTS.read_text())["tests"]:
        for case in t.get("alert_rule_test", []):
            (fires if case.get("exp_alerts") else silent).add(case["alertname"])
    assert names == fires, f"alerts without a firing test: {names - fires}"
    assert names == silent, f"alerts without a silent test: {names - silent}"


def test_every_rule_says_why_its_numbers():
    """Each rule is preceded by a comment (its numbers: windows, factors, `for`)."""
    lines = RULES.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(("- record:", "- alert:"))]
    assert starts
    for i in starts:
        assert lines[i - 1].lstrip().startswith("#"), f"no comment above {lines[i].strip()}"


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
