"""The simulated server's HTTP side: its endpoints (health, model list, completions and chat, streaming too,
the engine's own info and metrics), answered from the simulated engine's state."""

from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from firstlight.sim.dialects import Dialect


class Simulated(Protocol):
    """What the endpoints read of the simulated engine (firstlight.sim.server.Sim)."""

    args: argparse.Namespace
    state: Any
    dialect: Dialect

    def say(self, key: str, stream: str = "stderr", end: str = "\n", **kw: Any) -> None: ...
    def generate(self, max_tokens: int) -> list[str]: ...
    def count_spec(self, tokens: int) -> dict[str, Any]: ...


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # socketserver's default backlog of 5 resets connections under a concurrent bench


class SimHandler(BaseHTTPRequestHandler):
    sim: Simulated
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _access(self, status: int) -> None:
        self.sim.say("access", cport=self.client_address[1], method=self.command, path=self.path, status=status,
                     reason="OK" if status == 200 else "Service Unavailable")

    def _json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self._access(status)

    def _loading(self) -> None:
        self._json(503, {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}})

    def _authorized(self) -> bool:
        key = self.sim.args.api_key
        if key and self.headers.get("Authorization") != f"Bearer {key}" and self.path not in ("/health",):
            self._json(401, {"error": {"message": "Invalid API Key", "type": "invalid_request_error"}})
            return False
        return True

    def do_GET(self) -> None:
        sim, st = self.sim, self.sim.state
        path = self.path.split("?")[0]
        dialect = sim.dialect.name
        if st.dummy:  # a worker node: 200 forever on its health paths, nothing else
            self._json(200 if path in ("/health", "/health_generate", "/ping") else 404, {})
            return
        if path in ("/health", "/v1/health", "/health_generate"):
            if st.ready:
                self._json(200, {"status": "ok"} if dialect == "llamacpp" else {})
            else:
                self._loading()
        elif path == "/v1/models":
            if not self._authorized():
                return
            self._json(200, {"object": "list", "data": [{"id": sim.args.served_model_name, "object": "model",
                                                          "owned_by": dialect}]})
        elif path in ("/model_info", "/get_model_info") and dialect == "sglang":
            if not self._authorized():  # SGLang's key guards every path but /health* and /metrics
                return
            self._json(200, {"model_path": sim.args.model_path, "is_generation": True})
        elif path in ("/server_info", "/get_server_info") and dialect == "sglang":
            if not self._authorized():
                return
            states = [{"avg_spec_accept_length": st.spec_accept}] if st.spec_accept is not None else [{}]
            extra = _json_file(sim.args.server_info) if st.ready else {}  # the engine's answer once it is up
            self._json(200, {"version": "0.5.23-sim", "internal_states": states,
                             "speculative_algorithm": "EAGLE" if st.spec_accept is not None else None, **extra})
        elif path == "/props" and dialect == "llamacpp":
            if st.ready:
                self._json(200, {"model_path": sim.args.model_path, "total_slots": 1, "build_info": "b11434-sim"})
            else:
                self._loading()
        elif path == "/version" and dialect == "vllm":
            self._json(200, {"version": "0.11.0-sim"})
        elif path == "/metrics":
            body = _metrics(sim).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        sim, st = self.sim, self.sim.state
        path = self.path.split("?")[0]
        if st.dummy:
            self._json(404, {})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "invalid JSON"}})
            return
        if path not in ("/v1/completions", "/v1/chat/completions", "/completion"):
            self._json(404, {"detail": "Not Found"})
            return
        if not self._authorized():
            return
        if not st.ready:
            self._loading()
            return
        chat = path == "/v1/chat/completions"
        max_tokens = int(req.get("max_tokens") or req.get("n_predict") or 16)
        t0 = time.time()
        words = sim.generate(max_tokens)
        prompt_tokens = len(str(req.get("prompt") or req.get("messages") or "").split())
        if req.get("stream"):
            self._stream(words, chat, prompt_tokens, t0, bool((req.get("stream_options") or {}).get("include_usage")))
            return
        time.sleep(len(words) / st.token_rate)
        text = "".join(words)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(words),
                 "total_tokens": prompt_tokens + len(words)}
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        with st.lock:
            st.tokens_out += len(words)
            st.requests += 1
        out: dict[str, Any] = {"id": "cmpl-sim", "object": "chat.completion" if chat else "text_completion",
                               "model": sim.args.served_model_name, "choices": [choice], "usage": usage}
        spec = sim.count_spec(len(words))
        if sim.dialect.name == "llamacpp":
            dt = time.time() - t0
            out["timings"] = {"predicted_n": len(words), "predicted_ms": dt * 1000,
                              "predicted_per_second": len(words) / dt if dt else None, **spec}
        self._json(200, out)

    def _stream(self, words: list[str], chat: bool, prompt_tokens: int, t0: float, include_usage: bool) -> None:
        sim, st = self.sim, self.sim.state
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for w in words:
            time.sleep(1.0 / st.token_rate)
            delta: dict[str, Any] = {"delta": {"content": w}} if chat else {"text": w}
            chunk = {"id": "cmpl-sim", "choices": [{"index": 0, **delta, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        spec = sim.count_spec(len(words))
        final: dict[str, Any] = {"id": "cmpl-sim", "choices": [{"index": 0, **({"delta": {}} if chat else {"text": ""}),
                                                                 "finish_reason": "length"}]}
        if include_usage:
            final["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": len(words),
                              "total_tokens": prompt_tokens + len(words)}
        if sim.dialect.name == "llamacpp":
            dt = time.time() - t0
            final["timings"] = {"predicted_n": len(words), "predicted_ms": dt * 1000, **spec}
        self.wfile.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        with st.lock:
            st.tokens_out += len(words)
            st.requests += 1
        self._access(200)


def _json_file(path: str | None) -> dict[str, Any]:
    """--server-info: a captured answer's fields, served as they are."""
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {}


def _metrics(sim: Simulated) -> str:
    st = sim.state
    lines = []
    if sim.args.extra_metrics and st.ready:  # a captured exposition (the engine's startup gauges)
        with open(sim.args.extra_metrics, encoding="utf-8") as f:
            lines += f.read().splitlines()
    if sim.dialect.name == "vllm":
        lines += [f"vllm:generation_tokens_total {st.tokens_out}", f"vllm:request_success_total {st.requests}"]
        if st.spec_accept is not None:
            lines += [f"vllm:spec_decode_num_drafts_total {st.spec_drafts}",
                      f"vllm:spec_decode_num_draft_tokens_total {st.spec_draft_tokens}",
                      f"vllm:spec_decode_num_accepted_tokens_total {st.spec_accepted_tokens}"]
    elif sim.dialect.name == "sglang":
        lines += [f"sglang:generation_tokens_total {st.tokens_out}"]
        if st.spec_accept is not None:
            lines += [f"sglang:spec_accept_length {st.spec_accept}",
                      f"sglang:spec_verify_calls_total {st.spec_drafts}"]
    else:
        lines += [f"llamacpp:tokens_predicted_total {st.tokens_out}", "llamacpp:requests_processing 0"]
    return "\n".join(lines) + "\n"
