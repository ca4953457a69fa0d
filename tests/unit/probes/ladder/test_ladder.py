
"""The readiness ladder against real sockets: each rung a checked fact, no request without a deadline."""

from __future__ import annotations

import time
from typing import Any

import pytest

from firstlight.config import ProbeConfig
from firstlight.engines import get_profile
from firstlight.probes.ladder import Ladder
from firstlight.sim.fixtures import free_port
from firstlight.timeline import Level
from tests.support.faults import fault_server
from tests.support.ladder_rules import server


def climb(url: str, **kw: object) -> list:
    cfg = ProbeConfig(url=url, connect_timeout=0.5, read_timeout=0.5, generation_timeout=1.0, **kw)  # type: ignore[arg-type]
    with Ladder(cfg) as ladder:
        return ladder.climb()


def held(results: list) -> Level:
    return max((p.level for p in results if p.ok), default=Level.NONE)


def test_a_good_server_reaches_generation_with_the_text():
    with fault_server("ok") as s:
        results = climb(s.url)
    assert held(results) == Level.GENERATION
    assert results[-1].text == " Paris"
    assert [p.level for p in results] == [Level.PORT, Level.HTTP, Level.HEALTH, Level.MODELS, Level.GENERATION]


def test_closed_port_stops_at_the_first_rung():
    results = climb(f"http://127.0.0.1:{free_port()}")
    assert [(p.level, p.ok) for p in results] == [(Level.PORT, False)]
    assert "refused" in results[0].detail


def test_health_and_models_200_but_generation_503_is_not_generation():
    with fault_server("models_only") as s:
        results = climb(s.url)
    assert held(results) == Level.MODELS
    assert results[-1].level == Level.GENERATION and not results[-1].ok and results[-1].transient


@pytest.mark.parametrize("mode", ["silent", "trickle"])
def test_a_server_that_never_finishes_answering_cannot_hold_a_probe(mode: str):
    with fault_server(mode) as s:
        t0 = time.monotonic()
        results = climb(s.url)
        took = time.monotonic() - t0
    assert held(results) < Level.GENERATION
    # Bounded by the configured timeouts (0.5 s read + 1 s generation + connect), not by the server (which holds a
    # request for ever, or trickles for 2000 s): a bound far above the timeouts, so a busy machine passes.
    assert took < 30.0


@pytest.mark.parametrize("mode, level", [("5xx", Level.HTTP), ("garbage", Level.PORT), ("not_json", Level.HEALTH)])
def test_garbage_and_errors_never_reach_generation(mode: str, level: Level):
    with fault_server(mode) as s:
        results = climb(s.url)
    assert held(results) == level
    assert not results[-1].ok


def test_an_empty_completion_is_a_definitive_bad_answer():
    with fault_server("empty") as s:
        results = climb(s.url)
    last = results[-1]
    assert last.level == Level.GENERATION and not last.ok and not last.transient
    assert "empty completion" in last.detail


def test_expect_regex_and_chat_api():
    with fault_server("ok") as s:
        ok = climb(s.url, api="chat", expect=r"Par")
        bad = climb(s.url, api="chat", expect=r"^London$")
        assert s.seen[-1]["path"] == "/v1/chat/completions"
    assert held(ok) == Level.GENERATION
    assert not bad[-1].ok and "does not match --expect" in bad[-1].detail and not bad[-1].transient


def test_api_key_is_sent_as_bearer_and_model_from_the_list():
    with fault_server("ok") as s:
        results = climb(s.url, api_key="sekrit-123")
        assert held(results) == Level.GENERATION
        assert {r["auth"] for r in s.seen} == {"Bearer sekrit-123"}
        posts = [r for r in s.seen if r["method"] == "POST"]
        assert posts and {r["model"] for r in posts} == {"m1"}  # the id /v1/models listed


def test_health_not_found_is_skipped_not_trusted():
    # A generic OpenAI server without /health: the rung is skipped, and READY still needs a generation.
    with fault_server("ok") as s:
        results = climb(s.url, health_path="/nope")
    health = next(p for p in results if p.level == Level.HEALTH)
    assert health.ok and "skipped" in health.detail
    assert held(results) == Level.GENERATION


