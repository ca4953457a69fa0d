"""Each engine's HTTP behaviour during loading and after, reproduced by one parametrized fake server
(status codes and bodies from the engines' source, see shared/engines.md section 1), checked against the
profiles' endpoint data: which endpoints lie while loading, whether the port opens before the model can
serve, which health endpoint tells the truth, and that detection over the paths identification asks finds the engine.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from firstlight.engines import detect_from_endpoint, detection_paths, get_profile

Route = tuple[int, str]  # status, body
Table = dict[str, Route]


def j(obj: Any) -> str:
    return json.dumps(obj)


def models(owner: str) -> str:
    return j({"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": owner}]})


LLAMA_LOADING = j({"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}})
SGLANG_SERVER_INFO = j(
    {"model_path": "m", "mem_fraction_static": 0.8, "internal_states": [{}], "version": "0.5.23"}
)
SGLANG_MODEL_INFO = j({"model_path": "m", "is_generation": True})

# engine -> {"loading": table or None (port not accepting connections), "ready": table}
# a route "POST /path" is a POST; plain "/path" is a GET
FAKES: dict[str, dict[str, Table | None]] = {
    "sglang": {  # 0.5.x: uvicorn is up during the internal warmup, /health answers 503 until it is done
        "loading": {
            "/health": (503, ""),
            "/health_generate": (503, ""),
            "/ready": (503, ""),
            "/model_info": (200, SGLANG_MODEL_INFO),
            "/get_model_info": (200, SGLANG_MODEL_INFO),
            "/v1/models": (200, models("sglang")),
            "/server_info": (200, SGLANG_SERVER_INFO),
            "/get_server_info": (200, SGLANG_SERVER_INFO),
            "/ping": (200, ""),
        },
        "ready": {
            "/health": (200, ""),
            "/health_generate": (200, ""),
            "/ready": (200, ""),
            "/model_info": (200, SGLANG_MODEL_INFO),
            "/v1/models": (200, models("sglang")),
            "/server_info": (200, SGLANG_SERVER_INFO),
            "/get_server_info": (200, SGLANG_SERVER_INFO),
            "/metrics": (200, "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0\n"),
            "/ping": (200, ""),
            "POST /v1/completions": (200, j({"choices": [{"text": " Paris"}]})),
        },
    },
    "sglang-0.4": {  # 0.4.x: /health is "Check the health of the http server": always 200
        "loading": {
            "/health": (200, ""),
            "/health_generate": (503, ""),
            "/get_model_info": (200, SGLANG_MODEL_INFO),
            "/v1/models": (200, models("sglang")),
            "/get_server_info": (200, SGLANG_SERVER_INFO),
        },
        "ready": {
            "/health": (200, ""),
            "/health_generate": (200, ""),
            "/get_model_info": (200, SGLANG_MODEL_INFO),
            "/v1/models": (200, models("sglang")),
            "/get_server_info": (200, SGLANG_SERVER_INFO),
        },
    },
    "vllm": {  # binds early but does not listen() until the engine is built
        "loading": None,
        "ready": {
            "/health": (200, ""),
            "/ping": (200, ""),
            "/v1/models": (200, models("vllm")),
            "/version": (200, j({"version": "0.10.0"})),
            "/load": (200, j({"server_load": 0})),
            "/metrics": (200, "# HELP vllm:num_requests_running x\nvllm:num_requests_running 0.0\n"),
            "POST /v1/completions": (200, j({"choices": [{"text": " Paris"}]})),
        },
    },
    "llamacpp": {  # listens before loading; a middleware answers 503 "Loading model" except /models
        "loading": {
            "/health": (503, LLAMA_LOADING),
            "/v1/health": (503, LLAMA_LOADING),
            "/props": (503, LLAMA_LOADING),
            "/slots": (503, LLAMA_LOADING),
            "/metrics": (503, LLAMA_LOADING),
            "/": (503, "<html>loading</html>"),
            "/v1/models": (200, models("llamacpp")),
            "/models": (200, j({"models": [{"name": "m.gguf"}]})),
            "/api/tags": (200, j({"models": [{"name": "m.gguf"}]})),
            "POST /v1/completions": (503, LLAMA_LOADING),
        },
        "ready": {
            "/health": (200, j({"status": "ok"})),
            "/v1/health": (200, j({"status": "ok"})),
            "/props": (200, j({"default_generation_settings": {}, "total_slots": 1, "build_info": "b5240"})),
            "/v1/models": (200, models("llamacpp")),
            "/metrics": (
                200,
                "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 0\n",
            ),
            "POST /v1/completions": (200, j({"choices": [{"text": " Paris"}]})),
        },
    },
    "tgi": {  # the router binds only after warmup
        "loading": None,
        "ready": {
            "/health": (200, ""),
            "/": (200, ""),
            "/info": (
                200,
                j({"model_id": "m", "max_total_tokens": 4096, "max_input_tokens": 4095, "version": "3.3"}),
            ),
            "/v1/models": (200, models("m")),
            "/metrics": (200, "# TYPE tgi_request_count counter\ntgi_request_count 0\n"),
            "POST /v1/completions": (200, j({"choices": [{"text": " Paris"}]})),
        },
    },
    "trtllm": {  # binds a socket first, listens once the LLM is built
        "loading": None,
        "ready": {
            "/health": (200, ""),
            "/health_generate": (200, "Generation health check OK"),
            "/version": (200, j({"version": "1.0.0"})),
            "/server_info": (200, j({"disaggregated_params": None})),
            "/v1/models": (200, models("tensorrt_llm")),
            "/metrics": (200, "[]"),
            "POST /v1/completions": (200, j({"choices": [{"text": " Paris"}]})),
        },
    },
    "lmdeploy": {  # the engine is built before uvicorn.run; /health is 503 "initializing" for a moment
        "loading": None,
        "ready": {
            "/health": (200, j({"status": "healthy"})),
            "/v1/models": (200, models("lmdeploy")),
            "POST /v1/completions": (200, j({"choices": [{"text": " Paris"}]})),
        },
    },
    "ollama": {  # the daemon is up at once; a model loads on its first request
        "loading": {
            "/": (200, "Ollama is running"),
            "/api/version": (200, j({"version": "0.6.0"})),
            "/api/tags": (200, j({"models": [{"name": "m"}]})),
            "/api/ps": (200, j({"models": []})),
            "/v1/models": (200, models("library")),
        },
        "ready": {
            "/": (200, "Ollama is running"),
            "/api/version": (200, j({"version": "0.6.0"})),
            "/api/tags": (200, j({"models": [{"name": "m"}]})),
            "/api/ps": (200, j({"models": [{"name": "m"}]})),
            "/v1/models": (200, models("library")),
            "POST /v1/completions": (200, j({"choices": [{"text": " Paris"}]})),
        },
    },
}


def engine_of(fake: str) -> str:
    return fake.split("-")[0]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _reply(self, method: str) -> None:
        table = self.server.fake.table()
        path = self.path.split("?", 1)[0]
        key = path if method == "GET" else f"{method} {path}"
        status, body = table.get(key, (404, j({"detail": "Not Found"})))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if body[:1] in "{[" else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(data)

    def do_GET(self) -> None:
        self._reply("GET")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self._reply("POST")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeEngine


class FakeEngine:
    """Binds at once; accepts connections only from the first state that has a table (like vLLM/trtllm,
    which bind early and listen late, a closed state refuses connections)."""

    def __init__(self, spec: dict[str, Table | None]) -> None:
        self.spec = spec
        self.state = "loading"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None
        if spec["loading"] is not None:
            self._listen()

    def table(self) -> Table:
        return self.spec[self.state] or {}

    def _listen(self) -> None:
        server = _Server(("127.0.0.1", self.port), _Handler, bind_and_activate=False)
        server.socket.close()
        server.socket = self.sock
        server.server_activate()
        server.fake = self
        self.server = server
        self.thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def set_ready(self) -> None:
        self.state = "ready"
        if self.server is None:
            self._listen()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        else:
            self.sock.close()


@contextmanager
def fake_engine(name: str) -> Iterator[FakeEngine]:
    fake = FakeEngine(FAKES[name])
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture()
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(2.0, connect=1.0), trust_env=False) as c:
        yield c


@pytest.mark.parametrize("fake_name", sorted(FAKES))
def test_port_opens_before_ready_matches_profile(fake_name: str, client: httpx.Client) -> None:
    profile = get_profile(engine_of(fake_name))
    with fake_engine(fake_name) as fake:
        opens_early = FAKES[fake_name]["loading"] is not None
        assert profile.endpoints.listens_before_ready is opens_early
        if not opens_early:
            with pytest.raises(httpx.ConnectError):
                client.get(fake.base + profile.endpoints.health)
        fake.set_ready()
        assert client.get(fake.base + profile.endpoints.health).status_code == 200


@pytest.mark.parametrize(
    "fake_name", sorted(name for name, spec in FAKES.items() if spec["loading"] is not None)
)
def test_lying_endpoints_match_profile(fake_name: str, client: httpx.Client) -> None:
    """While loading, every endpoint that answers 200 is declared as lying (and the profile's health
    endpoint is not fooled)."""
    profile = get_profile(engine_of(fake_name))
    loading = FAKES[fake_name]["loading"]
    assert loading is not None
    with fake_engine(fake_name) as fake:
        for route in loading:
            if route.startswith("POST "):
                continue
            status = client.get(fake.base + route).status_code
            if status == 200:
                assert route in profile.endpoints.lying_while_loading, f"{route} answers 200 while loading"
        health = client.get(fake.base + profile.endpoints.health).status_code
        if profile.endpoints.health in profile.endpoints.lying_while_loading:
            assert health == 200  # Ollama: the daemon is up; readiness needs a generation (or /api/ps)
        else:
            assert health != 200, "the profile's health endpoint must not be fooled while loading"
        fake.set_ready()
        assert client.get(fake.base + profile.endpoints.health).status_code == 200


@pytest.mark.parametrize("engine", sorted({engine_of(n) for n, spec in FAKES.items() if spec["loading"]}))
def test_every_declared_lying_endpoint_lies_in_some_version(engine: str, client: httpx.Client) -> None:
    profile = get_profile(engine)
    lying: set[str] = set()
    for name in (n for n in FAKES if engine_of(n) == engine and FAKES[n]["loading"] is not None):
        with fake_engine(name) as fake:
            for path in profile.endpoints.lying_while_loading:
                if client.get(fake.base + path).status_code == 200:
                    lying.add(path)
    assert lying == set(profile.endpoints.lying_while_loading)


def test_llamacpp_models_200_while_health_503(client: httpx.Client) -> None:
    p = get_profile("llamacpp")
    with fake_engine("llamacpp") as fake:
        assert client.get(fake.base + "/health").status_code == 503
        assert client.get(fake.base + "/v1/models").status_code == 200
        assert client.post(fake.base + p.endpoints.completions, json={"prompt": "x"}).status_code == 503
        assert "/v1/models" in p.endpoints.lying_while_loading
        assert "/health" not in p.endpoints.lying_while_loading
        assert detect_from_endpoint("/health", 503, client.get(fake.base + "/health").text) == "llamacpp"


def test_sglang_model_info_200_while_health_503(client: httpx.Client) -> None:
    p = get_profile("sglang")
    with fake_engine("sglang") as fake:
        assert client.get(fake.base + "/health").status_code == 503
        assert client.get(fake.base + "/model_info").status_code == 200
        assert "/model_info" in p.endpoints.lying_while_loading
        # the profile polls /health_generate, which is a real 1-token check on 0.4.x and 0.5.x alike
        assert p.endpoints.health == "/health_generate"
        assert client.get(fake.base + p.endpoints.health).status_code == 503


def test_sglang_04_health_lies(client: httpx.Client) -> None:
    p = get_profile("sglang")
    with fake_engine("sglang-0.4") as fake:
        assert client.get(fake.base + "/health").status_code == 200
        assert "/health" in p.endpoints.lying_while_loading
        assert client.get(fake.base + p.endpoints.health).status_code == 503


def test_vllm_refuses_connections_until_ready(client: httpx.Client) -> None:
    p = get_profile("vllm")
    assert p.endpoints.listens_before_ready is False
    with fake_engine("vllm") as fake:
        with pytest.raises(httpx.ConnectError):
            client.get(fake.base + "/health")
        fake.set_ready()
        assert client.get(fake.base + "/health").status_code == 200
        assert client.post(fake.base + p.endpoints.completions, json={"prompt": "x"}).status_code == 200


@pytest.mark.parametrize("fake_name", sorted(FAKES))
def test_detection_over_detection_endpoints(fake_name: str, client: httpx.Client) -> None:
    """Probing the identification's paths in order (then /) names the engine."""
    engine = engine_of(fake_name)
    with fake_engine(fake_name) as fake:
        fake.set_ready()
        found = None
        for path in [*detection_paths(), "/"]:
            r = client.get(fake.base + path)
            found = detect_from_endpoint(path, r.status_code, r.text)
            if found is not None:
                break
        assert found == engine


@pytest.mark.parametrize("fake_name", sorted(FAKES))
def test_models_and_info_endpoints_answer_when_ready(fake_name: str, client: httpx.Client) -> None:
    profile = get_profile(engine_of(fake_name))
    ready = FAKES[fake_name]["ready"]
    assert ready is not None
    with fake_engine(fake_name) as fake:
        fake.set_ready()
        if profile.endpoints.models:
            r = client.get(fake.base + profile.endpoints.models)
            assert r.status_code == 200 and r.json()["data"]
        for path in profile.endpoints.info:
            if path in ready:
                assert client.get(fake.base + path).status_code == 200
        if f"POST {profile.endpoints.completions}" in ready:
            r = client.post(fake.base + profile.endpoints.completions, json={"prompt": "x", "max_tokens": 1})
            assert r.status_code == 200 and r.json()["choices"]
