"""runner/expectations.py against a real SQLite history in a temporary folder: what this deployment's previous
starts make the next one expect (the ETA, the phase budgets of its type, the forecast, the known answer), each
said once however often it is looked up, and nothing looked up when no history is kept or an estimate was told."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from firstlight import settings
from firstlight.config import Config, HistoryConfig, JudgeConfig
from firstlight.engines import get_profile
from firstlight.history.store import History
from firstlight.redact import Redactor
from firstlight.result import RunResult
from firstlight.runner.expectations import Expectations
from firstlight.timeline import WeightsTotal
from firstlight.vocab import READY

PROFILE = get_profile("vllm")
COMMAND = ["vllm", "serve", "/models/m", "--port", "8000"]


def _summary(seconds: float, kind: str | None = None) -> dict[str, Any]:
    start_type = {"type": kind, "labels": [kind], "evidence": {}} if kind else None
    return {"verdict": "ready", "started_at": 1000.0, "ready_at": 1000.0 + seconds, "start_type": start_type,
            "anatomy": {"phases": [{"name": "weights_loading", "seconds": seconds * 0.6},
                                   {"name": "cuda_graph", "seconds": seconds * 0.4}]}}


def expectations(tmp_path: Path, *runs: dict[str, Any], expected_total_s: float | None = None,
                 enabled: bool = True, known_answer: str = "check") -> tuple[Expectations, list[str]]:
    cfg = Config(command=COMMAND, engine="vllm", judge=JudgeConfig(expected_total_s=expected_total_s),
                 history=HistoryConfig(enabled=enabled, path=tmp_path / "h.sqlite3", known_answer=known_answer))
    said: list[str] = []
    e = Expectations(cfg, settings.plan(cfg, PROFILE, redactor=Redactor()), said.append)
    if runs:
        with History(tmp_path / "h.sqlite3") as h:
            for summary in runs:
                h.record_run("up", summary, e.key(PROFILE))
    return e, said


def test_the_eta_is_the_median_of_the_previous_good_starts_and_said_once(tmp_path: Path):
    e, said = expectations(tmp_path, _summary(100.0), _summary(110.0))
    e.open(PROFILE)
    assert e.history is not None and e.expected_total_s == 105.0 and e.eta is not None
    e.look(PROFILE)
    e.look(PROFILE)
    assert [m for m in said if m.startswith("history: ETA")] == ["history: ETA from 2 untyped starts: 105.0s"]


def test_an_estimate_told_is_kept_and_the_history_not_asked_for_one(tmp_path: Path):
    e, said = expectations(tmp_path, _summary(100.0), expected_total_s=42.0)
    e.open(PROFILE)
    assert e.expected_total_s == 42.0 and e.eta is None and not [m for m in said if "ETA" in m]


def test_without_a_history_nothing_is_looked_up(tmp_path: Path):
    e, said = expectations(tmp_path, enabled=False)
    e.open(PROFILE)
    e.look(PROFILE)
    assert (e.history, e.eta, e.budgets, e.expected_total_s, said) == (None, None, None, None, [])
    assert e.known_answer(PROFILE, None, 1.0) is None  # type: ignore[arg-type]


def test_phase_budgets_are_learnt_once_the_start_type_is_known_and_said_once(tmp_path: Path):
    cold = [_summary(s, "cold") for s in (100.0, 110.0, 120.0, 130.0)]
    e, said = expectations(tmp_path, *cold)
    e.open(PROFILE)
    assert e.budgets is None  # the page cache at start unknown: no type, no budgets
    e.weights = WeightsTotal(1000.0, bytes=8 << 30, files=4, path="/models/m", resident=0)
    assert e.predicted_type(PROFILE) == "cold"
    e.look(PROFILE)
    e.look(PROFILE)
    assert e.budgets is not None
    told = [m for m in said if m.startswith("history: ") and "ETA" not in m]
    assert len(told) == 1, said


def test_the_forecast_is_made_at_open_and_graded_with_the_result(tmp_path: Path):
    e, _ = expectations(tmp_path, _summary(100.0), _summary(110.0))
    assert e.graded_forecast(RunResult(READY, "ready", 1000.0, 1100.0, "vllm", "http://x")) is None  # none said
    e.open(PROFILE)
    assert e.forecast is not None
    graded = e.graded_forecast(RunResult(READY, "ready", 1000.0, 1100.0, "vllm", "http://x", cold_start_s=100.0))
    assert graded is not None and graded != e.forecast.to_dict()


def test_a_known_answer_is_asked_only_in_check_mode_and_an_entry_only_with_a_first_answer(tmp_path: Path):
    e, _ = expectations(tmp_path, known_answer="record")
    e.open(PROFILE)
    assert e.known_answer(PROFILE, None, 1.0) is None  # type: ignore[arg-type]
    assert e.known_answer_entry(None) is None
