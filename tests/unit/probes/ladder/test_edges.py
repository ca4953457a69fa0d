"""probes/ladder.py's rules at their edges, against a real HTTP server on a real socket that records what it was
asked: which paths each rung asks (the engine's, except where the user set one), what a generation request
carries, what each answer makes of a rung, and the requests counted."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from firstlight.config import ProbeConfig
from firstlight.engines.profile import Endpoints
from firstlight.probes.ladder import Ladder
from firstlight.timeline import Level, Probe
from firstlight.wire import MAX_BODY
from tests.support.faults import serving

Route = tuple[int, Any]
HEALTHY: dict[tuple[str, str], Route] = {("GET", "/health"): (200, {"status": "ok"}),
                                         ("GET", "/v1/models"): (200, {"data": [{"id": "m1"}]}),
                                         ("POST", "/v1/completions"): (200, {"choices": [{"text": " Paris"}]})}


class Recorder:
    def __init__(self, routes: dict[tuple[str, str], Route]) -> None:
        self.routes = routes
        self.asked: list[tuple[str, str, Any]] = []  # (method, path, JSON body)


@contextmanager
def server(routes: dict[tuple[str, str], Route]) -> Iterator[tuple[str, Recorder]]:
    rec = Recorder(routes)

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _answer(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
            rec.asked.append((method, self.path, json.loads(raw) if raw else None))
            status, body = rec.routes.get((method, self.path), (404, {"error": "no route"}))
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    with serving(H) as url:
        yield url, rec


def ladder(url: str, **kw: Any) -> Ladder:
    return Ladder(ProbeConfig(url=url, connect_timeout=2, read_timeout=10, generation_timeout=10, **kw),
                  clock=lambda: 1000.0)


def climb(routes: dict[tuple[str, str], Route], **kw: Any) -> tuple[list[Probe], Recorder, Ladder]:
    with server(routes) as (url, rec), ladder(url, **kw) as lad:
        return lad.climb(), rec, lad


def at(probes: list[Probe], level: Level) -> Probe:
    return [p for p in probes if p.level == level][-1]


# -- which paths ----------------------------------------------------------------------------------------------
ENGINE = Endpoints(health="/engine/health", models="/engine/models", completions="/engine/complete",
                   chat="/engine/chat")


def test_the_engines_endpoints_replace_every_path_the_user_did_not_set():
    cfg = ProbeConfig(url="http://127.0.0.1:9", api="chat")
    with Ladder(cfg) as lad:
        lad.use_endpoints(ENGINE)
        assert lad.paths == Endpoints(health="/engine/health", models="/engine/models",
                                      completions="/engine/complete", chat="/engine/chat")
        assert lad.health_path == "/engine/health"
    assert cfg.health_path == "/health"  # the config is never written


@pytest.mark.parametrize("name, field", [("health_path", "health"), ("models_path", "models"),
                                         ("completions_path", "completions"), ("chat_path", "chat")])
def test_a_path_the_user_set_is_kept_and_only_that_one(name: str, field: str):
    cfg = ProbeConfig(url="http://127.0.0.1:9", explicit=frozenset({name}), **{name: "/mine"})
    with Ladder(cfg, endpoints=ENGINE) as lad:
        got = lad.paths
    for f in ("health", "models", "completions", "chat"):
        assert getattr(got, f) == ("/mine" if f == field else getattr(ENGINE, f)), f


def test_every_rung_asks_the_engines_paths_and_the_chat_api_its_chat_path():
    routes = {("GET", "/engine/health"): (200, {}), ("GET", "/engine/models"): (200, {"data": [{"id": "m"}]}),
              ("POST", "/engine/chat"): (200, {"choices": [{"message": {"content": "Paris"}}]})}
    with server(routes) as (url, rec), Ladder(ProbeConfig(url=url, api="chat", connect_timeout=2),
                                              endpoints=ENGINE) as lad:
        probes = lad.climb()
    assert all(p.ok for p in probes), probes
    assert [(m, p) for m, p, _ in rec.asked] == [("GET", "/engine/health"), ("GET", "/engine/models"),
                                                 ("POST", "/engine/chat")]


# -- what a generation request carries --------------------------------------------------------------------------
def test_a_completion_request_carries_the_prompt_max_tokens_greedy_and_the_listed_model():
    _, rec, lad = climb(HEALTHY, max_tokens=5, prompt="The capital of France is")
    assert rec.asked[-1] == ("POST", "/v1/completions", {"max_tokens": 5, "temperature": 0, "stream": False,
                                                         "prompt": "The capital of France is", "model": "m1"})
    assert lad.model == "m1"


def test_a_chat_request_carries_one_user_message_and_the_models_name_given():
    routes = {**HEALTHY, ("POST", "/v1/chat/completions"): (200, {"choices": [{"message": {"content": "hi"}}]})}
    probes, rec, _ = climb(routes, api="chat", prompt="Say hi", model="given")
    assert rec.asked[-1] == ("POST", "/v1/chat/completions", {
        "max_tokens": 8, "temperature": 0, "stream": False, "messages": [{"role": "user", "content": "Say hi"}],
        "model": "given"})
    assert at(probes, Level.GENERATION).ok


def test_without_a_model_listed_or_given_the_request_names_none():
    routes = {**HEALTHY, ("GET", "/v1/models"): (404, {})}
    _, rec, lad = climb(routes)
    assert "model" not in rec.asked[-1][2] and lad.model is None


def test_a_given_model_is_never_replaced_by_the_list():
    _, rec, lad = climb(HEALTHY, model="given")
    assert rec.asked[-1][2]["model"] == "given" and lad.model == "given"


# -- the port and HTTP rungs -------------------------------------------------------------------------------------
def test_nothing_listening_fails_the_port_rung_naming_the_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with ladder(f"http://127.0.0.1:{port}") as lad:
            probes = lad.climb()
            assert lad.requests == {"port": 1}
    assert len(probes) == 1 and probes[0].level == Level.PORT and not probes[0].ok
    assert probes[0].detail.startswith(f"connect 127.0.0.1:{port}: ") and probes[0].t == 1000.0


def test_an_open_port_says_so_with_the_time_it_took():
    probes, _, _ = climb(HEALTHY)
    port = probes[0]
    assert port.level == Level.PORT and port.ok and port.detail.endswith(" accepts connections")
    assert port.latency_s is not None and port.latency_s >= 0


@pytest.mark.parametrize("status", [404, 405])
def test_no_health_endpoint_is_skipped(status: int):
    probes, _, _ = climb({**HEALTHY, ("GET", "/health"): (status, {})})
    http, health = at(probes, Level.HTTP), at(probes, Level.HEALTH)
    assert http.ok and http.status == status and http.detail == f"GET /health -> {status}"
    assert health.ok and health.detail == f"GET /health -> {status}: no health endpoint, skipped"
    assert at(probes, Level.GENERATION).ok


@pytest.mark.parametrize("status, ok", [(200, True), (204, True), (299, True), (300, False),
                                        (500, False), (503, False), (400, False)])
def test_health_is_any_2xx_and_nothing_else(status: int, ok: bool):
    probes, _, _ = climb({**HEALTHY, ("GET", "/health"): (status, {"status": "fine"})})
    health = at(probes, Level.HEALTH)
    assert health.ok is ok and health.status == status, health
    assert at(probes, Level.HTTP).ok  # an answer is HTTP either way
    assert health.detail.startswith(f"GET /health -> {status} ")
    assert any(p.level == Level.GENERATION for p in probes) is ok  # a failed rung stops the climb


def test_a_health_answer_is_shown_up_to_80_characters_or_120_when_it_fails():
    body = {"status": "ok", "pad": "x" * 300}
    health = at(climb({**HEALTHY, ("GET", "/health"): (200, body)})[0], Level.HEALTH)
    assert len(health.detail) - len("GET /health -> 200 ") == 81 and health.detail.endswith("…")
    health = at(climb({**HEALTHY, ("GET", "/health"): (503, body)})[0], Level.HEALTH)
    assert len(health.detail) - len("GET /health -> 503 ") == 121 and not health.ok


# -- the models rung ---------------------------------------------------------------------------------------------
def test_no_models_endpoint_for_the_engine_is_skipped_without_a_request():
    with server(HEALTHY) as (url, rec), Ladder(ProbeConfig(url=url),
                                               endpoints=Endpoints(health="/health", models=None)) as lad:
        probes = lad.climb()
        counted = lad.requests
    models = at(probes, Level.MODELS)
    assert models.ok and models.detail == "no models endpoint for this engine, skipped"
    assert ("GET", "/v1/models", None) not in rec.asked and "models" not in counted


@pytest.mark.parametrize("status", [404, 405])
def test_a_models_endpoint_that_is_not_there_is_skipped(status: int):
    models = at(climb({**HEALTHY, ("GET", "/v1/models"): (status, {})})[0], Level.MODELS)
    assert models.ok and models.status == status
    assert models.detail == f"GET /v1/models -> {status}: no models endpoint, skipped"


@pytest.mark.parametrize("status", [201, 500, 503])
def test_models_other_than_200_fail_and_may_pass_later(status: int):
    models = at(climb({**HEALTHY, ("GET", "/v1/models"): (status, {"error": "loading"})})[0], Level.MODELS)
    assert not models.ok and models.transient and models.status == status
    assert models.detail.startswith(f"GET /v1/models -> {status} ")


def test_a_200_that_is_not_a_model_list_fails_for_good():
    models = at(climb({**HEALTHY, ("GET", "/v1/models"): (200, ["m1"])})[0], Level.MODELS)
    assert not models.ok and not models.transient and models.status == 200
    assert models.detail == 'GET /v1/models -> 200 but not a model list: ["m1"]'


def test_an_empty_model_list_fails_and_may_pass_later():
    models = at(climb({**HEALTHY, ("GET", "/v1/models"): (200, {"data": []})})[0], Level.MODELS)
    assert not models.ok and models.transient and models.status == 200
    assert models.detail == "GET /v1/models -> 200 with no model listed"


def test_the_first_three_models_are_shown_and_the_first_is_used():
    listed = {"data": [{"id": f"model-{i}"} for i in range(5)]}
    probes, rec, lad = climb({**HEALTHY, ("GET", "/v1/models"): (200, listed)})
    models = at(probes, Level.MODELS)
    assert models.ok and models.detail == "GET /v1/models lists model-0, model-1, model-2"
    assert lad.model == "model-0" and rec.asked[-1][2]["model"] == "model-0"


# -- the generation rung -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("status, definitive", [(400, True), (404, True), (422, True), (499, True), (408, False),
                                                (425, False), (429, False), (500, False), (399, False), (302, False)])
def test_a_generation_answered_with_an_error_status(status: int, definitive: bool):
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (status, {"error": "x"})})[0], Level.GENERATION)
    assert gen.ok is False and gen.transient is not definitive and gen.status == status and gen.t == 1000.0
    assert gen.detail == f'POST /v1/completions -> {status} {{"error": "x"}}'
    assert gen.latency_s is not None and gen.latency_s >= 0


def test_a_generation_that_is_not_json_fails_for_good_showing_its_start():
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, b"<html>" + b"x" * 200)})[0], Level.GENERATION)
    assert not gen.ok and not gen.transient and gen.status == 200 and gen.text is None
    assert gen.detail == "POST /v1/completions -> 200 but not JSON: " + repr("<html>" + "x" * 54 + "…")


def test_an_answer_without_choices_fails_showing_the_answer():
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, {"object": "text_completion"})})[0],
             Level.GENERATION)
    assert not gen.ok and not gen.transient
    assert gen.detail == ("POST /v1/completions -> 200 but no choices in the answer: "
                          + repr('{"object": "text_completion"}'))


def test_an_empty_completion_fails_and_shows_what_came():
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, {"choices": [{"text": "  "}]})})[0],
             Level.GENERATION)
    assert not gen.ok and not gen.transient and gen.text == "  "
    assert gen.detail == "POST /v1/completions -> 200 but an empty completion"


def test_expect_is_searched_in_the_generated_text():
    gen = at(climb(HEALTHY, expect=r"Par")[0], Level.GENERATION)
    assert gen.ok
    gen = at(climb(HEALTHY, expect=r"^Lyon")[0], Level.GENERATION)
    assert not gen.ok and not gen.transient and gen.text == " Paris"
    assert gen.detail == "POST /v1/completions -> 200 but text ' Paris' does not match --expect '^Lyon'"


def test_expect_looks_at_the_first_64_kib_of_the_text():
    far = "x" * 65536 + "Paris"
    near = "x" * 65531 + "Paris"
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, {"choices": [{"text": far}]})},
                   expect="Paris")[0], Level.GENERATION)
    assert not gen.ok
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, {"choices": [{"text": near}]})},
                   expect="Paris")[0], Level.GENERATION)
    assert gen.ok


def test_a_good_generation_shows_its_text_and_time():
    gen = at(climb(HEALTHY)[0], Level.GENERATION)
    assert gen.ok and gen.status == 200 and gen.text == " Paris" and gen.t == 1000.0
    assert gen.detail.startswith("POST /v1/completions -> 200 in ") and gen.detail.endswith("s: ' Paris'")
    assert gen.latency_s is not None and gen.latency_s >= 0
    long_text = "word " * 100
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, {"choices": [{"text": long_text}]})})[0],
             Level.GENERATION)
    assert gen.ok and gen.text is not None and len(gen.text) == 201 and gen.text.endswith("…")


def test_a_generation_body_over_the_cap_is_not_a_generation():
    huge = b'{"choices": [{"text": "' + b"x" * MAX_BODY + b'"}]}'
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, huge)})[0], Level.GENERATION)
    assert not gen.ok


# -- the climb itself --------------------------------------------------------------------------------------------
def test_each_probe_goes_to_the_sink_as_it_is_known_and_top_stops_the_climb():
    with server(HEALTHY) as (url, rec), ladder(url) as lad:
        seen: list[Probe] = []
        probes = lad.climb(top=Level.MODELS, sink=seen.append)
        assert seen == probes
        assert [p.level for p in probes] == [Level.PORT, Level.HTTP, Level.HEALTH, Level.MODELS]
        assert not any(m == "POST" for m, _, _ in rec.asked)  # no generation asked above the top
        assert lad.requests == {"port": 1, "health": 1, "models": 1}
        probes = lad.climb(top=Level.HTTP)
        assert [p.level for p in probes] == [Level.PORT, Level.HTTP]  # health came with HTTP: not past the top
        assert lad.requests == {"port": 2, "health": 2, "models": 1}
        gen = lad.generate()
        assert gen.level == Level.GENERATION and gen.ok
        assert lad.requests == {"port": 2, "health": 2, "models": 1, "generation": 1}


def test_a_failure_inside_a_check_is_a_failed_probe_naming_it():
    with server(HEALTHY) as (url, _), ladder(url) as lad:
        boom: Callable[..., Any] = lambda *a: (_ for _ in ()).throw(ValueError("bad \x1b[31mthing"))  # noqa: E731
        lad._rungs = tuple((n, lv, boom if n == "models" else r) for n, lv, r in lad._rungs)
        probes = lad.climb()
        stats = {s.name: s for s in lad.stats()}
    models = probes[-1]
    assert models.level == Level.MODELS and not models.ok and models.t == 1000.0
    assert models.detail == "models check failed inside firstlight: ValueError: bad thing"
    # counted as the rung's failure and as an error of firstlight's own, not of the server's
    assert (stats["models"].runs, stats["models"].failures, stats["models"].errors) == (1, 1, 1)
    assert stats["models"].success is False and (stats["health"].success, stats["health"].errors) == (True, 0)


def test_identify_counts_every_path_it_asks():
    from firstlight.probes.identify import identify_paths

    with server({}) as (url, _), ladder(url) as lad:
        lad.identify(budget_s=5)
        assert lad.requests == {"identify": len(identify_paths())}


# -- the climb's deadline bounds every rung ----------------------------------------------------------------------
@contextmanager
def hanging(method: str, path: str) -> Iterator[str]:
    """A server that answers every route but one at once; that one is never answered until the test ends."""
    release = threading.Event()
    routes = {**HEALTHY, ("GET", "/v1/models"): (200, {"data": [{"id": "m1"}]})}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _answer(self, m: str) -> None:
            if m == "POST":
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if (m, self.path) == (method, path):
                release.wait(120)
                return
            status, body = routes.get((m, self.path), (404, {}))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    with serving(H) as url:
        try:
            yield url
        finally:
            release.set()  # before the shutdown: the hanging handler lets go


@pytest.mark.parametrize("method, path, level", [("GET", "/health", Level.HTTP), ("GET", "/v1/models", Level.MODELS),
                                                 ("POST", "/v1/completions", Level.GENERATION)])
def test_the_climbs_deadline_ends_a_rung_the_server_never_answers(method: str, path: str, level: Level):
    """read and generation timeouts of 300 s; the climb's deadline, 1 s away, is what ends the request."""
    import re
    import time

    with hanging(method, path) as url, Ladder(ProbeConfig(url=url, connect_timeout=2, read_timeout=300,
                                                          generation_timeout=300), clock=lambda: 1000.0) as lad:
        probes = lad.climb(deadline_at=time.monotonic() + 1)
    last = probes[-1]
    assert last.level == level and last.ok is False and last.t == 1000.0, probes
    assert last.detail.startswith(f"{method} {path}: "), last.detail
    if level == Level.GENERATION:
        assert last.latency_s == 0.0  # the test's clock stands still
    m = re.search(r"no complete answer within ([\d.]+)s \(the request's deadline\)", last.detail)
    assert m is not None and float(m[1]) <= 1, last.detail


