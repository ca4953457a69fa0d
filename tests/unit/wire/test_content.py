"""What a server said, read once for everybody (``firstlight.wire.content``): each parser at its edges. Pure
functions over bytes and JSON, so every shape a server can send is a table row here; the socket-level behaviour
is in test_wire.py and test_ladder*.py. Written to kill the mutants scripts/mutation.sh found surviving."""

from __future__ import annotations

from typing import Any

import pytest

from firstlight.wire.content import (
    MAX_ANSWER_TOKENS,
    MAX_MODEL_ID,
    LineTooLong,
    NotJSON,
    SSELines,
    answer_tokens,
    chunk_text,
    clean_text,
    generated_text,
    model_ids,
    parse_json,
    says_unhealthy,
    snippet,
)
from tests.support.faults import NESTED_JSON


# -- parse_json: only NotJSON, with a one-line reason ---------------------------------------------------------
def test_parse_json_reads_json_and_says_why_not():
    assert parse_json(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert parse_json('"x"') == "x"
    with pytest.raises(NotJSON, match=r"^Expecting value"):
        parse_json(b"<html>")
    with pytest.raises(NotJSON) as e:
        parse_json(b"\xff\xfe{}")  # not UTF-8
    assert str(e.value)
    with pytest.raises(NotJSON) as e:
        parse_json(None)  # type: ignore[arg-type]
    assert "NoneType" in str(e.value)
    with pytest.raises(NotJSON) as e:
        parse_json(type("T" * 300, (), {})())  # a reason longer than a line: clipped to 120
    assert len(str(e.value)) == 120 and str(e.value).endswith("TTT")


def test_deeply_nested_json_is_not_json_with_its_reason():
    with pytest.raises(NotJSON) as e:
        parse_json(NESTED_JSON)
    assert str(e.value) == "JSON nested too deeply"


# -- clean_text and snippet: one clean line, clipped with "…" -------------------------------------------------
def test_clean_text_strips_escapes_and_controls_and_turns_newlines_into_spaces():
    assert clean_text("\x1b[31mred\x1b[0m\tand\nblue\x07\x7f\u202e!") == "red and blue!"
    assert clean_text("a\n\n\tb") == "a b"


@pytest.mark.parametrize("text, limit, out", [
    ("abcde", 5, "abcde"),  # exactly the limit: not clipped
    ("abcdef", 5, "abcde…"),  # one over
    ("ab" + "\x00" * 83, 5, "ab…"),  # short once cleaned, but longer than the 5 * 4 + 64 characters read
    ("ab" + "\x00" * 82, 5, "ab"),  # exactly the characters read: cleaned whole, not clipped
])
def test_clean_text_clips_at_its_limit(text: str, limit: int, out: str):
    assert clean_text(text, limit) == out


def test_clean_text_defaults_to_200_characters():
    assert clean_text("x" * 200) == "x" * 200
    assert clean_text("x" * 201) == "x" * 200 + "…"


@pytest.mark.parametrize("body, out", [
    (b"  hello \n", "hello"),
    (b"a" * 160, "a" * 160),  # the default limit, exactly
    (b"a" * 161, "a" * 160 + "…"),
    (b"ok" + b"\x00" * 703, "ok…"),  # longer than the 160 * 4 + 64 bytes read: said so
    (b"ok" + b"\x00" * 702, "ok"),  # exactly the bytes read: the whole body, cleaned
    (b"a" * 1000, "a" * 160 + "…"),  # clipped and longer than read: one "…", not two
    (b"caf\xc3\xa9 \xff", "café \ufffd"),  # invalid UTF-8 is replaced, never an error
])
def test_snippet_is_the_start_of_a_body_as_one_clean_line(body: bytes, out: str):
    assert snippet(body) == out


def test_snippet_takes_a_limit():
    assert snippet(b"abcdefgh", 4) == "abcd…"
    assert snippet(b"abcd", 4) == "abcd"


# -- model_ids: the one model-list parser --------------------------------------------------------------------
@pytest.mark.parametrize("data, ids", [
    ({"data": [{"id": "m1"}, {"id": "m2"}]}, ["m1", "m2"]),  # OpenAI
    ({"models": [{"name": "m1"}, {"model": "m2"}]}, ["m1", "m2"]),  # Ollama, llama.cpp
    ({"data": [{"id": "", "name": "n"}]}, ["n"]),  # an empty id: the next key
    ({"data": [{"id": "  "}, {"id": 5}, "m", None, {"id": "ok"}]}, ["ok"]),  # blank, not text, not an entry
    ({"data": [{"id": "x" * MAX_MODEL_ID}]}, ["x" * MAX_MODEL_ID]),
    ({"data": [{"id": "x" * (MAX_MODEL_ID + 1)}]}, []),  # too long to be a name
    ({"data": []}, []),
    ({"data": {"id": "m"}}, None),  # not a list
    ({"object": "list"}, None),
    ([{"id": "m"}], None),
    ("m", None),
])
def test_model_ids(data: Any, ids: list[str] | None):
    assert model_ids(data) == ids


@pytest.mark.parametrize("data, unhealthy", [
    ({"status": "ok"}, False), ({"status": "healthy"}, False), ({"status": "Loading"}, True),
    ({"status": "UNHEALTHY"}, True), ({"status": "not_ready"}, True), ({"status": "error"}, True),
    ({"status": 503}, False), ({}, False), (["loading"], False), ("loading", False),
])
def test_says_unhealthy(data: Any, unhealthy: bool):
    assert says_unhealthy(data) is unhealthy


# -- generated_text: the text of a completion, or why there is none ------------------------------------------
@pytest.mark.parametrize("data, chat, out", [
    ({"choices": [{"text": " Paris"}]}, False, (" Paris", None)),
    ({"choices": [{"message": {"content": " Paris"}}]}, True, (" Paris", None)),
    ({"choices": [{"message": {"content": None, "reasoning_content": "think"}}]}, True, ("think", None)),
    ({"choices": [{"message": {"content": "", "reasoning": "hmm"}}]}, True, ("hmm", None)),
    ({"choices": [{"text": " \n\t"}]}, False, (" \n\t", "an empty completion")),
    ({"choices": [{"message": {"content": "\n"}}]}, True, ("\n", "an empty completion")),
    ({"choices": [{"text": 5}]}, False, (None, "no text in the first choice")),
    ({"choices": [{"message": "Paris"}]}, True, (None, "no text in the first choice")),
    ({"choices": [{"message": {"content": " Paris"}}]}, False, (None, "no text in the first choice")),
    ({"choices": [{"text": " Paris"}]}, True, (None, "no text in the first choice")),
    ({"choices": []}, False, (None, "no choices in the answer")),
    ({"choices": ["Paris"]}, False, (None, "no choices in the answer")),
    ({"choices": {"text": "x"}}, False, (None, "no choices in the answer")),
    ({"text": "x"}, False, (None, "no choices in the answer")),
    (["x"], False, (None, "not a JSON object")),
    (None, True, (None, "not a JSON object")),
])
def test_generated_text(data: Any, chat: bool, out: tuple[str | None, str | None]):
    assert generated_text(data, chat) == out


@pytest.mark.parametrize("obj, chat, text", [
    ({"choices": [{"text": "Par"}]}, False, "Par"),
    ({"choices": [{"delta": {"content": "Par"}}]}, True, "Par"),
    ({"choices": [{"delta": {"content": None, "reasoning_content": "th"}}]}, True, "th"),
    ({"choices": [{"delta": {"reasoning": "hm"}}]}, True, "hm"),
    ({"choices": [{"delta": {"role": "assistant"}}]}, True, ""),
    ({"choices": [{"delta": "Par"}]}, True, ""),
    ({"choices": [{"delta": {"content": 7}}]}, True, ""),
    ({"choices": [{"text": None}]}, False, ""),
    ({"choices": [{"delta": {"content": "x"}}]}, False, ""),
    ({"choices": [{"text": "x"}]}, True, ""),
    ({"choices": []}, False, ""),  # the usage chunk
    ({"choices": ["x"]}, False, ""),
    ({"choices": "x"}, True, ""),
    ({}, True, ""),
    ("data", False, ""),
])
def test_chunk_text(obj: Any, chat: bool, text: str):
    assert chunk_text(obj, chat) == text


# -- SSELines: event-stream lines, the pending one capped -------------------------------------------------------
def test_sse_lines_split_on_lf_and_crlf_across_chunks():
    s = SSELines()
    assert s.feed(b"data: a") == []
    assert s.feed(b"bc\r\ndata: d\n\nda") == ["data: abc", "data: d", ""]
    assert s.feed(b"ta: \xffe\n") == ["data: \ufffde"]  # invalid UTF-8 replaced
    assert s.feed(b"data: XX  \r\n") == ["data: XX  "]  # only the CR goes, never spaces or text
    assert s.feed(b"data: XX\r\n") == ["data: XX"]
    assert s.flush() == []
    assert s.feed(b"tail \r") == []
    assert s.flush() == ["tail "]  # only the CR goes
    assert s.feed(b"\xffX\r") == []
    assert s.flush() == ["\ufffdX"]
    assert s.flush() == []


def test_sse_pending_line_is_capped_at_its_limit_exactly():
    s = SSELines(max_line=8)
    assert s.feed(b"12345678") == []  # at the limit: still a line in the making
    with pytest.raises(LineTooLong, match="longer than 8 bytes"):
        s.feed(b"9")
    s = SSELines(max_line=8)
    assert s.feed(b"ab\n12345678") == ["ab"]  # what follows the last newline counts, not the chunk
    with pytest.raises(LineTooLong):
        s.feed(b"x\n" + b"y" * 9)


# -- answer_tokens: the tokens of an answer and their log-probabilities (the known answer) ------------------------


def test_answer_tokens_reads_the_completions_shape_of_vllm():
    data = {"choices": [{"text": " Paris.", "logprobs": {"tokens": [" Paris", "."], "token_logprobs": [-0.1, -2],
                                                          "top_logprobs": [{}, {}], "text_offset": [0, 6]}}]}
    assert answer_tokens(data) == ((" Paris", "."), (-0.1, -2.0))


def test_answer_tokens_reads_the_content_shape_of_chat_and_of_llama_cpp():
    data = {"choices": [{"text": " Paris.", "logprobs": {"content": [
        {"id": 1, "token": " Paris", "bytes": [32], "logprob": -0.25, "top_logprobs": []},
        {"id": 2, "token": ".", "bytes": [46], "logprob": -1.5, "top_logprobs": []}]}}]}
    assert answer_tokens(data) == ((" Paris", "."), (-0.25, -1.5))


def test_answer_tokens_keeps_the_tokens_without_logprobs_unless_every_token_has_a_finite_one():
    def shape(values):
        return {"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": values}}]}
    assert answer_tokens(shape([-1.0, None])) == (("a", "b"), ())
    assert answer_tokens(shape([-1.0, True])) == (("a", "b"), ())
    assert answer_tokens(shape([-1.0])) == (("a", "b"), ())
    assert answer_tokens(shape(None)) == (("a", "b"), ())
    assert answer_tokens(shape([-1.0, float("nan")])) == (("a", "b"), ())
    assert answer_tokens(shape([-1, 0])) == (("a", "b"), (-1.0, 0.0))


def test_answer_tokens_is_empty_for_an_answer_without_them():
    for data in (None, [], {}, {"choices": []}, {"choices": ["x"]}, {"choices": [{"text": "x"}]},
                 {"choices": [{"logprobs": None}]}, {"choices": [{"logprobs": {"tokens": "ab"}}]},
                 {"choices": [{"logprobs": {"tokens": ["a", 3], "token_logprobs": [0, 0]}}]},
                 {"choices": [{"logprobs": {"content": [{"token": "a", "logprob": 0}, "b"]}}]},
                 {"choices": [{"logprobs": {"tokens": []}}]}):
        assert answer_tokens(data) == ((), ()), data


def test_answer_tokens_reads_at_most_its_cap():
    n = MAX_ANSWER_TOKENS + 5
    tokens, logprobs = answer_tokens({"choices": [{"logprobs": {"tokens": ["t"] * n, "token_logprobs": [0.0] * n}}]})
    assert len(tokens) == len(logprobs) == MAX_ANSWER_TOKENS
