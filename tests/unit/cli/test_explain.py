"""``firstlight explain --last`` on a history that several nodes share: each phase against the earlier good starts
of its type, and whose starts those are (this node's, or the fleet's), in the text and in ``--json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from firstlight.cli.app import cli
from firstlight.history import DeploymentKey, History

KEY = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m"], 1)


def _start(seconds: float) -> dict[str, Any]:
    return {"verdict": "ready", "started_at": 1000.0, "ready_at": 1000.0 + seconds,
            "start_type": {"type": "cold", "labels": ["cold"], "evidence": {}},
            "anatomy": {"total_s": seconds, "reached": "ready",
                        "phases": [{"name": "weights_loading", "seconds": seconds, "bound": "disk",
                                    "evidence": []}]}}


def _history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: list[str], last: str) -> Path:
    path = tmp_path / "h.sqlite3"
    with History(path) as h:
        for i, node in enumerate([*nodes, last]):
            monkeypatch.setenv("FIRSTLIGHT_NODE", node)
            h.record_run("up", _start(40.0 + i), KEY)
    return path


def test_a_new_nodes_first_start_is_set_against_the_fleets_starts_named(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    path = _history(tmp_path, monkeypatch, ["gpu-a", "gpu-a", "gpu-b"], "gpu-new")
    r = CliRunner().invoke(cli, ["explain", "--last", "--history", str(path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["usual"]["node"] == "gpu-new" and out["usual"]["nodes"] == {"gpu-a": 2, "gpu-b": 1}
    assert ("usual (earlier good cold starts of this deployment, the fleet's: 2 nodes (gpu-a 2, gpu-b 1); this "
            "start on gpu-new)") in r.stderr
    assert "  weights_loading      43.0s  40.0-42.0s over 3 starts, median 41.0s  LONGER" in r.stderr


def test_a_nodes_own_earlier_starts_are_not_called_the_fleets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = _history(tmp_path, monkeypatch, ["gpu-a", "gpu-a"], "gpu-a")
    r = CliRunner().invoke(cli, ["explain", "--last", "--history", str(path)])
    assert r.exit_code == 0, r.output
    assert "usual (earlier good cold starts of this deployment): phase" in r.stderr and "fleet" not in r.stderr
