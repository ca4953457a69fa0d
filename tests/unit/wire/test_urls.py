"""A base URL's query goes after each request's path (issue 32): ``http://h:p/?api_key=K`` probed
``/?api_key=K/v1/models``."""

from __future__ import annotations

import httpx

from firstlight.wire import Wire, join_url
from firstlight.wire.urls import split_query


def test_a_path_goes_before_the_base_query():
    assert join_url("http://h:1/?api_key=K", "/v1/models") == "http://h:1/v1/models?api_key=K"
    assert join_url("http://h:1/api?a=1&b=2", "/health") == "http://h:1/api/health?a=1&b=2"
    assert join_url("http://h:1", "/health") == "http://h:1/health"
    assert split_query("http://h:1/x?k=v") == ("http://h:1/x", "k=v")


def test_every_wire_request_carries_the_path_then_the_query():
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={})

    with Wire("http://127.0.0.1:9/base/?api_key=K", transport_=httpx.MockTransport(answer)) as wire:
        wire.get("/v1/models", read_timeout=1)
        wire.post_json("/v1/completions", {}, read_timeout=1)
    assert seen == ["http://127.0.0.1:9/base/v1/models?api_key=K", "http://127.0.0.1:9/base/v1/completions?api_key=K"]
