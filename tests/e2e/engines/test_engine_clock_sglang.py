"""SGLang's own startup breakdown read once after READY and set beside firstlight's phases: the simulator serves
a /server_info answer with sglang's ``startup_time`` (tests/fixtures/clocks), then only its startup gauges; firstlight
reads each with one request and a deadline and puts the engine's seconds beside its own in the summary, the
console and ``explain``."""

from __future__ import annotations

import json
from pathlib import Path

from firstlight.anatomy import clock_differs
from firstlight.sim.fixtures import free_port
from tests.support.common import FIXTURES, run_firstlight, sim_cmd

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]
CLOCKS = FIXTURES / "clocks"


def _up(tmp_path: Path, weights: Path, *extra: str):
    port = free_port()
    return run_firstlight("up", "--json", "--stop-when-ready", "--history", str(tmp_path / "h.db"),
                          "--record", str(tmp_path / "start.jsonl"), *FAST, "--",
                          *sim_cmd("normal", port, "--model-path", str(weights), "--load-seconds", "1", *extra))


def test_server_info_startup_time_sits_beside_firstlights_phases(weights: Path, tmp_path: Path):
    r = _up(tmp_path, weights, "--server-info", str(CLOCKS / "sglang-server-info-startup-time.json"))
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    clock = s["engine_clock"]
    assert clock["source"] == "server_info"
    rows = {x["stage"]: x for x in clock["phases"]}
    assert set(rows) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "cuda_graph", "tokenizer_e2e"}
    phases = {p["name"]: p["seconds"] for p in s["anatomy"]["phases"]}
    w = rows["load_weight"]
    assert (w["engine_s"], w["phase"], w["firstlight_s"]) == (11.0, "weights_loading", phases["weights_loading"])
    # the simulator loads in about a second: the engine's 11 s differs, and the note carries both numbers
    assert w["differs"] is clock_differs(11.0, phases["weights_loading"]) is True
    assert w["note"].startswith(f"the engine counts 11.0s, firstlight saw {phases['weights_loading']:.1f}s")
    assert rows["cuda_graph"]["engine_s"] == 8.0 and rows["tokenizer_e2e"]["phase"] == "start"
    assert "load_weight: the engine counts 11.0s" in " ".join(clock["findings"])
    assert "clock  engine clock (server_info)" in r.stderr and "DIFFERS" in r.stderr
    e = run_firstlight("explain", "--last", "--history", str(tmp_path / "h.db"))
    assert e.rc == 0 and "engine clock (server_info)" in e.stderr and "load_weight" in e.stderr, e.stderr
    j = run_firstlight("explain", "--last", "--json", "--history", str(tmp_path / "h.db"))
    assert json.loads(j.stdout)["engine_clock"]["phases"][0]["stage"] == "load_weight"
    # the record keeps the answer read after READY: judged again (explain, report), the same rows
    rec = json.loads(run_firstlight("explain", str(tmp_path / "start.jsonl"), "--json").stdout)["engine_clock"]
    assert [(x["stage"], x["engine_s"]) for x in rec["phases"]] == [(x["stage"], x["engine_s"])
                                                                    for x in clock["phases"]]
    page = tmp_path / "report.html"
    assert run_firstlight("report", str(tmp_path / "start.jsonl"), "-o", str(page)).rc == 0
    assert '<table id="engine-clock">' in page.read_text() and "load_weight" in page.read_text()


def test_the_startup_gauges_when_server_info_has_none(weights: Path, tmp_path: Path):
    r = _up(tmp_path, weights, "--extra-metrics", str(CLOCKS / "sglang-startup-metrics.prom"))
    assert r.rc == 0, r.stderr[-3000:]
    clock = r.summary["engine_clock"]
    assert clock["source"] == "metrics"
    got = {x["stage"]: x["engine_s"] for x in clock["phases"]}
    assert got == {"load_weight": 10.0, "kv_cache_allocation": 3.0, "e2e": 20.0, "cuda_graph": 9.0}


def test_an_engine_that_publishes_nothing_has_no_section(weights: Path, tmp_path: Path):
    r = _up(tmp_path, weights)
    assert r.rc == 0, r.stderr[-3000:]
    assert r.summary["engine_clock"] is None and "engine clock" not in r.stderr