def test_long_answers_are_shown_to_their_bound():
    pad = {"error": "y" * 400}
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (400, pad)})[0], Level.GENERATION)
    assert len(gen.detail) == len("POST /v1/completions -> 400 ") + 161 and gen.detail.endswith("…")
    models = at(climb({**HEALTHY, ("GET", "/v1/models"): (500, pad)})[0], Level.MODELS)
    assert len(models.detail) == len("GET /v1/models -> 500 ") + 121 and models.detail.endswith("…")
    models = at(climb({**HEALTHY, ("GET", "/v1/models"): (200, [pad])})[0], Level.MODELS)
    assert len(models.detail) == len("GET /v1/models -> 200 but not a model list: ") + 81
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, pad)})[0], Level.GENERATION)
    assert gen.detail == "POST /v1/completions -> 200 but no choices in the answer: " + repr(
        '{"error": "' + "y" * 89 + "…")
    long_id = "i" * 100
    models = at(climb({**HEALTHY, ("GET", "/v1/models"): (200, {"data": [{"id": long_id}] * 4})})[0], Level.MODELS)
    assert models.detail == "GET /v1/models lists " + ", ".join(["i" * 80 + "…"] * 3)[:200] + "…"
    gen = at(climb({**HEALTHY, ("POST", "/v1/completions"): (200, {"choices": [{"text": "z" * 300}]})},
                   expect="^a")[0], Level.GENERATION)
    assert gen.detail == f"POST /v1/completions -> 200 but text {'z' * 80 + '…'!r} does not match --expect '^a'"


