"""The trace-event file: valid against a JSON schema of Chrome's trace-event format, one X event per phase,
tracks named, and level bars that nest."""

from __future__ import annotations

import itertools
import json

import jsonschema

from firstlight.report.series import build_view
from firstlight.report.trace import PID, TRACKS, render_trace
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.report import ready_timeline

SCHEMA = json.loads((_FIXTURES / "trace_event.schema.json").read_text())


def test_trace_is_valid_trace_event_json_with_one_x_event_per_phase():
    view = build_view(ready_timeline())
    doc = json.loads(render_trace(view))
    jsonschema.validate(doc, SCHEMA)
    events = doc["traceEvents"]
    phases = [e for e in events if e["ph"] == "X" and e["cat"] == "phase"]
    assert [e["name"] for e in phases] == [p.name for p in view.phases]
    assert all(e["tid"] == TRACKS["phases"] and e["pid"] == PID for e in phases)
    named = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert set(TRACKS) <= named
    assert any(e["ph"] == "C" for e in events) and any(e["ph"] == "i" for e in events)


def test_level_bars_nest_and_phase_bars_do_not_overlap():
    doc = json.loads(render_trace(build_view(ready_timeline())))
    levels = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "level"]
    assert len(levels) >= 2
    for outer, inner in itertools.pairwise(levels):  # each level lies inside the one below it
        assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1
    phases = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "phase"]
    for a, b in itertools.pairwise(phases):
        assert a["ts"] + a["dur"] <= b["ts"] + 1


def test_schema_rejects_what_perfetto_would_not_load():
    bad = {"traceEvents": [{"name": "p", "ph": "X", "pid": 1, "tid": 1, "ts": 0}]}  # X without dur
    try:
        jsonschema.validate(bad, SCHEMA)
    except jsonschema.ValidationError:
        return
    raise AssertionError("an X event without dur passed the schema")
