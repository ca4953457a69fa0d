"""The wire layer against real sockets: a deadline on every byte, capped headers and event-stream lines, hostile
JSON, clean server text, one model-list parser for probe and bench, and the ladder's own run-time state."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from firstlight.bench import BenchConfig, list_models, run_bench
from firstlight.config import ProbeConfig
from firstlight.engines import get_profile
from firstlight.probes.ladder import Ladder
from firstlight.probes.loop import LadderLoop
from firstlight.timeline import Level, Observation, Probe, SourceNote
from firstlight.wire import (
    LineTooLong,
    NotJSON,
    SSELines,
    Wire,
    WireError,
    clean_text,
    model_ids,
    normalise_url,
    parse_json,
    split_url,
)
from firstlight.wire.deadline import DeadlineBackend
from tests.support.common import wait_for
from tests.support.faults import NESTED_JSON, fault_server


def _cfg(url: str, **kw: Any) -> ProbeConfig:
    base: dict[str, Any] = {"connect_timeout": 0.5, "read_timeout": 1.0, "generation_timeout": 1.0}
    return ProbeConfig(url=url, **(base | kw))


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    return t, box


def _held(results: list[Probe]) -> Level:
    return max((p.level for p in results if p.ok), default=Level.NONE)


def test_a_server_trickling_header_bytes_cannot_hold_a_request():
    # Status line, then one header byte a second for ever: httpx's read timeout alone never fires.
    with fault_server("header_trickle") as s, Ladder(_cfg(s.url, read_timeout=1.5)) as ladder:  # > the 1 s byte gap
        t, box = _in_thread(ladder.climb)
        wait_for(lambda: not t.is_alive(), 60, "the climb to end by its deadline")
    results = box[0]
    assert [(p.level, p.ok) for p in results] == [(Level.PORT, True), (Level.HTTP, False)]
    assert "deadline" in results[-1].detail


def test_header_bytes_are_capped():
    with fault_server("endless_headers") as s, Wire(s.url, connect_timeout=1.0) as wire, \
            pytest.raises(WireError) as e:
        wire.get("/health", read_timeout=30.0)
    assert "not a valid HTTP answer" in str(e.value) and not e.value.timed_out


def test_every_client_is_built_on_the_deadline_backend():
    # httpx has no public hook for a network backend: an httpx that stops using ours must fail here.
    with Wire("http://127.0.0.1:9", connect_timeout=1.0) as wire:
        pool = wire._client._transport._pool  # type: ignore[attr-defined]
        assert isinstance(pool._network_backend, DeadlineBackend)


def test_nested_json_is_not_json_anywhere():
    with pytest.raises(NotJSON):
        parse_json(NESTED_JSON)
    with fault_server("nested_json") as s, Ladder(_cfg(s.url)) as ladder:
        results = ladder.climb()
    assert results[-1].level == Level.MODELS and not results[-1].ok
    assert "not a model list" in results[-1].detail


def test_an_exception_inside_a_rung_is_a_failed_probe_with_a_note(monkeypatch: pytest.MonkeyPatch):
    def broken(data: Any) -> list[str] | None:
        raise RuntimeError("a parser bug")

    monkeypatch.setattr("firstlight.probes.ladder.model_ids", broken)
    with fault_server("ok") as s, Ladder(_cfg(s.url)) as ladder:
        results = ladder.climb()
    assert results[-1].level == Level.MODELS and not results[-1].ok
    assert "RuntimeError: a parser bug" in results[-1].detail


def test_the_probing_thread_survives_whatever_a_climb_raises():
    calls: list[int] = []

    class Exploding(Ladder):
        def climb(self, *a: Any, **kw: Any) -> list[Probe]:
            calls.append(1)
            raise RecursionError("maximum recursion depth exceeded")

    seen: list[Observation] = []
    with fault_server("ok") as s:
        loop = LadderLoop(Exploding(_cfg(s.url)), 0.01, 0.01)
        loop.start(seen.append)
        wait_for(lambda: len(calls) >= 3, 30, "three climbs despite the exceptions")
        loop.stop()
    notes = [o for o in seen if isinstance(o, SourceNote)]
    assert notes and "RecursionError" in notes[0].message


def test_each_probe_reaches_the_sink_while_the_climb_goes_on():
    # The generation trickles for its whole --generation-timeout: the lower rungs are known long before.
    got: list[Probe] = []
    with fault_server("trickle") as s, Ladder(_cfg(s.url, generation_timeout=60.0)) as ladder:
        t, _ = _in_thread(lambda: ladder.climb(sink=got.append))
        wait_for(lambda: any(p.level == Level.MODELS for p in got), 30, "the models probe")
        assert t.is_alive()  # the generation is still in flight
        s.close()


def test_endpoints_learnt_at_run_time_never_touch_the_config_and_the_users_health_path_wins():
    sglang = get_profile("sglang").endpoints
    with fault_server("ok") as s:
        mine = _cfg(s.url, health_path="/my-health", explicit=frozenset({"health_path"}))
        before = dataclasses.asdict(mine)
        with Ladder(mine) as ladder:
            ladder.use_endpoints(sglang)
            assert _held(ladder.climb()) == Level.GENERATION
        assert dataclasses.asdict(mine) == before
        with Ladder(_cfg(s.url)) as ladder:
            ladder.use_endpoints(sglang)
            ladder.climb()
        gets = [r["path"] for r in s.seen if r["method"] == "GET"]
    assert gets[0] == "/my-health" and "/health_generate" in gets[2:]
    assert "/health_generate" not in gets[:2]


def test_a_base_url_ending_in_v1_is_not_doubled_and_port_0_is_refused():
    assert normalise_url("http://h:8000/v1/") == "http://h:8000"
    assert normalise_url("http://h:8000/proxy/v1") == "http://h:8000/proxy"
    with pytest.raises(ValueError, match="port 0"):
        split_url("http://127.0.0.1:0")
    with fault_server("ok") as s, Ladder(_cfg(s.url + "/v1")) as ladder:
        assert _held(ladder.climb()) == Level.GENERATION
        assert not any(r["path"].startswith("/v1/v1") for r in s.seen)


def test_a_model_list_under_models_passes_the_probe_and_works_for_bench():
    assert model_ids({"models": [{"name": "a"}, {"model": "b"}, {"id": "c"}, "junk"]}) == ["a", "b", "c"]
    assert model_ids({"data": "nope"}) is None
    with fault_server("models_key") as s:
        with Ladder(_cfg(s.url)) as ladder:
            assert _held(ladder.climb()) == Level.GENERATION and ladder.model == "m1"
        assert list_models(s.url) == ["m1"]
        r = run_bench(BenchConfig(s.url, num_requests=2, output_len=4))
    assert r.completed == 2 and r.errors == 0 and r.model == "m1"


def test_server_text_is_stripped_of_escapes_and_clipped():
    assert clean_text("\x1b]0;t\x07\x1b[31mred\x1b[0m\x00\x9b\nx", 50) == "red x"
    assert clean_text("y" * 500, 10) == "y" * 10 + "…"
    with fault_server("escapes") as s:
        with Ladder(_cfg(s.url)) as ladder:
            bad = ladder.climb()
        with Ladder(_cfg(s.url, health_path="/none")) as ladder:
            good = ladder.climb()
    assert _held(good) == Level.GENERATION
    for p in bad + good:
        assert not any(c in p.detail + (p.text or "") for c in "\x1b\x07\x00"), p
        assert len(p.detail) < 600 and len(p.text or "") < 300


def test_sse_lines_cap_the_pending_line():
    lines = SSELines(max_line=16)
    assert lines.feed(b"data: a\r\n\r\ndata: b") == ["data: a", ""]
    assert lines.feed(b"c\n") == ["data: bc"]
    with pytest.raises(LineTooLong):
        lines.feed(b"x" * 17)


def test_a_stream_line_that_never_ends_is_an_error_not_memory():
    with fault_server("sse_no_newline") as s:
        r = run_bench(BenchConfig(s.url, model="m", num_requests=1, request_timeout=60))
    assert r.errors == 1 and any("line longer than" in e for e in r.error_samples), r.error_samples


def test_a_wire_is_built_on_the_one_ssl_context_without_loading_the_ca_bundle_again(monkeypatch):
    """Loading the CA bundle costs about 50 ms of CPU: the process does it once, never once per Wire (a member's,
    a probe's, a sampler's connection)."""
    import ssl

    from firstlight.wire import Wire
    from firstlight.wire.deadline import _ssl_context

    Wire("http://127.0.0.1:9", connect_timeout=1).close()  # the one context, made now if it was not yet
    made: list[object] = []
    real = ssl.create_default_context

    def counting(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(args or kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counting)
    wires = [Wire(f"http://127.0.0.1:{port}", connect_timeout=1) for port in (9, 10, 11)]
    try:
        assert made == []
        assert all(w._client._transport._pool._ssl_context is _ssl_context() for w in wires)  # type: ignore[attr-defined]
    finally:
        for w in wires:
            w.close()
