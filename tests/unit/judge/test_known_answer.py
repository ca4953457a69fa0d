"""The judge and the known answer: the first answer is compared with this deployment's known answer before READY; a
different one is failed ``wrong_answer`` with both answers and the difference as evidence and the hint that names
other weights; the same one is READY; with no known answer the first valid answer is READY as before. The timeline
(the known answer included) replays to the same verdict."""

from __future__ import annotations

from firstlight.answers import LOGPROB_TOLERANCE
from firstlight.judge import WRONG_ANSWER_HINT, Judge
from firstlight.timeline import KnownAnswer, Level, Observation, Probe, Started, from_dict
from firstlight.vocab import ALL_FAILURES, FAILED, READY, WRONG_ANSWER
from tests.support.judge import GENERIC, RULES, T0, ladder_up_to_models, run

TOKENS = (" Paris", ".")
LOGPROBS = (-0.05, -1.2)
KNOWN = KnownAnswer(T0 + 0.01, run=4, text=" Paris.", tokens=TOKENS, logprobs=LOGPROBS, request="r")


def _answer(t: float, tokens: tuple[str, ...] = TOKENS, logprobs: tuple[float, ...] = LOGPROBS,
            text: str = " Paris.") -> Probe:
    return Probe(T0 + t, Level.GENERATION, True, "POST /v1/completions -> 200", latency_s=0.1, text=text,
                 tokens=tokens, logprobs=logprobs)


def _start(*answers: Probe, known: KnownAnswer | None = KNOWN) -> list[Observation]:
    return [*([known] if known is not None else []), *ladder_up_to_models(1.0), *answers]


def test_the_known_answer_given_again_is_ready():
    a = run(_start(_answer(1.1)), 2.0)
    assert a.verdict == READY and a.failure is None


def test_a_different_token_is_failed_wrong_answer_with_both_answers_and_the_hint():
    a = run(_start(_answer(1.1, tokens=(" Lyon", "."), text=" Lyon.")), 2.0)
    assert a.verdict == FAILED and a.failure == WRONG_ANSWER and a.ready_at is None
    assert a.hint == WRONG_ANSWER_HINT
    for words in ("stale weight cache", "different checkpoint", "quantization change", "--known-answer record"):
        assert words in a.hint
    values = {e.signal: e.value for e in a.evidence}
    assert values["probe:generation"].startswith("answer now: tokens [' Lyon' -0.0500")
    assert values["history"].startswith("known answer (run 4): tokens [' Paris' -0.0500")
    assert values["known_answer"] == "token 1 is ' Lyon', was ' Paris'"
    assert a.detail == "not the known answer (tokens)"


def test_logprobs_beyond_the_tolerance_are_failed_wrong_answer():
    moved = (LOGPROBS[0] - 2 * LOGPROB_TOLERANCE, LOGPROBS[1])
    a = run(_start(_answer(1.1, logprobs=moved)), 2.0)
    assert a.verdict == FAILED and a.failure == WRONG_ANSWER and a.detail == "not the known answer (logprobs)"


def test_an_engine_without_logprobs_is_judged_on_its_text():
    known = KnownAnswer(T0, run=1, text=" Paris.", request="r")
    assert run(_start(_answer(1.1, tokens=(), logprobs=()), known=known), 2.0).verdict == READY
    a = run(_start(_answer(1.1, tokens=(), logprobs=(), text=" Rome."), known=known), 2.0)
    assert a.failure == WRONG_ANSWER and "the text is ' Rome.', was ' Paris.'" in a.evidence[-1].value


def test_without_a_known_answer_the_first_valid_answer_is_ready():
    assert run(_start(_answer(1.1, tokens=("x",)), known=None), 2.0).verdict == READY


def test_a_known_answer_after_ready_compares_nothing():
    a = run([*_start(_answer(1.1), known=None), KnownAnswer(T0 + 1.5, tokens=("x",), request="r")], 2.0)
    assert a.verdict == READY


def test_the_first_known_answer_is_the_one_compared_with():
    other = KnownAnswer(T0 + 0.02, run=9, text="x", tokens=("x",), request="r")
    assert run([KNOWN, other, *ladder_up_to_models(1.0), _answer(1.1)], 2.0).verdict == READY


def test_the_wrong_answer_is_final_and_a_later_right_one_does_not_make_it_ready():
    judge = Judge(RULES, GENERIC, T0)
    for obs in [Started(T0, 100, "http://x", "generic", True), *_start(_answer(1.1, tokens=(" Lyon", ".")))]:
        judge.feed(obs)
    assert judge.assess(T0 + 1.2).verdict == FAILED
    judge.feed(_answer(1.3))
    a = judge.assess(T0 + 2.0)
    assert a.verdict == FAILED and a.failure == WRONG_ANSWER and judge.ready_at is None


def test_the_wrong_answer_does_not_hold_the_generation_level():
    judge = Judge(RULES, GENERIC, T0)
    events = []
    for obs in [Started(T0, 100, "http://x", "generic", True), *_start(_answer(1.1, tokens=(" Lyon", ".")))]:
        events += judge.feed(obs)
    assert judge.ladder.level == Level.MODELS
    warnings = [e for e in events if e.type == "warning"]
    assert warnings and warnings[-1].data == {"category": WRONG_ANSWER}


def test_the_timeline_with_its_known_answer_replays_to_the_same_verdict():
    obs = _start(_answer(1.1, tokens=(" Lyon", ".")))
    replayed = [from_dict(o.to_dict()) for o in obs]
    assert replayed == obs
    assert run(replayed, 2.0).failure == WRONG_ANSWER


def test_wrong_answer_is_a_failure_category():
    assert WRONG_ANSWER == "wrong_answer" and WRONG_ANSWER in ALL_FAILURES
