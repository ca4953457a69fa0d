"""report/anatomy_text.py's ``usual_lines``: each phase of a start against what the deployment's earlier good starts
of its type took in it (``explain`` of a history run)."""

from __future__ import annotations

from typing import Any

import pytest

from firstlight.budgets import learn
from firstlight.report.anatomy_text import usual_lines


def _anat(**phases: float) -> dict[str, Any]:
    return {"phases": [{"name": n, "seconds": s} for n, s in phases.items()]}


EARLIER = [("cold", _anat(weights_loading=40.0, cuda_graph=10.0)), ("cold", _anat(weights_loading=50.0,
                                                                                    cuda_graph=12.0))]


def test_each_phase_is_set_against_the_earlier_starts_range_and_median_and_an_outlier_is_named():
    lines = usual_lines(_anat(weights_loading=45.0, cuda_graph=30.0, warmup=2.0), learn(EARLIER, "cold").to_dict())
    assert lines[0] == "usual (earlier good cold starts of this deployment): phase, this start, their range, median"
    assert lines[1] == "  weights_loading      45.0s  40.0-50.0s over 2 starts, median 45.0s"
    assert lines[2] == ("  cuda_graph           30.0s  10.0-12.0s over 2 starts, median 11.0s  LONGER than every "
                        "earlier start")
    assert len(lines) == 3  # warmup: no earlier start had it
    short = usual_lines(_anat(cuda_graph=9.9), learn(EARLIER, "cold").to_dict())
    assert short[1].endswith("SHORTER than every earlier start")


@pytest.mark.parametrize("usual", [None, {}, {"phases": {}}, {"phases": {"cuda_graph": {"min_s": "x"}}},
                                   {"phases": "damaged"}])
def test_no_earlier_start_or_a_damaged_record_says_nothing(usual: Any):
    assert usual_lines(_anat(cuda_graph=1.0), usual) == []


@pytest.mark.parametrize(("node", "nodes", "said"), [
    ("gpu-a", {"gpu-a": 3, "gpu-b": 1}, ", the fleet's: 2 nodes (gpu-a 3, gpu-b 1); this start on gpu-a"),
    ("gpu-c", {"gpu-b": 2}, ", the fleet's: 1 node (gpu-b 2); this start on gpu-c"),  # a new node's first start
    ("gpu-a", {"gpu-a": 1, "gpu-b": 3}, ", the fleet's: 2 nodes (gpu-b 3, gpu-a 1); this start on gpu-a"),  # most first
    (None, {"gpu-b": 1, "gpu-a": 1}, ", the fleet's: 2 nodes (gpu-a 1, gpu-b 1)"),
    ("gpu-a", {"gpu-a": 2}, ""),  # this node's own starts only: no fleet to name
    ("gpu-a", {}, ""),
    ("gpu-a", "damaged", ""),
])
def test_the_header_names_the_fleet_when_other_nodes_made_the_earlier_starts(node: Any, nodes: Any, said: str):
    usual = learn(EARLIER, "cold").to_dict() | {"node": node, "nodes": nodes}
    assert usual_lines(_anat(cuda_graph=11.0), usual)[0] == (
        f"usual (earlier good cold starts of this deployment{said}): phase, this start, their range, median")
