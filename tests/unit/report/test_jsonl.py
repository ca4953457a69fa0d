"""report/jsonl.py: the group of a multi-node start in the JSON Lines stream, one object at each change.

The process-starting tests of this subject: ``tests/e2e/runner/test_multinode.py`` (a leader's ``--json``)."""

from __future__ import annotations

import io
import json
from typing import Any

from firstlight.report.jsonl import JsonLinesReporter


def _member(url: str, state: str, ok: bool, progress: float, error: str | None = None) -> dict[str, Any]:
    return {"url": url, "node_rank": 1, "state": state, "ok": ok, "last_progress_at": progress, "error": error}


def test_a_leader_writes_the_group_once_per_change_with_each_member():
    out = io.StringIO()
    r = JsonLinesReporter(out)
    starting = {"verdict": "starting", "serving": False, "culprit": None, "evidence": []}
    r.group_update([_member("http://n2:8081", "starting", False, 1.0)], starting)
    r.group_update([_member("http://n2:8081", "starting", False, 2.0)], starting)  # progress alone: no change
    hung = {"verdict": "hung", "serving": False, "culprit": "http://n2:8081",
            "evidence": [{"signal": "member", "message": "http://n2:8081 made no progress"}]}
    r.group_update([_member("http://n2:8081", "starting", False, 2.0)], hung)
    r.group_update([_member("http://n2:8081", "starting", False, 2.0, "ConnectError")], hung)  # now unreachable
    objs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(o["event"], o["verdict"], o["culprit"]) for o in objs] == [
        ("group", "starting", None), ("group", "hung", "http://n2:8081"), ("group", "hung", "http://n2:8081")]
    assert objs[1]["evidence"] == hung["evidence"] and objs[1]["members"][0]["state"] == "starting"
    assert objs[2]["members"][0]["error"] == "ConnectError" and isinstance(objs[2]["t"], float)
