"""A member's /readyz body is another program's text: every word of it printable and bounded, every number a
bounded number, before it reaches the leader's console, its /readyz and its JSON events."""

from __future__ import annotations

import json

import pytest

from firstlight.group import MAX_EVIDENCE, member_from_body

HOSTILE = "\x1b]0;owned\x07\x1b[31mred\u202eevil\nnext line"


def test_a_members_words_are_made_printable() -> None:
    body = {"verdict": HOSTILE, "phase": HOSTILE, "role": HOSTILE, "node_rank": 1,
            "evidence": [{"signal": HOSTILE, "value": HOSTILE, "since": 5.0}],
            "serving": {"state": HOSTILE, "evidence": [{"value": HOSTILE}]}}
    m = member_from_body("http://10.0.0.2:8081", 200, body)
    shown = json.dumps(m.to_dict(), ensure_ascii=False) + " ".join(map(str, (m.verdict, m.phase, m.role, m.serving)))
    for bad in ("\x1b", "\u202e", "\x07", "\n"):
        assert bad not in shown, repr(bad)
    assert m.verdict == m.phase == m.role == "redevil next line"  # escapes (a title, a colour) gone, words kept
    assert m.evidence[-1]["since"] == 5.0


@pytest.mark.parametrize("value", [int("9" * 400), 1e400, "12", True])
def test_a_members_progress_time_that_is_no_number_is_none(value: object) -> None:
    assert member_from_body("http://m", 200, {"verdict": "starting", "last_progress_at": value}).last_progress_at \
        is None


def test_a_members_numbers_in_its_evidence_are_bounded_and_its_entries_few() -> None:
    evidence = [{"value": "x", "since": int("9" * 400), "n": [1]}] * (MAX_EVIDENCE + 5)
    m = member_from_body("http://m", 200, {"verdict": "hung", "evidence": evidence, "node_rank": int("9" * 400)})
    assert len(m.evidence) == MAX_EVIDENCE and m.evidence[0] == {"value": "x", "since": None, "n": None}
    assert m.node_rank is None
    json.dumps(m.to_dict())  # no value JSON cannot write
