"""The engines' publications of their start timing read as data (firstlight.engines.clocks): llama.cpp's
/models/sse as the real b11434 sent it, SGLang's startup_time and gauges, TensorRT-LLM's startup_metrics."""

from __future__ import annotations

import json

import pytest

from firstlight.engines.clocks import (
    LLAMA_STAGES,
    MAX_FIGURES,
    SGLANG_STAGES,
    TRTLLM_STAGES,
    ModelsStream,
    sglang_metrics,
    sglang_server_info,
    sglang_startup_time,
    trtllm_startup_metrics,
)
from tests.support.common import FIXTURES

CLOCKS = FIXTURES / "clocks"


def _payloads() -> list[str]:
    text = (CLOCKS / "llamacpp-b11434-models-sse.txt").read_text()
    return [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]


def test_the_real_b11434_stream_gives_the_load_and_its_text_model_stage():
    s = ModelsStream()
    marks = []
    for i, payload in enumerate(_payloads()):  # one second apart
        marks += s.feed(payload, 100.0 + i)
    assert s.model == "SmolLM2-135M-Instruct.Q4_1" and s.loaded
    assert [(m.stage, m.mark, m.t) for m in marks] == [
        ("load", "begin", 100.0),  # model_status loading
        ("text_model", "begin", 101.0),  # its first progress event (value 0.0)
        ("text_model", "end", 103.0),  # value 1.0 (the repeated 0.0 before it begins nothing)
        ("load", "end", 104.0),  # loaded
    ]
    assert [m.phases for m in marks] == [("*",), ("weights_loading",), ("weights_loading",), ("*",)]
    assert all(m.source == "models_sse" and m.seconds is None for m in marks)


def test_a_stage_ends_when_the_next_begins_or_the_model_has_loaded():
    s = ModelsStream()
    ev = {"model": "m", "event": "status_change",
          "data": {"status": "loading", "progress": {"stages": ["a", "b"], "current": "a", "value": 0.5}}}
    assert [(m.stage, m.mark) for m in s.feed(json.dumps(ev), 1.0)] == [("load", "begin"), ("a", "begin")]
    ev["data"]["progress"]["current"] = "b"  # type: ignore[index]
    assert [(m.stage, m.mark) for m in s.feed(json.dumps(ev), 2.0)] == [("a", "end"), ("b", "begin")]
    loaded = {"model": "m", "event": "status_change", "data": {"status": "loaded"}}
    assert [(m.stage, m.mark) for m in s.feed(json.dumps(loaded), 3.0)] == [("b", "end"), ("load", "end")]
    assert s.feed(json.dumps(ev), 4.0) == []  # after loaded: nothing


def test_a_stage_at_its_end_repeated_does_not_begin_again():
    s = ModelsStream()
    done = {"model": "m", "event": "status_change",
            "data": {"status": "loading", "progress": {"stages": ["a"], "current": "a", "value": 1.0}}}
    assert [(m.stage, m.mark) for m in s.feed(json.dumps(done), 1.0)] == [("load", "begin"), ("a", "begin"),
                                                                          ("a", "end")]
    assert s.feed(json.dumps(done), 2.0) == []


def test_other_models_and_malformed_events_are_skipped():
    s = ModelsStream("mine")
    other = {"model": "other", "event": "model_status", "data": {"status": "loading"}}
    assert s.feed(json.dumps(other), 1.0) == []
    for bad in ("not json", "[1, 2]", '{"model": "mine"}', '{"model": "mine", "data": 3}', "{" * 100):
        assert s.feed(bad, 1.0) == []
    assert not s.loaded


def test_sglang_server_info_startup_time():
    info = json.loads((CLOCKS / "sglang-server-info-startup-time.json").read_text())
    got = {c.stage: (c.seconds, c.phases) for c in sglang_startup_time(info, 5.0)}
    assert got["load_weight"] == (11.0, ("weights_loading",))
    assert got["kv_cache_allocation"] == (4.0, ("kv_cache",))
    assert got["cuda_graph"] == (8.0, ("cuda_graph",))  # prefill 3 + decode 5: captured one after the other
    assert got["tokenizer_e2e"] == (35.0, ("*",))
    assert got["scheduler_e2e"][0] == 27.5
    assert all(c.source == "server_info" and c.t == 5.0 for c in sglang_startup_time(info, 5.0))


