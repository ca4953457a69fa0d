"""The known answer's comparison rule (``firstlight.answers``): the same tokens with log-probabilities within the
tolerance is the same answer; a different token, a different count or a log-probability beyond the tolerance is
another; without log-probabilities the tokens decide, without tokens the text."""

from __future__ import annotations

import pytest

from firstlight.answers import (
    LOGPROB_TOLERANCE,
    answer_dict,
    compare,
    known_from,
    request_fingerprint,
    shown,
)
from firstlight.config import ProbeConfig
from firstlight.timeline import KnownAnswer, Level, Probe

TOKENS = (" Paris", ".", " It", " is")
LOGPROBS = (-0.05, -1.2, -0.7, -0.3)


def _known(tokens: tuple[str, ...] = TOKENS, logprobs: tuple[float, ...] = LOGPROBS,
           text: str | None = " Paris. It is") -> KnownAnswer:
    return KnownAnswer(1.0, run=3, text=text, tokens=tokens, logprobs=logprobs, request="r")


def _answer(tokens: tuple[str, ...] = TOKENS, logprobs: tuple[float, ...] = LOGPROBS,
            text: str | None = " Paris. It is") -> Probe:
    return Probe(2.0, Level.GENERATION, True, "POST", text=text, tokens=tokens, logprobs=logprobs)


def test_the_same_tokens_with_the_same_logprobs_are_the_same_answer():
    c = compare(_known(), _answer())
    assert c.same and c.by == "logprobs"


def test_logprobs_within_the_tolerance_are_the_same_answer():
    moved = tuple(x - LOGPROB_TOLERANCE * 0.99 for x in LOGPROBS)
    assert compare(_known(), _answer(logprobs=moved)).same


def test_a_logprob_beyond_the_tolerance_is_another_answer():
    moved = (LOGPROBS[0], LOGPROBS[1] - LOGPROB_TOLERANCE * 1.01, *LOGPROBS[2:])
    c = compare(_known(), _answer(logprobs=moved))
    assert not c.same and c.by == "logprobs"
    assert "token 2 ('.')" in c.why and f"tolerance of {LOGPROB_TOLERANCE:g}" in c.why


def test_the_tolerance_is_a_tenth_of_a_nat():
    assert LOGPROB_TOLERANCE == 0.1  # docs/history.md states it


def test_a_different_token_is_another_answer_whatever_the_logprobs():
    c = compare(_known(), _answer(tokens=(" Paris", ",", " It", " is")))
    assert not c.same and c.by == "tokens" and "token 2 is ','" in c.why


def test_fewer_tokens_are_another_answer():
    c = compare(_known(), _answer(tokens=TOKENS[:3], logprobs=LOGPROBS[:3]))
    assert not c.same and "3 tokens, were 4" in c.why


def test_an_engine_without_logprobs_is_compared_by_its_tokens():
    assert compare(_known(), _answer(logprobs=())).by == "tokens"
    assert compare(_known(logprobs=()), _answer()).same
    assert not compare(_known(logprobs=()), _answer(tokens=(" Lyon", ".", " It", " is"))).same


@pytest.mark.parametrize("known_tokens, answer_tokens", [((), TOKENS), (TOKENS, ()), ((), ())])
def test_without_tokens_on_either_side_the_text_decides(known_tokens, answer_tokens):
    same = compare(_known(tokens=known_tokens, logprobs=()), _answer(tokens=answer_tokens, logprobs=()))
    assert same.same and same.by == "text"
    other = compare(_known(tokens=known_tokens, logprobs=()),
                    _answer(tokens=answer_tokens, logprobs=(), text=" Lyon"))
    assert not other.same and other.by == "text" and "' Lyon'" in other.why


def test_an_answer_reads_back_as_the_known_answer_it_was():
    p = _answer()
    k = known_from(7, 5.0, answer_dict(p, "abc"), 9.0)
    assert k == KnownAnswer(9.0, run=7, recorded_at=5.0, text=p.text, tokens=TOKENS, logprobs=LOGPROBS,
                            request="abc")


@pytest.mark.parametrize("damaged", [
    None, [], {"text": 3, "tokens": [], "logprobs": []}, {"text": "a", "tokens": "a", "logprobs": []},
    {"text": "a", "tokens": [1], "logprobs": []}, {"text": "a", "tokens": ["a"], "logprobs": [True]},
    {"text": "a", "tokens": ["a", "b"], "logprobs": [-1.0]}, {"text": "a", "tokens": ["a"], "logprobs": None},
])
def test_a_damaged_stored_answer_is_no_reference(damaged):
    assert known_from(1, 1.0, damaged, 2.0) is None


def test_the_request_fingerprint_changes_with_what_is_asked_and_hides_the_prompt():
    base = ProbeConfig(prompt="secret prompt words")
    fp = request_fingerprint(base)
    assert "secret" not in fp and fp == request_fingerprint(ProbeConfig(prompt="secret prompt words"))
    for other in (ProbeConfig(prompt="another"), ProbeConfig(prompt="secret prompt words", max_tokens=9),
                  ProbeConfig(prompt="secret prompt words", api="chat"),
                  ProbeConfig(prompt="secret prompt words", model="m")):
        assert request_fingerprint(other) != fp
    assert request_fingerprint(base) == request_fingerprint(ProbeConfig(prompt="secret prompt words",
                                                                        url="http://127.0.0.1:9"))


def test_an_answer_is_shown_with_its_tokens_and_logprobs_else_its_text():
    assert shown("x", TOKENS, LOGPROBS).startswith("tokens [' Paris' -0.0500, '.' -1.2000")
    assert shown("x", TOKENS, ()) == "tokens [' Paris', '.', ' It', ' is']"
    assert shown(" Paris", (), ()) == "text ' Paris'"
    assert shown("x", ("a",) * 20, ()).endswith(", … 4 more]")