def test_an_explicit_health_path_survives_the_engine_learnt_at_run_time():

    vllm = get_profile("vllm").endpoints
    explicit = ProbeConfig(url="http://127.0.0.1:1", health_path="/mine", explicit=frozenset({"health_path"}))
    default = ProbeConfig(url="http://127.0.0.1:1", health_path="/mine", models_path=None)
    with Ladder(explicit) as a, Ladder(default) as b:
        a.use_endpoints(vllm)
        b.use_endpoints(vllm)
        assert a.paths.health == "/mine" and a.paths.models == vllm.models  # the user's option wins
        assert b.paths.health == vllm.health and b.paths.models == vllm.models
    assert explicit.health_path == "/mine" and default.models_path is None  # configs untouched (frozen)


# -- probes/ladder.py: 408, 425 and 429 on generation are "not yet" -------------------------------------------
def _climb(url: str, **kw: Any) -> list[Any]:
    cfg = ProbeConfig(url=url, connect_timeout=0.5, read_timeout=1.0, generation_timeout=2.0, **kw)
    with Ladder(cfg) as ladder:
        return ladder.climb()


UP_TO_MODELS = {("GET", "/health"): (200, {"status": "ok"}), ("GET", "/v1/models"): (200, {"data": [{"id": "m"}]})}


@pytest.mark.parametrize("status", [408, 425, 429])
def test_a_busy_answer_on_generation_is_not_yet_never_a_definitive_no(status: int):
    routes = {**UP_TO_MODELS, ("POST", "/v1/completions"): (status, {"error": "busy"})}
    with server(routes) as (url, _):
        last = _climb(url)[-1]
    assert last.level == Level.GENERATION and not last.ok and last.status == status
    assert last.transient, f"{status} was taken as a definitive bad answer"


def test_other_4xx_on_generation_is_a_definitive_no():
    routes = {**UP_TO_MODELS, ("POST", "/v1/completions"): (400, {"error": "bad model"})}
    with server(routes) as (url, _):
        last = _climb(url)[-1]
    assert last.level == Level.GENERATION and not last.ok and not last.transient


# -- wire/content.py: a whitespace-only completion is not a generation ----------------------------------------
@pytest.mark.parametrize("api, choice", [("completions", {"text": " \n\t "}),
                                         ("chat", {"message": {"role": "assistant", "content": "\n  \n"}})])
def test_a_whitespace_only_completion_is_not_a_generation(api: str, choice: dict[str, Any]):
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    routes = {**UP_TO_MODELS, ("POST", path): (200, {"choices": [choice]})}
    with server(routes) as (url, _):
        results = _climb(url, api=api)
    last = results[-1]
    assert last.level == Level.GENERATION and not last.ok and not last.transient
    assert "empty completion" in last.detail


def test_a_workers_ladder_is_its_port_observed_and_never_connected_to():
    """A worker (llama.cpp's RPC server: one client, a listen backlog of one) is never sent a connection: its one
    rung asks the listener, at every climb and for the serving checks alike, and is counted as the port rung."""
    import socket

    seen: list[tuple[bool, str]] = [(False, "no process of pid 7's tree listens on port 9")]
    with socket.socket() as s:  # a listening socket nobody may connect to: a connection would be accepted
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        s.setblocking(False)
        lad = Ladder(ProbeConfig(url=f"http://127.0.0.1:{s.getsockname()[1]}"), lambda: 5.0,
                     listener=lambda: seen[-1])
        first = lad.climb()
        seen.append((True, "pid 7 listens on port 9 (seen in /proc, no connection made)"))
        second, check = lad.climb(), lad.generate()
        with pytest.raises(BlockingIOError):
            s.accept()  # nothing connected to it
    assert [(p.level, p.ok, p.detail) for p in first] == [(Level.PORT, False, seen[0][1])]
    assert [(p.level, p.ok) for p in second] == [(Level.PORT, True)] and (check.level, check.ok) == (Level.PORT, True)
    assert [(st.name, st.runs, st.failures, st.success) for st in lad.stats()] == [("port", 3, 1, True)]
    assert lad.requests == {"port": 3}