def test_generate_alone_keeps_its_deadline_and_names_its_level():
    """`generate` (the serving checks after READY) is the generation rung alone: a server that never answers it is
    ended by the deadline given, and a failure inside firstlight is a failed generation probe."""
    import re
    import time

    with hanging("POST", "/v1/completions") as url, Ladder(ProbeConfig(url=url, connect_timeout=2, read_timeout=300,
                                                                       generation_timeout=300),
                                                           clock=lambda: 1000.0) as lad:
        gen = lad.generate(deadline_at=time.monotonic() + 1)
    m = re.search(r"no complete answer within ([\d.]+)s \(the request's deadline\)", gen.detail)
    assert gen.level == Level.GENERATION and not gen.ok and m is not None and float(m[1]) <= 1, gen.detail
    with server(HEALTHY) as (url, _), ladder(url) as lad:
        lad._generate = lambda *a: (_ for _ in ()).throw(ValueError("boom"))  # type: ignore[method-assign]
        gen = lad.generate()
    assert gen.level == Level.GENERATION and not gen.ok
    assert gen.detail == "generation check failed inside firstlight: ValueError: boom"


def test_identify_names_the_engine_its_endpoints_answer_for():
    """An SGLang server (its /server_info answers with SGLang's fields; a real socket) is identified as sglang
    within the budget given."""
    from tests.support.faults import fault_server

    with fault_server("sglang") as fs, ladder(fs.url) as lad:
        got = lad.identify(budget_s=5)
    assert got is not None and got[0] == "sglang" and got[1].startswith("GET /server_info -> 200"), got