def test_sglang_startup_time_in_internal_states_and_unknown_registry_phases():
    info = {"internal_states": [{"startup_time": {"load_weight": "2.5", "deepgemm_jit": 65.4}}]}
    got = {c.stage: (c.seconds, c.phases) for c in sglang_startup_time(info, 0.0)}
    assert got == {"load_weight": (2.5, ("weights_loading",)), "deepgemm_jit": (65.4, ())}


@pytest.mark.parametrize("info", [None, [], {}, {"startup_time": None}, {"startup_time": "x"},
                                  {"startup_time": {"load_weight": "nan"}}, {"startup_time": {"load_weight": -1}},
                                  {"startup_time": {"load_weight": True}}, {"startup_time": {"cuda_graph": {}}},
                                  {"startup_time": {"load_weight": 1e12}}])
def test_sglang_answers_without_figures_give_none(info: object):
    assert sglang_startup_time(info, 0.0) == []


def test_sglang_gauges_as_emitted():
    got = {c.stage: c.seconds for c in sglang_metrics((CLOCKS / "sglang-startup-metrics.prom").read_text(), 1.0)}
    assert got == {"load_weight": 10.0, "kv_cache_allocation": 3.0, "e2e": 20.0, "cuda_graph": 9.0}


def test_sglang_gauges_take_the_slowest_rank_and_ignore_the_rest():
    text = ('sglang:startup_time_seconds{phase="load_weight",rank="0"} 10\n'
            'sglang:startup_time_seconds{phase="load_weight",rank="1"} 12\n'
            'sglang:num_running_reqs 3\n')
    assert [(c.stage, c.seconds, c.source) for c in sglang_metrics(text, 0.0)] == [("load_weight", 12.0, "metrics")]
    assert sglang_metrics("sglang:num_running_reqs 3\n", 0.0) == []
    assert sglang_metrics("garbage {{{", 0.0) == []


def test_trtllm_startup_metrics():
    m = json.loads((CLOCKS / "trtllm-startup-metrics.json").read_text())
    got = {c.stage: (c.seconds, c.phases) for c in trtllm_startup_metrics(m, 0.0)}
    assert got["total_model_loading"] == (41.2, ("weights_loading",))
    assert got["cuda_graph_warmup"] == (12.0, ("cuda_graph",))
    assert got["weight_population"] == (35.6, ())
    assert trtllm_startup_metrics({"a": {"b": {"c": {"d": {"deep_seconds": 1}}}}}, 0.0) == []  # bounded depth
    assert trtllm_startup_metrics("x", 0.0) == []


# Several ranks, the slowest anywhere among them: the critical path is the max, whatever order the gauges come in.
_RANK_SECONDS = {"first": (9.0, 4.0, 6.0), "middle": (4.0, 9.0, 6.0), "last": (4.0, 6.0, 9.0)}


def _gauges(family: str, phase: str, seconds: tuple[float, ...]) -> str:
    return "".join(f'sglang:{family}{{phase="{phase}",rank="{r}"}} {s}\n' for r, s in enumerate(seconds))


@pytest.mark.parametrize("slowest", sorted(_RANK_SECONDS))
@pytest.mark.parametrize("stage", sorted(s for s in SGLANG_STAGES if s != "cuda_graph"))
def test_sglang_startup_gauges_are_the_slowest_ranks_wherever_it_comes(stage: str, slowest: str):
    got = sglang_metrics(_gauges("startup_time_seconds", stage, _RANK_SECONDS[slowest]), 0.0)
    assert [(c.stage, c.seconds, c.phases) for c in got] == [(stage, 9.0, SGLANG_STAGES[stage])]


