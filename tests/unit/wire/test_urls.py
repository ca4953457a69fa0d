"""A base URL's query goes after each request's path (issue 32): ``http://h:p/?api_key=K`` probed
``/?api_key=K/v1/models``."""

from __future__ import annotations

import httpx
import pytest

from firstlight.wire import Wire, join_url
from firstlight.wire.urls import normalise_url, split_query, split_url


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

    with Wire("http://127.0.0.1:9/base/?api_key=K", connect_timeout=1.0,
              transport_=httpx.MockTransport(answer)) as wire:
        wire.get("/v1/models", read_timeout=1)
        wire.post_json("/v1/completions", {}, read_timeout=1)
    assert seen == ["http://127.0.0.1:9/base/v1/models?api_key=K", "http://127.0.0.1:9/base/v1/completions?api_key=K"]


@pytest.mark.parametrize(("url", "host_port"), [
    ("http://h", ("h", 80)), ("https://h/x", ("h", 443)), ("h:8000", ("h", 8000)), ("https://h:8443", ("h", 8443)),
    ("http://[::1]:8000/v1", ("::1", 8000)),
])
def test_a_urls_host_and_port_default_to_its_schemes(url: str, host_port: tuple[str, int]):
    assert split_url(url) == host_port


@pytest.mark.parametrize(("url", "error"), [
    ("ftp://h", "not an http(s) URL: 'ftp://h'"),
    ("http://:8000", "no host in URL: 'http://:8000'"),
    ("http://h:99999", "bad port in URL: 'http://h:99999'"),
    ("http://h:0", "port 0 in URL 'http://h:0': give the port the server listens on"),
])
def test_a_bad_url_is_refused_in_words(url: str, error: str):
    with pytest.raises(ValueError) as e:
        split_url(url)
    assert str(e.value) == error


@pytest.mark.parametrize(("url", "normal"), [
    ("https://h:8443/v1", "https://h:8443"),  # a scheme given is kept
    ("h:8000/v1/", "http://h:8000"),
    ("http://h/apiX/", "http://h/apiX"),  # only slashes come off the end
    ("http://h/v1?api-version=2", "http://h?api-version=2"),
])
def test_a_url_is_normalised_to_the_servers_root(url: str, normal: str):
    assert normalise_url(url) == normal


def test_a_path_joins_after_the_bases_own_path():
    assert join_url("http://h/X?k=1", "/v1/models") == "http://h/X/v1/models?k=1"
    assert join_url("http://h/", "/health") == "http://h/health"