def test_identify_waits_the_budget_it_is_given_not_the_default():
    """An SGLang server that answers 2.5 s late (more than the default 2 s budget) is still identified when the
    budget given is 60 s: the budget passed is the one kept."""
    from firstlight.probes.identify import IDENTIFY_BUDGET_S
    from tests.support.faults import fault_server

    assert IDENTIFY_BUDGET_S < 2.5
    with fault_server("sglang", delay=2.5) as fs, ladder(fs.url) as lad:
        got = lad.identify(budget_s=60)
    assert got is not None and got[0] == "sglang", got


def test_expect_is_searched_in_the_first_64_kib_exactly():
    """The pattern is searched in the first 65,536 characters: a "P" at index 65,535 is found, at 65,536 not."""
    for before, found in ((65535, True), (65536, False)):
        answer = {"choices": [{"text": "x" * before + "P"}]}
        with server({**HEALTHY, ("POST", "/v1/completions"): (200, answer)}) as (url, _), \
                ladder(url, expect="P") as lad:
            assert lad.generate().ok is found, before


def test_every_rung_is_timed_and_counted_in_one_place():
    starting = {**HEALTHY, ("GET", "/health"): (503, {"status": "loading"})}
    with server(starting) as (url, rec), ladder(url) as lad:
        assert [(s.kind, s.name, s.runs, s.success, s.duration_s) for s in lad.stats()] == [
            ("probe", name, 0, None, None) for name in ("port", "health", "models", "generation")]
        lad.climb()  # health says 503: the climb stops there, models and generation are not asked
        first = {s.name: s for s in lad.stats()}
        assert [(first[n].runs, first[n].failures, first[n].success) for n in ("port", "health", "models")] == [
            (1, 0, True), (1, 1, False), (0, 0, None)]
        rec.routes = HEALTHY
        lad.climb()
        stats = {s.name: s for s in lad.stats()}
    assert [(stats[n].runs, stats[n].failures, stats[n].errors, stats[n].success) for n in stats] == [
        (2, 0, 0, True), (2, 1, 0, True), (1, 0, 0, True), (1, 0, 0, True)]
    assert all(s.duration_s is not None and 0 <= s.duration_s < 30 for s in stats.values())


