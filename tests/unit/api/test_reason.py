"""``firstlight.api.reason``: the one line ``NotReady`` and the pytest plugin say. Before this file only the
subprocess tests reached it (the mutation run listed its 37 mutants as "no tests"): here, in process, each part
of the line: the verdict, the failure category (not "none"), the first evidence value, else the detail, the phase
unless the evidence names it, the hint, and one line whatever the evidence quotes."""

from __future__ import annotations

from typing import Any

from firstlight.api import reason
from firstlight.result import RunResult


def result(**kw: Any) -> RunResult:
    base: dict[str, Any] = {"verdict": "failed", "phase": "weights_loading", "started_at": 0.0, "ended_at": 1.0,
                            "engine": "vllm", "url": "http://127.0.0.1:1"}
    return RunResult(**{**base, **kw})


def test_the_verdict_category_first_evidence_phase_and_hint():
    r = result(failure="oom", hint="load less", evidence=(
        {"signal": "log", "value": ""}, {"signal": "log", "value": "CUDA out of memory"},
        {"signal": "gpu", "value": "second"}))
    assert reason(r) == "failed (oom) in phase weights_loading: CUDA out of memory; hint: load less"


def test_no_category_when_it_is_none_and_the_detail_when_there_is_no_evidence():
    assert reason(result(failure="none", detail="the server exited")) == (
        "failed in phase weights_loading: the server exited")
    assert reason(result(verdict="hung")) == "hung in phase weights_loading"


def test_the_phase_is_not_repeated_when_the_evidence_names_it():
    r = result(verdict="hung", evidence=({"signal": "log", "value": "no progress in phase weights_loading"},))
    assert reason(r) == "hung: no progress in phase weights_loading"


def test_it_is_one_line_whatever_the_evidence_quotes():
    r = result(evidence=({"signal": "log", "value": "Traceback:\n  File x\n\tboom"},))
    assert reason(r) == "failed in phase weights_loading: Traceback: File x boom"
