"""The readiness ladder's rules as the README states them, each against a real HTTP server on a real socket."""

from __future__ import annotations

from typing import Any

from firstlight.config import ProbeConfig
from firstlight.probes.ladder import Ladder
from firstlight.timeline import Level
from tests.support.ladder_rules import BIG, server

OK_MODELS = (200, {"data": [{"id": "m"}]})


OK_GEN = (200, {"choices": [{"text": " Paris"}]})


def climb(url: str) -> list[Any]:
    with Ladder(ProbeConfig(url=url, connect_timeout=1, read_timeout=5, generation_timeout=5)) as ladder:
        return ladder.climb()


def test_a_200_whose_json_says_loading_is_not_healthy():
    with server({("GET", "/health"): (200, {"status": "loading"}), ("GET", "/v1/models"): OK_MODELS,
                 ("POST", "/v1/completions"): OK_GEN}) as (url, _):
        results = climb(url)
    health = [p for p in results if p.level == Level.HEALTH]
    assert health and not health[-1].ok and "loading" in health[-1].detail
    assert not any(p.level == Level.GENERATION for p in results)  # the ladder stops at the failed rung


def test_bodies_are_capped():
    with server({("GET", "/health"): (200, {"status": "ok"}), ("GET", "/v1/models"): (200, "BIG")}) as (url, sent):
        results = climb(url)
    models = [p for p in results if p.level == Level.MODELS]
    assert models and not models[-1].ok
    assert sent["bytes"] < BIG // 2, sent  # the client stopped reading near the cap, not at the end


def test_a_4xx_to_a_generation_is_definitive_and_a_5xx_is_not():
    base = {("GET", "/health"): (200, {"status": "ok"}), ("GET", "/v1/models"): OK_MODELS}
    with server({**base, ("POST", "/v1/completions"): (400, {"error": "model not found"})}) as (url, _):
        four = [p for p in climb(url) if p.level == Level.GENERATION][-1]
    with server({**base, ("POST", "/v1/completions"): (503, {"error": "loading"})}) as (url, _):
        five = [p for p in climb(url) if p.level == Level.GENERATION][-1]
    assert not four.ok and not four.transient
    assert not five.ok and five.transient
