"""deploy/grafana: the provisioned dashboard parses, its provisioning file points Grafana at it, and every query
names only series that firstlight exports or that deploy/prometheus's recording rules define."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from firstlight.report.prometheus import PrometheusExporter
from firstlight.sim.fixtures import free_port
from tests.support.common import REPO

GRAFANA = REPO / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "firstlight-fleet.json"
PROVISIONING = GRAFANA / "provisioning" / "dashboards" / "firstlight.yaml"
RULES = REPO / "deploy" / "prometheus" / "firstlight-rules.yml"

# PromQL words that look like names: aggregations, operators, modifiers.
KEYWORDS = {"sum", "min", "max", "avg", "count", "quantile", "topk", "bottomk", "stddev", "stdvar", "by", "without",
            "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"}


def exported_names() -> set[str]:
    ex = PrometheusExporter(free_port())
    try:
        families = list(ex.registry.collect())  # a labelled gauge not yet set has no sample, only its family
        return {m.name for m in families if m.type == "gauge"} | {s.name for m in families for s in m.samples}
    finally:
        ex.close()


def recorded_names() -> set[str]:
    rules = yaml.safe_load(RULES.read_text())
    return {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}


def series_in(expr: str) -> set[str]:
    """The series names a PromQL expression selects (a small lexer: enough for the dashboard's queries)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    e = re.sub(r"\{[^}]*\}", "", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # range selectors ($__rate_interval too)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)  # label lists
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][\w:]*", e):
        followed = e[m.end():].lstrip()[:1]
        if followed != "(" and m.group().lower() not in KEYWORDS:
            names.add(m.group())
    return names


def panels(dash: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def test_the_dashboard_is_a_grafana_dashboard(dashboard: dict[str, Any]):
    assert dashboard["id"] is None and 8 <= len(dashboard["uid"]) <= 40 and dashboard["title"]
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "deployment"}
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for p in panels(dashboard):
        assert p["type"] and p["title"] and set(p["gridPos"]) == {"x", "y", "w", "h"} and p["targets"], p["title"]
        assert all(t["expr"] and t["refId"] for t in p["targets"]), p["title"]


def test_the_dashboard_shows_what_the_fleet_needs(dashboard: dict[str, Any]):
    """Starts by verdict, cold start per instance against baseline, the phase breakdown, instances per phase."""
    exprs = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in panels(dashboard)}
    joined = "\n".join(exprs.values())
    for needed in ("deployment_verdict:firstlight_starts:increase5m", "instance:firstlight_cold_start_seconds:labelled",
                   "instance:firstlight_cold_start_baseline_seconds", "firstlight_phase_seconds",
                   "deployment_phase:firstlight_instances:count"):
        assert needed in joined, needed


def test_every_query_names_only_series_firstlight_exports_or_the_rules_record(dashboard: dict[str, Any]):
    known = exported_names() | recorded_names()
    assert "firstlight_starts_total" in known and "firstlight_time_to_ready_seconds_bucket" in known
    unknown = {}
    for p in panels(dashboard):
        for t in p["targets"]:
            names = series_in(t["expr"])
            assert names, t["expr"]
            if names - known:
                unknown[t["expr"]] = names - known
    var = next(v for v in dashboard["templating"]["list"] if v["name"] == "deployment")
    (selector,) = re.fullmatch(r"label_values\((.+),\s*deployment\)", var["query"]["query"]).groups()  # type: ignore[union-attr]
    assert series_in(selector) <= known
    assert not unknown


def test_the_lexer_sees_a_misspelt_series():
    assert series_in('sum by (le) (increase(firstlight_time_to_ready_second_bucket{a="b"}[5m]) * on(instance) '
                     'group_left(deployment) firstlight_info)') == {"firstlight_time_to_ready_second_bucket",
                                                                     "firstlight_info"}


def test_the_provisioning_file_points_grafana_at_the_dashboards():
    prov = yaml.safe_load(PROVISIONING.read_text())
    assert prov["apiVersion"] == 1
    (provider,) = prov["providers"]
    assert provider["type"] == "file" and provider["name"] and provider["options"]["path"]
