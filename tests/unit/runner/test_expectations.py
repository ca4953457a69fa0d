"""runner/expectations.py against a real SQLite history in a temporary folder: what this deployment's previous
starts make the next one expect (the ETA, the phase budgets of its type, the forecast, the known answer), each
said once however often it is looked up, and nothing looked up when no history is kept or an estimate was told."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from firstlight import settings
from firstlight.answers import answer_dict, request_fingerprint
from firstlight.config import Config, HistoryConfig, JudgeConfig
from firstlight.engines import get_profile
from firstlight.history.store import History
from firstlight.preflight.base import Check, PreflightReport
from firstlight.preflight.disk import device_id
from firstlight.redact import Redactor
from firstlight.result import RunResult
from firstlight.runner.expectations import Expectations
from firstlight.timeline import KnownAnswer, Level, Probe, WeightsTotal
from firstlight.trackers import AnswerTracker
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


# -- the known answer -----------------------------------------------------------------------------------------
def _first_answer(text: str = " Paris") -> Probe:
    return Probe(1010.0, Level.GENERATION, True, "POST /v1/completions -> 200", text=text, tokens=(" Paris",),
                 logprobs=(-0.1,))


def _recorded(e: Expectations, outcome: str = "recorded", text: str = " Paris") -> dict[str, Any]:
    answer = answer_dict(_first_answer(text), request_fingerprint(e.cfg.probe))
    return {**_summary(100.0), "known_answer": {"mode": "check", "answer": answer, "outcome": outcome}}


def test_the_known_answer_of_this_request_is_looked_up_in_check_mode_until_the_judge_holds_one(tmp_path: Path):
    e, _ = expectations(tmp_path)
    with History(tmp_path / "h.sqlite3") as h:
        run = h.record_run("up", _recorded(e), e.key(PROFILE))
    e.open(PROFILE)
    answers = AnswerTracker()
    known = e.known_answer(PROFILE, answers, 1234.0)
    assert isinstance(known, KnownAnswer) and (known.run, known.text, known.t) == (run, " Paris", 1234.0)
    answers.know(known)
    assert e.known_answer(PROFILE, answers, 1235.0) is None  # the judge keeps the first it gets
    off, _ = expectations(tmp_path / "off", known_answer="off")
    off.open(PROFILE)
    assert off.known_answer(PROFILE, AnswerTracker(), 1.0) is None


def test_the_summarys_known_answer_says_recorded_re_recorded_same_or_different(tmp_path: Path):
    e, _ = expectations(tmp_path)
    request = request_fingerprint(e.cfg.probe)
    answers = AnswerTracker()
    assert e.known_answer_entry(answers) is None  # no first answer yet
    answers.differs(_first_answer())
    entry = e.known_answer_entry(answers)
    assert entry == {"mode": "check", "answer": answer_dict(_first_answer(), request), "outcome": "recorded"}
    same = AnswerTracker()
    same.know(KnownAnswer(1000.0, run=7, recorded_at=900.0, text=" Paris", tokens=(" Paris",), logprobs=(-0.1,)))
    same.differs(_first_answer())
    assert {k: v for k, v in (e.known_answer_entry(same) or {}).items() if k != "answer"} == {
        "mode": "check", "outcome": "same", "reference_run": 7, "why": same.check.why if same.check else None}
    other = AnswerTracker()
    other.know(KnownAnswer(1000.0, run=7, recorded_at=900.0, text=" Lyon", tokens=(" Lyon",), logprobs=(-0.1,)))
    other.differs(_first_answer())
    got = e.known_answer_entry(other) or {}
    assert (got["outcome"], got["reference_run"]) == ("different", 7) and "token 1" in got["why"]
    rec, _ = expectations(tmp_path / "rec", known_answer="record")
    assert (rec.known_answer_entry(answers) or {})["outcome"] == "re-recorded"
    none, _ = expectations(tmp_path / "none", enabled=False)
    assert none.known_answer_entry(answers) is None  # no history kept: no answer kept either


# -- the forecast ---------------------------------------------------------------------------------------------
def test_the_forecast_takes_the_preflights_page_cache_reading_and_fit(tmp_path: Path):
    warm = [_summary(s, "warm_page_cache") for s in (20.0, 30.0)]
    cold = [_summary(s, "cold") for s in (200.0, 300.0)]
    e, _ = expectations(tmp_path, *warm, *cold)
    e.preflight = PreflightReport([
        Check("pagecache", "ok", "other", "weights resident", facts={"weights": {"resident": 1.0}}),
        Check("fit", "warn", "oom", "tight", facts={"fit": {"devices": 1}})])
    e.open(PROFILE)
    assert e.forecast is not None and e.forecast.total_s == 25.0, e.forecast  # the warm starts', as read
    assert e.forecast.fit_status == "warn"
    cold_e, _ = expectations(tmp_path / "c", *warm, *cold)
    cold_e.preflight = PreflightReport([Check("pagecache", "ok", "other", "cold",
                                              facts={"weights": {"resident": 0.0}})])
    cold_e.open(PROFILE)
    assert cold_e.forecast is not None and cold_e.forecast.total_s == 250.0 and cold_e.forecast.fit_status is None


def test_the_eta_and_the_budgets_are_those_of_this_starts_type_only(tmp_path: Path):
    warm = [_summary(s, "warm_page_cache") for s in (10.0, 11.0, 12.0, 13.0)]
    cold = [_summary(s, "cold") for s in (100.0, 110.0, 120.0, 130.0)]
    e, said = expectations(tmp_path, *warm, *cold)
    e.weights = WeightsTotal(1000.0, bytes=8 << 30, files=4, path="/models/m", resident=0)
    e.open(PROFILE)
    assert e.expected_total_s == 115.0 and e.eta is not None  # the cold starts' median, not all eight's
    assert e.budgets is not None and e.budgets.start_type == "cold" and e.budgets.starts == 4
    loading = e.budgets.get("weights_loading")
    assert loading is not None and loading.median_s == 69.0  # 0.6 x 115: never a warm start's 7 s
    assert any("cold" in m for m in said), said


def test_a_command_that_attaches_its_weights_is_an_attached_start_whatever_the_page_cache():
    cfg = Config(command=[*COMMAND, "--load-format", "ipc_cache"], engine="vllm", history=HistoryConfig(enabled=False))
    e = Expectations(cfg, settings.plan(cfg, PROFILE, redactor=Redactor()), lambda _: None)
    e.weights = WeightsTotal(1000.0, bytes=8 << 30, files=4, path="/models/m", resident=0)
    assert e.predicted_type(PROFILE) == "attached"
    plain, _ = expectations(Path("/nonexistent"), enabled=False)
    assert plain.predicted_type(PROFILE) is None  # no weights known, nothing attached: no type yet


def test_with_no_earlier_start_the_forecast_reads_the_weights_bytes_at_the_rate_kept_for_their_filesystem(
        tmp_path: Path):
    """The command's local model folder names the filesystem whose read rate the history keeps (``preflight
    --disk``); a command whose model is not on this machine has no rate to forecast from."""
    model = tmp_path / "model"
    model.mkdir()
    cfg = Config(command=["vllm", "serve", str(model), "--port", "8000"], engine="vllm",
                 history=HistoryConfig(path=tmp_path / "h.sqlite3"))
    with History(tmp_path / "h.sqlite3") as h:
        h.record_disk({"device": device_id(model), "mount": "/", "fstype": "ext4", "rate": 1.0e9, "bytes": 1 << 30,
                       "measured_at": 1.0})
    weights = {"weights": {"weights_bytes": 8_000_000_000, "uncached_bytes": 4_000_000_000, "resident": 0.5}}
    e = Expectations(cfg, settings.plan(cfg, PROFILE, redactor=Redactor()), lambda _: None,
                     preflight=PreflightReport([Check("pagecache", "ok", "other", "half", facts=weights)]))
    e.open(PROFILE)
    assert e.forecast is not None and e.forecast.phases == {"weights_loading": 4.0}, e.forecast
    remote, _ = expectations(tmp_path / "remote")  # /models/m: not on this machine
    remote.preflight = e.preflight
    remote.open(PROFILE)
    assert remote.forecast is not None and not remote.forecast.phases


def test_an_attaching_commands_forecast_is_of_the_attached_starts_before_the_page_cache_is_read(tmp_path: Path):
    attached = [_summary(s, "attached") for s in (5.0, 7.0)]
    cold = [_summary(s, "cold") for s in (200.0, 300.0)]
    cfg = Config(command=[*COMMAND, "--load-format", "ipc_cache"], engine="vllm",
                 history=HistoryConfig(path=tmp_path / "h.sqlite3"))
    e = Expectations(cfg, settings.plan(cfg, PROFILE, redactor=Redactor()), lambda _: None)
    with History(tmp_path / "h.sqlite3") as h:
        for summary in (*attached, *cold):
            h.record_run("up", summary, e.key(PROFILE))
    e.open(PROFILE)
    assert e.forecast is not None and e.forecast.total_s == 6.0, e.forecast
    plain, _ = expectations(tmp_path / "plain")
    assert plain.key(PROFILE) != e.key(PROFILE)  # the deployment key reads the command's own flags


def test_the_graded_forecast_sets_each_phase_beside_what_the_anatomy_measured(tmp_path: Path):
    e, _ = expectations(tmp_path, _summary(100.0), _summary(100.0))
    e.open(PROFILE)
    anatomy = {"phases": [{"name": "weights_loading", "seconds": 90.0}, {"name": "cuda_graph", "seconds": 40.0}]}
    graded = e.graded_forecast(RunResult(READY, "ready", 1000.0, 1130.0, "vllm", "http://x", cold_start_s=130.0,
                                         anatomy=anatomy))
    assert graded is not None
    assert graded["graded"]["phases"]["weights_loading"]["actual_s"] == 90.0
    assert graded["graded"]["total"]["error_s"] == 30.0


def test_no_known_answer_is_asked_of_a_history_not_opened_or_without_one_for_this_request(tmp_path: Path):
    e, _ = expectations(tmp_path)
    assert e.history is None and e.known_answer(PROFILE, AnswerTracker(), 1.0) is None  # before open
    e.open(PROFILE)
    assert e.known_answer(PROFILE, AnswerTracker(), 1.0) is None  # none recorded for this request


def test_a_history_that_fails_when_asked_is_no_history_for_the_eta_and_the_known_answer(tmp_path: Path):
    e, said = expectations(tmp_path, _summary(100.0))
    e.open(PROFILE)
    assert e.history is not None and e.expected_total_s == 100.0
    told = list(said)
    with sqlite3.connect(tmp_path / "h.sqlite3") as con:  # its tables gone under the open history
        con.execute("DROP TABLE runs")
    e.look(PROFILE)
    assert e.expected_total_s == 100.0 and said == told  # what it said before stands; nothing new is said
    assert e.known_answer(PROFILE, AnswerTracker(), 1.0) is None
