"""The history's known answer (``History.known_answer``): of a deployment's good starts that recorded an answer to
the same request, the newest re-recorded one, else the earliest recorded; a failed run, a check, another request,
another deployment or a damaged summary is never the reference."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from firstlight.history import DeploymentKey, History

KEY = DeploymentKey.create("llama.cpp", "/m/model.gguf", ["llama-server", "-m", "/m/model.gguf"])
OTHER = DeploymentKey.create("llama.cpp", "/m/other.gguf", ["llama-server", "-m", "/m/other.gguf"])


def _answer(text: str, request: str = "req") -> dict:
    return {"text": text, "tokens": [text], "logprobs": [-0.5], "request": request}


def _run(h: History, outcome: str, text: str, *, verdict: str = "ready", request: str = "req",
         key: DeploymentKey = KEY) -> int:
    summary = {"verdict": verdict, "known_answer": {"mode": "check", "outcome": outcome,
                                                     "answer": _answer(text, request)}}
    return h.record_run("up", summary, key)


def test_the_earliest_recorded_answer_is_the_reference(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        assert h.known_answer(KEY, "req") is None
        first = _run(h, "recorded", "A")
        _run(h, "recorded", "B")
        _run(h, "same", "C")
        found = h.known_answer(KEY, "req")
        assert found is not None and found[0] == first and found[2] == _answer("A")


def test_the_newest_re_recorded_answer_wins(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        _run(h, "recorded", "A")
        _run(h, "re-recorded", "B")
        newest = _run(h, "re-recorded", "C")
        _run(h, "recorded", "D")
        found = h.known_answer(KEY, "req")
        assert found is not None and found[0] == newest and found[2]["text"] == "C"


def test_failed_runs_checks_other_requests_and_other_deployments_are_no_reference(tmp_path: Path):
    with History(tmp_path / "h.sqlite3") as h:
        _run(h, "recorded", "A", verdict="failed")
        _run(h, "different", "B")
        _run(h, "same", "C")
        _run(h, "recorded", "D", request="another")
        _run(h, "recorded", "E", key=OTHER)
        assert h.known_answer(KEY, "req") is None
        assert h.known_answer(KEY, "another") is not None
        assert h.known_answer(OTHER, "req") is not None


def test_a_damaged_summary_is_skipped_not_an_error(tmp_path: Path):
    path = tmp_path / "h.sqlite3"
    with History(path) as h:
        damaged = _run(h, "recorded", "A")
        good = _run(h, "recorded", "B")
    con = sqlite3.connect(path)
    con.execute("UPDATE runs SET summary = '{not json' WHERE id = ?", (damaged,))
    con.commit()
    con.close()
    with History(path) as h:
        found = h.known_answer(KEY, "req")
        assert found is not None and found[0] == good