@pytest.mark.parametrize("slowest", sorted(_RANK_SECONDS))
def test_sglang_cuda_graph_gauges_sum_each_modes_slowest_rank(slowest: str):
    text = (_gauges("startup_cuda_graph_time_seconds", "prefill", _RANK_SECONDS[slowest])
            + _gauges("startup_cuda_graph_time_seconds", "decode", tuple(s / 3 for s in _RANK_SECONDS[slowest])))
    (graph,) = sglang_metrics(text, 0.0)
    assert (graph.stage, graph.seconds) == ("cuda_graph", 12.0)  # prefill 9 s + decode 3 s, each its slowest


# -- SGLang's startup_time, each place an answer holds it, each figure as shown ------------------------------------
FIGURES = {"load_weight": 0.5, "kv_cache_allocation": 3.25}


@pytest.mark.parametrize("info", [{"startup_time": FIGURES},  # top level
                                  {"internal_states": [{"startup_time": FIGURES}, {}]},  # the first state's
                                  FIGURES])  # the startup_time dict itself
def test_sglang_startup_time_is_read_wherever_the_answer_holds_it(info: dict[str, object]):
    got = sglang_startup_time(info, 7.0)
    assert [(c.t, c.source, c.stage, c.phases, c.seconds, c.text) for c in got] == [
        (7.0, "server_info", "load_weight", ("weights_loading",), 0.5, "load_weight: 0.5"),  # under a second too
        (7.0, "server_info", "kv_cache_allocation", ("kv_cache",), 3.25, "kv_cache_allocation: 3.25")]


@pytest.mark.parametrize("info", [{"internal_states": [{"startup_time": "x"}]}, {"internal_states": []},
                                  {"internal_states": ["x"]}, {"e2e": 5.0}])  # no load_weight: not a bare dict
def test_sglang_answers_without_a_startup_time_give_none(info: dict[str, object]):
    assert sglang_startup_time(info, 0.0) == []


def test_sglangs_cuda_graph_modes_are_summed_to_the_millisecond_and_named():
    (graph,) = sglang_startup_time({"startup_time": {"cuda_graph": {"prefill": 1.23456, "decode": 2.0001}}}, 0.0)
    assert (graph.stage, graph.phases, graph.seconds) == ("cuda_graph", ("cuda_graph",), 3.235)
    assert graph.text == "cuda_graph: prefill 1.23456s, decode 2.0001s"


def test_sglangs_stage_names_and_texts_are_clipped():
    name = "x" * 300
    (clock,) = sglang_startup_time({"startup_time": {name: 1.0, "load_weight": "nan"}}, 0.0)
    assert clock.stage == "x" * 64 and clock.phases == ()  # an unknown stage: shown, not compared
    assert len(clock.text) == 200 and clock.text.endswith("…") and clock.text.startswith("x" * 199)
    (fits,) = sglang_startup_time({"startup_time": {"y" * 195: 1.0}}, 0.0)
    assert fits.text == "y" * 195 + ": 1.0" and len(fits.text) == 200  # at the bound: whole


def test_sglang_gauges_skip_other_families_and_samples_without_a_phase_and_keep_their_time():
    text = ('sglang:num_running_reqs 3\n'
            'sglang:startup_time_seconds{rank="0"} 99\n'  # no phase: not a stage
            'sglang:startup_time_seconds{phase="load_weight",rank="0"} 0.25\n')
    got = sglang_metrics(text, 5.0)
    assert [(c.t, c.stage, c.seconds, c.text) for c in got] == [(5.0, "load_weight", 0.25, "load_weight: 0.25")]


# -- TensorRT-LLM's startup_metrics: every stage of the code's table, at each depth it may sit ------------------------
@pytest.mark.parametrize("key", sorted(TRTLLM_STAGES))
def test_every_trtllm_stage_is_read_with_its_phases_and_text_at_any_depth_to_three(key: str):
    for depth in range(4):  # nested one to three dicts deep: read (four deep is not: test_trtllm_startup_metrics)
        nested: object = {key: 2.5}
        for i in range(depth):
            nested = {f"level{i}": nested}
        (clock,) = trtllm_startup_metrics({"startup": nested} if depth < 3 else nested, 9.0)
        assert (clock.t, clock.source, clock.stage, clock.phases, clock.seconds, clock.text) == (
            9.0, "startup_metrics", key.removesuffix("_seconds"), TRTLLM_STAGES[key], 2.5, f"{key}: 2.5")


