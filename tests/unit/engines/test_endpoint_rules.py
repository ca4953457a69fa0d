"""Engine identification from one HTTP answer, pinned over every engine's paths, statuses and body shapes: the
profiles' endpoint rules must name the same engine for each (and nothing where nothing is said)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from firstlight.engines import detect_from_endpoint


def j(obj: Any) -> str:
    return json.dumps(obj)


def owned(*owners: Any) -> str:
    return j({"object": "list", "data": [{"id": f"m{i}", "owned_by": o} for i, o in enumerate(owners)]})


LOADING = j({"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}})
TGI_INFO_KEYS = ("max_total_tokens", "max_input_tokens", "max_input_length", "router", "docker_label", "model_dtype",
                 "validation_workers")

CASES: list[tuple[str, int, str, str | None]] = [
    # "/": Ollama's banner, whatever the status the gate lets through
    ("/", 200, "Ollama is running", "ollama"),
    ("/", 503, "Ollama is running", "ollama"),
    ("", 200, "Ollama is running", "ollama"),
    ("/?q=1", 200, "Ollama is running", "ollama"),
    ("/", 404, "Ollama is running", None),
    ("/", 200, "hello", None),
    # /server_info and /get_server_info: TensorRT-LLM's key, then vLLM's, then SGLang's
    ("/server_info", 200, j({"model_path": "m", "mem_fraction_static": 0.8}), "sglang"),
    ("/server_info", 200, j({"internal_states": []}), "sglang"),
    ("/get_server_info", 200, j({"schedule_policy": "lpm"}), "sglang"),
    ("/get_server_info", 200, j({"tp_size": 1}), "sglang"),
    ("server_info", 200, j({"tp_size": 1}), "sglang"),
    ("/server_info/", 200, j({"tp_size": 1}), "sglang"),
    ("/server_info?x=1", 200, j({"tp_size": 1}), "sglang"),
    ("/server_info", 503, j({"tp_size": 1}), "sglang"),
    ("/server_info", 401, j({"tp_size": 1}), "sglang"),
    ("/server_info", 200, j({"disaggregated_params": None}), "trtllm"),
    ("/server_info", 200, j({"disaggregated_params": None, "tp_size": 2}), "trtllm"),
    ("/get_server_info", 200, j({"disaggregated_params": {}, "vllm_config": "x"}), "trtllm"),
    ("/server_info", 200, j({"vllm_config": "x"}), "vllm"),
    ("/server_info", 200, j({"vllm_config": "x", "tp_size": 2, "internal_states": []}), "vllm"),
    ("/server_info", 200, j({"model_path": "m"}), None),
    ("/server_info", 200, j(["tp_size"]), None),
    ("/server_info", 200, "tp_size", None),
    ("/server_info", 404, j({"tp_size": 1}), None),
    ("/server_info", 405, j({"tp_size": 1}), None),
    ("/server_info", 500, j({"tp_size": 1}), None),
    ("/server_info", 502, j({"tp_size": 1}), None),
    # SGLang's /model_info: both keys
    ("/model_info", 200, j({"model_path": "m", "is_generation": True}), "sglang"),
    ("/get_model_info", 200, j({"model_path": "m", "is_generation": False}), "sglang"),
    ("/model_info", 200, j({"model_path": "m"}), None),
    ("/model_info", 200, j({"is_generation": True}), None),
    # llama.cpp's /props: its keys, or its loading error
    *[("/props", 200, j({key: 1}), "llamacpp")
      for key in ("default_generation_settings", "total_slots", "build_info", "chat_template")],
    ("/props", 503, LOADING, "llamacpp"),
    ("/props", 200, LOADING, "llamacpp"),
    ("/props", 503, j({"error": {"type": "unavailable_error", "message": "Loading model weights"}}), "llamacpp"),
    ("/props", 503, j({"error": {"type": "unavailable_error", "message": "busy"}}), None),
    ("/props", 503, j({"error": {"type": "server_error", "message": "Loading model"}}), None),
    ("/props", 503, j({"error": "Loading model"}), None),
    ("/props", 200, j({}), None),
    ("/props", 200, "<html>hi</html>", None),
    # health answers: llama.cpp's loading error, TGI's health-check error
    ("/health", 503, LOADING, "llamacpp"),
    ("/v1/health", 503, LOADING, "llamacpp"),
    ("/health", 503, j({"error": "unhealthy", "error_type": "healthcheck"}), "tgi"),
    ("/v1/health", 503, j({"error": "unhealthy", "error_type": "healthcheck"}), "tgi"),
    ("/health", 503, j({"error": {"message": "Loading model", "type": "unavailable_error"},
                        "error_type": "healthcheck"}), "llamacpp"),
    ("/health", 200, "", None),
    ("/health", 200, j({"status": "ok"}), None),
    ("/health", 503, j({"error_type": "other"}), None),
    # TGI's /info: model_id and one of its own keys
    *[("/info", 200, j({"model_id": "m", key: 1}), "tgi") for key in TGI_INFO_KEYS],
    ("/info", 200, j({"model_id": "m"}), None),
    ("/info", 200, j({"max_total_tokens": 4096}), None),
    ("/info", 200, j({"name": "something else"}), None),
    # version endpoints: 200 and an object with "version"
    ("/api/version", 200, j({"version": "0.6.0"}), "ollama"),
    ("/api/version", 503, j({"version": "0.6.0"}), None),
    ("/api/version", 200, j({"v": "0.6.0"}), None),
    ("/api/version", 200, j(["version"]), None),
    ("/version", 200, j({"version": "0.8.4"}), "vllm"),
    ("/version", 503, j({"version": "0.8.4"}), None),
    ("/version", 401, j({"version": "0.8.4"}), None),
    ("/version", 200, "0.8.4", None),
    ("/version", 500, "boom", None),
    # /v1/models and /models: the server names itself in owned_by (any case); /models' list is llama.cpp's router
    ("/v1/models", 200, owned("vllm"), "vllm"),
    ("/v1/models", 200, owned("vLLM"), "vllm"),
    ("/v1/models", 200, owned("sglang"), "sglang"),
    ("/v1/models", 200, owned("llamacpp"), "llamacpp"),
    ("/v1/models", 200, owned("tensorrt_llm"), "trtllm"),
    ("/v1/models", 200, owned("lmdeploy"), "lmdeploy"),
    ("/v1/models", 200, owned("library"), "ollama"),
    ("/v1/models", 200, owned("ollama"), "ollama"),
    ("/v1/models", 200, owned("openai"), None),
    ("/v1/models", 200, owned(None), None),
    ("/v1/models", 200, owned(7), None),
    ("/v1/models", 200, owned("openai", "sglang"), "sglang"),
    ("/v1/models", 200, j({"data": [1, "x", {"owned_by": "lmdeploy"}]}), "lmdeploy"),
    ("/v1/models", 200, j({"data": [{"id": "m"}]}), None),
    ("/v1/models", 200, j({"data": "vllm"}), None),
    ("/v1/models", 200, j({"data": {"owned_by": "vllm"}}), None),
    ("/v1/models", 200, j([{"owned_by": "vllm"}]), None),
    ("/v1/models", 503, owned("vllm"), "vllm"),
    ("/v1/models", 404, owned("vllm"), None),
    ("/models", 200, owned("sglang"), "sglang"),
    ("/models", 200, j({"models": [{"name": "m"}]}), "llamacpp"),
    ("/models", 200, j({"models": []}), "llamacpp"),
    ("/models", 200, j({"models": {}}), None),
    ("/models", 200, j({"data": [{"owned_by": "lmdeploy"}], "models": []}), "lmdeploy"),
    ("/models", 200, j({"data": [{"owned_by": "openai"}], "models": []}), "llamacpp"),
    ("/v1/models", 200, j({"models": []}), None),
    # /metrics: a JSON list is TensorRT-LLM's; else the first metric name's prefix, sample or HELP/TYPE line
    ("/metrics", 200, "[]", "trtllm"),
    ("/metrics", 200, j([{"gpuMemUsage": 1}]), "trtllm"),
    ("/metrics", 200, "# HELP vllm:num_requests_running x\nvllm:num_requests_running 0\n", "vllm"),
    ("/metrics", 200, "vllm:num_requests_running 0\n", "vllm"),
    ("/metrics", 200, "# TYPE sglang:num_running_reqs gauge\n", "sglang"),
    ("/metrics", 200, "process_cpu_seconds_total 1\nsglang:num_running_reqs 0\n", "sglang"),
    ("/metrics", 200, "tgi_request_count 3\n", "tgi"),
    ("/metrics", 200, "# HELP llamacpp:prompt_tokens_total x\n", "llamacpp"),
    ("/metrics", 200, "lmdeploy_requests 1\n", "lmdeploy"),
    ("/prometheus/metrics", 200, "vllm:x 1\n", "vllm"),
    ("/metrics", 200, "# HELP other x\nother 1\n", None),
    ("/metrics", 200, "  vllm:x 1\n", None),
    ("/metrics", 200, "foo vllm:x 1\n", None),
    ("/metrics", 200, "#HELP vllm:x\n", None),
    ("/metrics", 200, j({"vllm:x": 1}), None),
    ("/metrics", 503, "vllm:x 1\n", None),
    ("/metrics", 503, "[]", None),
    # paths no engine is known by
    ("/unknown", 200, j({"version": "1", "tp_size": 1, "owned_by": "vllm"}), None),
    ("/v2/models", 200, owned("vllm"), None),
    # hostile bodies say nothing
    ("/server_info", 200, "[" * 100_000, None),
    ("/v1/models", 200, "{" * 100_000, None),
    ("/metrics", 200, "\x00" * 1000, None),
]


@pytest.mark.parametrize(("path", "status", "body", "engine"), CASES)
def test_one_answer_names_the_engine_it_always_named(path: str, status: int, body: str, engine: str | None) -> None:
    assert detect_from_endpoint(path, status, body) == engine


@pytest.mark.parametrize(("path", "body", "engine"), [
    ("/v1/models", owned("vllm", "sglang"), "sglang"),
    ("/v1/models", owned("lmdeploy", "llamacpp"), "llamacpp"),
    ("/metrics", "vllm:x 1\nsglang:y 1\n", "sglang"),
    ("/metrics", "tgi_x 1\nllamacpp:y 1\n", "llamacpp"),
])
def test_an_answer_two_engines_claim_alike_goes_to_the_one_registered_first(path: str, body: str, engine: str) -> None:
    # rules of one priority are weighed in the registry's order, whatever the order inside the answer (no server
    # seen lists two owners or two engines' metric names; SGLang, registered first, embeds vLLM)
    assert detect_from_endpoint(path, 200, body) == engine
