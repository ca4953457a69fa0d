"""The JSON Schema of a run's summary (``firstlight.result.summary_schema``), generated from RunResult's fields and
their shapes (``firstlight.summary``), holds for the summaries real runs give: a start judged through the driver
with process samples, weights, compile and engine-clock lines (anatomy with cuts, start type, engine clock), then
compared with a history twice (baseline, ETA, regression, the anatomy against the baseline's), a crash after READY,
a failed preflight, a unit with no invocation, a wait stopped by a signal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from firstlight.config import JudgeConfig
from firstlight.drive import Driver
from firstlight.engines import get_profile
from firstlight.history import DeploymentKey, History
from firstlight.redact import Redactor
from firstlight.report.jsonl import summary_event
from firstlight.result import RunFacts, RunResult, summary_schema
from firstlight.runner.after_ready import compare_with_history
from firstlight.timeline import EngineClock, Level, LogLine, Observation, Started, WeightsTotal
from tests.support.judge import T0, probe, proc

GB = 1_000_000_000
VLLM = "INFO 12-01 10:00:00 [x.py:1] "


def _judged(load_s: float) -> RunResult:
    obs: list[Observation] = [Started(T0, 100, "http://127.0.0.1:8000", "vllm", True),
                              WeightsTotal(T0 + 0.1, 4 * GB, 2, "/models/m", GB // 2, "ext4"),
                              LogLine(T0 + 0.5, VLLM + "vLLM API server version 0.11.0", lineno=1),
                              LogLine(T0 + 1, VLLM + "Starting to load model /models/m...", lineno=2)]
    obs += [proc(1 + i * 0.5, cpu=0.4 * i, read=int(i * 0.5 * GB / load_s)) for i in range(int(2 * load_s) + 1)]
    t = 1 + load_s
    obs += [LogLine(T0 + t, VLLM + f"Loading weights took {load_s:.2f} seconds", lineno=3),
            LogLine(T0 + t + 0.1, VLLM + "Compiling a graph for dynamic shape takes 3.1 s", lineno=4),
            LogLine(T0 + t + 4, VLLM + "torch.compile takes 3.5 s in total", lineno=5),
            LogLine(T0 + t + 5, VLLM + "Available KV cache memory: 1.00 GiB", lineno=6),
            LogLine(T0 + t + 6, VLLM + "Graph capturing finished in 1 secs", lineno=7),
            LogLine(T0 + t + 7, VLLM + "Application startup complete.", lineno=8),
            probe(t + 7.5, Level.PORT, True), probe(t + 7.5, Level.HTTP, True),
            probe(t + 7.5, Level.HEALTH, True), probe(t + 7.6, Level.MODELS, True),
            probe(t + 8, Level.GENERATION, True, text="hi"),
            EngineClock(T0 + t + 9, "server_info", "startup", ("*",), t + 8.5)]
    driver = Driver(JudgeConfig(), get_profile("vllm"), T0)
    for o in obs:
        a = driver.feed(o).assessment
    assert a.verdict == "ready"
    facts = RunFacts(T0, "vllm", "http://127.0.0.1:8000", pid=100, command=["vllm", "serve", "/models/m"],
                     requests={"generation": 1}, cold_start_s=t + 8, disk={"rate": 2e9, "cache_rate": 8e9})
    return RunResult.from_judge(driver.judge, a, facts).with_engine_clock(a)


def _valid(summary: dict[str, Any]) -> None:
    jsonschema.validate(summary, summary_schema(), cls=jsonschema.Draft202012Validator)


def test_the_schema_is_valid_and_names_every_field():
    schema = summary_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["required"]) == set(RunResult(verdict="ready", phase="ready", started_at=0, ended_at=1,
                                                    engine="vllm", url="").to_dict())


def test_real_summaries_hold_to_the_schema(tmp_path: Path):
    first = _judged(4.0)
    s = first.to_dict()
    assert s["anatomy"]["cuts"] and s["anatomy"]["phases"][3]["compile"] and s["engine_clock"]["phases"]
    assert s["start_type"]["type"] and s["progress"]
    _valid(s)
    _valid(summary_event(first))  # the --json summary line names itself
    history = History(tmp_path / "h.db")
    key = DeploymentKey.create("vllm", "/models/m", ["vllm", "serve", "/models/m"], 1, Redactor())
    compare_with_history(history, key, "up", first, 0.2)
    second = compare_with_history(history, key, "up", _judged(12.0), 0.2)
    s = second.to_dict()
    assert s["regression"] and s["baseline"]["eta"] and s["anatomy"]["vs_baseline"]
    _valid(s)
    _valid(second.died_serving(-9, T0 + 100, oom=("oom-kill of pid 100",)).to_dict())
    _valid(second.with_checks({"warmup": {"requests": 2}, "bench": {"output_throughput": 9.0}}).to_dict())
    facts = RunFacts(T0, "vllm", "http://x")
    _valid(RunResult.preflight_failed(facts, {"event": "preflight"}, "port", "port_in_use", "free it",
                                      [{"signal": "preflight:port", "value": "taken", "since": T0}], T0 + 1).to_dict())
    _valid(RunResult.no_invocation("http://x", "vllm", T0, "not running", live=True, error=False,
                                   interrupted=False, unit={"unit": "x.service"}).to_dict())
    _valid(RunResult.never_started("http://x", "vllm", T0, "SIGTERM", T0 + 3).to_dict())


def test_a_key_the_shapes_do_not_declare_is_caught():
    s = _judged(4.0).to_dict()
    s["anatomy"]["cache"]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        _valid(s)
