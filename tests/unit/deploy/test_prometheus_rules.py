"""deploy/prometheus: the rules pass `promtool check rules`, their unit tests pass `promtool test rules`, every
alert has a test that sees it fire and one that sees it stay silent, and those tests fail when the alert is
broken (each alert's expression swapped for one that never fires, then for one that always fires).

The in-process tests of this subject; the others: ``tests/e2e/deploy/test_prometheus_rules.py``.
"""

from __future__ import annotations

import yaml

from tests.support.common import REPO
from tests.support.prometheus_rules import RULES, UNIT_TESTS, alerts


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


def test_every_group_evaluates_every_30_s_as_the_docs_say():
    """promtool's unit tests evaluate at their own ``evaluation_interval``, so they cannot see a group's
    ``interval``: this pins the one docs/prometheus.md states ("the rules evaluate every 30 s as shipped")."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    assert [(g["name"], g.get("interval")) for g in groups] == [("firstlight.recording", "30s"),
                                                               ("firstlight.alerts", "30s")]
    assert "the rules evaluate every 30 s as shipped" in (REPO / "docs" / "prometheus.md").read_text()