# -- every probe's fields --------------------------------------------------------------------------------------
def _fields(p: Probe) -> tuple[float | None, Level, bool, int | None, bool, bool, str | None]:
    """(time, level, ok, status, whether it has a latency, transient, text) of a probe."""
    return p.t, p.level, p.ok, p.status, p.latency_s is not None, p.transient, p.text


T = 1000.0  # the ladder's clock in these tests
PORT_OK = (T, Level.PORT, True, None, True, True, None)
HTTP_200 = (T, Level.HTTP, True, 200, True, True, None)
HEALTH_200 = (T, Level.HEALTH, True, 200, True, True, None)


@pytest.mark.parametrize(("routes", "expected"), [
    (HEALTHY, [PORT_OK, HTTP_200, HEALTH_200, (T, Level.MODELS, True, 200, True, True, None),
               (T, Level.GENERATION, True, 200, True, True, " Paris")]),
    # no health and no models endpoint: skipped, each with the status that said so and no latency of its own
    ({**HEALTHY, ("GET", "/health"): (404, {}), ("GET", "/v1/models"): (405, {})},
     [PORT_OK, (T, Level.HTTP, True, 404, True, True, None), (T, Level.HEALTH, True, 404, False, True, None),
      (T, Level.MODELS, True, 405, False, True, None), (T, Level.GENERATION, True, 200, True, True, " Paris")]),
    ({**HEALTHY, ("GET", "/health"): (503, {"error": "loading"})},  # not yet: the HTTP rung holds, health not
     [PORT_OK, (T, Level.HTTP, True, 503, True, True, None), (T, Level.HEALTH, False, 503, True, True, None)]),
    ({**HEALTHY, ("GET", "/v1/models"): (500, {"error": "x"})},
     [PORT_OK, HTTP_200, HEALTH_200, (T, Level.MODELS, False, 500, False, True, None)]),
    ({**HEALTHY, ("GET", "/v1/models"): (200, {"foo": 1})},  # not a model list: a definitive bad answer
     [PORT_OK, HTTP_200, HEALTH_200, (T, Level.MODELS, False, 200, False, False, None)]),
    ({**HEALTHY, ("GET", "/v1/models"): (200, {"data": []})},  # none listed yet: not yet
     [PORT_OK, HTTP_200, HEALTH_200, (T, Level.MODELS, False, 200, False, True, None)]),
])
def test_every_probe_carries_its_time_status_latency_and_state(routes: dict[tuple[str, str], Route],
                                                              expected: list[tuple[object, ...]]):
    probes, _, _ = climb(routes)
    assert [_fields(p) for p in probes] == expected


