"""The run history's read of what phase budgets are learned from (``History.start_anatomies``), in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlight.budgets import learn
from firstlight.history import DeploymentKey, History

KEY = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m"], 1)
OTHER = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m", "--enforce-eager"], 1)


def _summary(verdict: str, kind: str, seconds: float) -> dict:
    return {"verdict": verdict, "started_at": 1000.0, "ready_at": 1000.0 + seconds,
            "start_type": {"type": kind, "labels": [kind], "evidence": {}},
            "anatomy": {"phases": [{"name": "cuda_graph", "seconds": seconds}]}}


def test_start_anatomies_are_this_deployments_good_starts_newest_first(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        h.record_run("up", _summary("ready", "cold", 40.0), KEY)
        h.record_run("up", _summary("hung", "cold", 900.0), KEY)  # not a good start
        h.record_run("watch", _summary("ready", "warm_page_cache", 10.0), KEY)
        h.record_run("up", _summary("ready", "cold", 50.0), OTHER)  # another deployment
        h.record_run("bench", _summary("ready", "cold", 60.0), KEY, bench={"completed": 1})  # not a start
        h.record_run("up", _summary("ready", "cold+compile_cache_hit", 45.0), KEY)
        got = h.start_anatomies(KEY)
    assert [(t, a["phases"][0]["seconds"] if a else None) for t, a in got] == [
        ("cold+compile_cache_hit", 45.0), ("warm_page_cache", 10.0), ("cold", 40.0)]
    assert learn(got, "cold").phases["cuda_graph"].starts == 2


def test_a_summary_without_an_anatomy_gives_none(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        h.record_run("up", {"verdict": "ready", "started_at": 1.0, "ready_at": 2.0}, KEY)
        assert h.start_anatomies(KEY) == [(None, None)]


def test_start_anatomies_before_a_run_are_the_older_ones_only(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        first = h.record_run("up", _summary("ready", "cold", 40.0), KEY)
        second = h.record_run("up", _summary("ready", "cold", 50.0), KEY)
        h.record_run("up", _summary("ready", "cold", 60.0), KEY)
        assert [a["phases"][0]["seconds"] for _, a in h.start_anatomies(KEY, before=second) if a] == [40.0]
        assert h.start_anatomies(KEY, before=first) == []
        assert len(h.start_anatomies(KEY)) == 3


def test_start_nodes_count_the_nodes_of_the_good_starts_of_the_type_else_of_all(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    with History(tmp_path / "h.sqlite3") as h:
        for node, verdict, kind in (("gpu-a", "ready", "cold"), ("gpu-a", "ready", "cold"),
                                    ("gpu-b", "ready", "cold"), ("gpu-c", "hung", "cold"),
                                    ("gpu-d", "ready", "warm_page_cache")):
            monkeypatch.setenv("FIRSTLIGHT_NODE", node)
            last = h.record_run("up", _summary(verdict, kind, 40.0), KEY)
        monkeypatch.setenv("FIRSTLIGHT_NODE", "gpu-e")
        h.record_run("up", _summary("ready", "cold", 40.0), OTHER)  # another deployment
        assert h.start_nodes(KEY, "cold") == {"gpu-a": 2, "gpu-b": 1}  # good cold starts only
        assert h.start_nodes(KEY, "restored") == {"gpu-a": 2, "gpu-b": 1, "gpu-d": 1}  # none of it: all good ones
        assert h.start_nodes(KEY, None) == {"gpu-a": 2, "gpu-b": 1, "gpu-d": 1}
        assert h.start_nodes(KEY, "cold", before=last) == {"gpu-a": 2, "gpu-b": 1}
        assert h.start_nodes(KEY, "cold", limit=2) == {"gpu-b": 1}  # the newest two: gpu-d's warm, gpu-b's cold
