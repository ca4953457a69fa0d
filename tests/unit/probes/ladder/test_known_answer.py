"""The generation rung and the known answer, against a real socket: asked with ``logprobs`` (the completions API's
``logprobs: 1``, the chat API's ``logprobs: true, top_logprobs: 1``) only when the known answer wants them, the
answer's tokens and log-probabilities in the probe; an engine that refuses the field (400 or 422) asked again
without it, once, and never again this run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from firstlight.config import ProbeConfig
from firstlight.probes.ladder import Ladder
from firstlight.timeline import Level
from tests.support.faults import serving

COMPLETION = {"choices": [{"text": " Paris.", "logprobs": {"tokens": [" Paris", "."], "token_logprobs": [-0.1, -1.0]}}]}
CHAT = {"choices": [{"message": {"role": "assistant", "content": "Paris"},
                     "logprobs": {"content": [{"token": "Paris", "logprob": -0.2, "top_logprobs": []}]}}]}


@contextmanager
def engine(refuse: int | None = None) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A server that answers every generation, keeps each request's body, and refuses ``logprobs`` with ``refuse``."""
    bodies: list[dict[str, Any]] = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            bodies.append(body)
            status, answer = 200, CHAT if "chat" in self.path else COMPLETION
            if refuse is not None and "logprobs" in body:
                status, answer = refuse, {"error": "unknown field logprobs"}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serving(H) as url:
        yield url, bodies


def _ladder(url: str, logprobs: bool, api: str = "completions") -> Ladder:
    return Ladder(ProbeConfig(url=url, api=api, model="m", connect_timeout=0.5, read_timeout=0.5,
                              generation_timeout=5.0), logprobs=logprobs)


def test_the_completions_api_is_asked_for_logprobs_and_the_probe_carries_them():
    with engine() as (url, bodies), _ladder(url, True) as ladder:
        p = ladder.generate()
    assert p.ok and p.tokens == (" Paris", ".") and p.logprobs == (-0.1, -1.0)
    assert bodies[0]["logprobs"] == 1 and bodies[0]["temperature"] == 0


def test_the_chat_api_is_asked_for_logprobs_in_its_own_words():
    with engine() as (url, bodies), _ladder(url, True, "chat") as ladder:
        p = ladder.generate()
    assert p.ok and p.tokens == ("Paris",) and p.logprobs == (-0.2,)
    assert bodies[0]["logprobs"] is True and bodies[0]["top_logprobs"] == 1


def test_without_the_known_answer_nothing_more_is_asked_nor_kept():
    with engine() as (url, bodies), _ladder(url, False) as ladder:
        p = ladder.generate()
    assert p.ok and p.tokens == () and p.logprobs == ()
    assert "logprobs" not in bodies[0] and "top_logprobs" not in bodies[0]


@pytest.mark.parametrize("status", [400, 422])
def test_an_engine_that_refuses_logprobs_is_asked_again_without_and_never_again(status: int):
    with engine(refuse=status) as (url, bodies), _ladder(url, True) as ladder:
        first = ladder.generate()
        second = ladder.generate()
        requests = ladder.requests["generation"]
    assert first.ok and first.level == Level.GENERATION and first.text == " Paris." and first.tokens == ()
    assert second.ok
    assert ["logprobs" in b for b in bodies] == [True, False, False]
    assert requests == 3


def test_another_refusal_is_not_retried():
    with engine(refuse=404) as (url, bodies), _ladder(url, True) as ladder:
        p = ladder.generate()
    assert not p.ok and p.status == 404 and len(bodies) == 1