def test_a_generation_that_does_not_match_expect_is_a_definitive_bad_answer_with_its_text():
    probes, _, _ = climb(HEALTHY, expect="London")
    assert _fields(at(probes, Level.GENERATION)) == (T, Level.GENERATION, False, 200, True, False, " Paris")


def test_an_engine_without_a_models_endpoint_skips_the_rung_at_its_time():
    with server(HEALTHY) as (url, _), ladder(url) as lad:
        probes = lad._models(Endpoints(health="/health", models=""), None)
    assert [_fields(p) for p in probes] == [(T, Level.MODELS, True, None, False, True, None)]


def test_a_workers_generation_is_its_listening_port_at_the_ladders_time():
    with server(HEALTHY) as (url, _), ladder(url) as lad:
        lad.listener = lambda: (True, "pid 7 listens on port 1")
        assert _fields(lad.generate()) == (T, Level.PORT, True, None, False, True, None)

        def broken() -> tuple[bool, str]:
            raise RuntimeError("no /proc")

        lad.listener = broken
        p = lad.generate()
    assert (p.level, p.ok) == (Level.PORT, False) and "port check failed inside firstlight" in p.detail


def test_without_the_engines_endpoints_every_path_is_the_users():
    cfg = ProbeConfig(url="http://127.0.0.1:1", health_path="/hz", models_path="/m", completions_path="/c",
                      chat_path="/ch")
    with Ladder(cfg) as lad:
        assert lad.paths == Endpoints(health="/hz", models="/m", completions="/c", chat="/ch")