def test_trtllm_figures_are_bounded_in_number_and_name_and_only_seconds_are_read():
    many = {f"stage{i:03d}_seconds": float(i) for i in range(MAX_FIGURES + 5)}
    got = trtllm_startup_metrics({**many, "count": 3, "a_seconds_total": 1.0}, 0.0)
    assert [c.stage for c in got] == [f"stage{i:03d}" for i in range(MAX_FIGURES)]
    (long,) = trtllm_startup_metrics({"z" * 100 + "_seconds": 1.0}, 0.0)
    assert long.stage == "z" * 64 and long.phases == ()


# -- llama.cpp's /models/sse, mark by mark ---------------------------------------------------------------------------
def _ev(status: str, current: str | None = None, value: float | None = None, model: str = "m") -> str:
    data: dict[str, object] = {"status": status}
    if current is not None:
        data["progress"] = {"current": current, "value": value}
    return json.dumps({"model": model, "data": data})


def test_each_mark_carries_its_time_stage_phases_and_the_event_it_came_from():
    s = ModelsStream()
    assert (s.loaded, s.failed, s.model) == (False, None, None)
    first = _ev("loading", "text_model", 1.0)  # a stage that begins and ends in one event
    got = s.feed(first, 3.0)
    assert [(c.t, c.source, c.stage, c.phases, c.seconds, c.mark, c.text) for c in got] == [
        (3.0, "models_sse", "load", LLAMA_STAGES["load"], None, "begin", first),
        (3.0, "models_sse", "text_model", LLAMA_STAGES["text_model"], None, "begin", first),
        (3.0, "models_sse", "text_model", LLAMA_STAGES["text_model"], None, "end", first)]
    assert s.model == "m"
    (begin,) = s.feed(_ev("loading", "y" * 100, 0.5), 4.0)
    assert (begin.stage, begin.phases, begin.mark) == ("y" * 64, (), "begin")  # clipped, shown not compared
    last = _ev("loaded")
    assert [(c.t, c.stage, c.mark, c.text) for c in s.feed(last, 5.0)] == [
        (5.0, "y" * 64, "end", last), (5.0, "load", "end", last)]
    assert s.loaded is True and s.failed is None


@pytest.mark.parametrize("status", ["unloaded", "failed", "error"])
def test_a_load_that_fails_says_how_once_it_had_begun(status: str):
    s = ModelsStream()
    assert s.feed(_ev(status), 1.0) == [] and s.failed is None  # before its load began: nothing to fail
    s.feed(_ev("loading", "text_model", 0.2), 2.0)
    assert s.feed(_ev(status), 3.0) == [] and s.failed == status and s.loaded is False


def test_a_status_that_is_not_a_failure_fails_nothing():
    s = ModelsStream()
    s.feed(_ev("loading", "text_model", 0.2), 2.0)
    s.feed(_ev("sleeping"), 3.0)
    assert s.failed is None


def test_the_server_info_text_is_read_as_its_json_else_no_figure():
    assert [(c.t, c.stage, c.seconds) for c in sglang_server_info(json.dumps({"startup_time": FIGURES}), 1.0)] == [
        (1.0, "load_weight", 0.5), (1.0, "kv_cache_allocation", 3.25)]
    assert sglang_server_info("not json", 1.0) == [] and sglang_server_info("[" * 100_000, 1.0) == []


def test_a_stage_that_gives_way_to_the_next_ends_when_and_where_the_next_begins():
    s = ModelsStream()
    s.feed(_ev("loading", "text_model", 0.5), 1.0)
    nxt = _ev("loading", "mmproj", 0.1)
    assert [(c.t, c.stage, c.mark, c.text) for c in s.feed(nxt, 2.0)] == [
        (2.0, "text_model", "end", nxt), (2.0, "mmproj", "begin", nxt)]
