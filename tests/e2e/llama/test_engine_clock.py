"""The real llama-server b11434 in router mode (``--models-dir``, models loaded on demand): firstlight follows its
``/models/sse`` stream live during the start and sets the stream's load stages beside its own phases, in the
summary JSON, on the console and in ``explain``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight
from tests.support.llama_server import FAST, llama  # noqa: F401  (llama: the fixture)

pytestmark = pytest.mark.llama


def test_the_routers_load_stages_sit_beside_firstlights_phases(llama: dict[str, str], tmp_path: Path):  # noqa: F811
    models = tmp_path / "models"
    models.mkdir()
    os.symlink(llama["model"], models / Path(llama["model"]).name)
    history = tmp_path / "history.db"
    port = free_port()
    record = tmp_path / "start.jsonl"
    r = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), "--record", str(record),
                       *FAST, "--",
                       llama["llama_server"], "--models-dir", str(models), "--host", "127.0.0.1", "--port", str(port),
                       "-c", "2048", "-np", "1", timeout=300)
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    clock = s["engine_clock"]
    assert clock is not None and clock["source"] == "models_sse", s.get("engine_clock")
    rows = {x["stage"]: x for x in clock["phases"]}
    assert set(rows) == {"text_model", "load"}, rows
    load, text = rows["load"], rows["text_model"]
    # the whole load, from the stream's first "loading" to "loaded", inside firstlight's start (the router spawns
    # the model's server on the first generation request)
    # text_model's stage may take 0.0 s at the engine's millisecond (stop 43's fresh run: its two events in one ms)
    assert 0 <= text["engine_s"] <= load["engine_s"] <= load["firstlight_s"] <= s["elapsed_s"] + 0.5, rows
    assert load["phase"] == "start" and text["phase"] == "weights_loading"
    assert '"status":"loaded"' in load["text"]
    # the router answers /health at once: firstlight's phases come from its probes, so it saw no weights_loading
    # phase while the stream loaded text_model (or, if it did, the two figures sit side by side)
    phases = [p["name"] for p in s["anatomy"]["phases"]]
    if "weights_loading" in phases:
        assert text["firstlight_s"] is not None
    else:
        assert text["firstlight_s"] is None and text["note"].startswith("firstlight saw no weights_loading phase")
    assert "clock  engine clock (models_sse)" in r.stderr and "text_model" in r.stderr
    e = run_firstlight("explain", "--last", "--history", str(history))
    assert e.rc == 0 and "engine clock (models_sse)" in e.stderr and "text_model" in e.stderr, e.stderr
    j = json.loads(run_firstlight("explain", "--last", "--json", "--history", str(history)).stdout)
    assert {x["stage"] for x in j["engine_clock"]["phases"]} == {"text_model", "load"}
    # the record keeps the stream's marks: judged again, the same rows
    rec = json.loads(run_firstlight("explain", str(record), "--json").stdout)["engine_clock"]
    assert [(x["stage"], x["engine_s"]) for x in rec["phases"]] == [(x["stage"], x["engine_s"])
                                                                    for x in clock["phases"]]
