"""``firstlight history`` on a fleet's runs: a node whose starts are slower than the rest of the fleet's is named
(docs/history.md), in the listing and in --json. Runs recorded by three "nodes" (FIRSTLIGHT_NODE) in one real SQLite
history; the listing is the real CLI in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.history import DeploymentKey, History
from tests.support.common import run_firstlight

KEY = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m"])


def _record(path: Path, monkeypatch: pytest.MonkeyPatch, node: str, *seconds: float) -> None:
    monkeypatch.setenv("FIRSTLIGHT_NODE", node)
    with History(path) as h:
        for s in seconds:
            h.record_run("up", {"verdict": "ready", "cold_start_s": s, "start_type": {"type": "cold"}}, KEY)


def test_a_node_whose_starts_are_slower_than_the_fleets_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    history = tmp_path / "h.sqlite3"
    _record(history, monkeypatch, "node-a", 100.0, 102.0, 98.0)
    _record(history, monkeypatch, "node-b", 101.0, 99.0, 100.0)
    _record(history, monkeypatch, "node-c", 140.0, 150.0, 145.0)  # a slower disk
    listing = run_firstlight("history", "--history", str(history))
    assert listing.rc == 0, listing.stderr
    said = [line for line in listing.stdout.splitlines() if line.startswith("SLOW NODE")]
    assert len(said) == 1 and "node node-c: cold starts 1.45x slower than the rest of the fleet" in said[0], said
    as_json = run_firstlight("history", "--history", str(history), "--json")
    (slow,) = json.loads(as_json.stdout)["slow_nodes"]
    assert (slow["node"], slow["median_s"], slow["fleet_median_s"]) == ("node-c", 145.0, 100.0)
