"""Engine detection from log lines and from one HTTP response (from a launch command: ``command.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from firstlight.logtext import classify_prefix
from firstlight.wire.content import NotJSON, parse_json

from .lines import clean_line
from .prefilter import Rule, compile_rules, may_match
from .profile import EngineProfile, strip_ansi

DETECT_THRESHOLD = 4


class EngineDetector:
    """Incremental log-based detection: feed lines, then ask :meth:`best`.

    Each profile's ``detect_patterns`` carry a weight; a pattern counts once however often it matches. An
    engine needs ``DETECT_THRESHOLD``; when an engine that ``embeds`` another (SGLang prints vLLM-style
    loader lines, Ollama runs llama.cpp) is detected, the embedded one is dropped.
    """

    def __init__(self, profiles: Sequence[EngineProfile]) -> None:
        self._profiles = [p for p in profiles if p.detect_patterns]
        self._order = {p.name: i for i, p in enumerate(self._profiles)}
        self._rules: list[tuple[str, Rule]] = []
        for p in self._profiles:
            for rule in compile_rules(list(p.detect_patterns)):
                self._rules.append((p.name, rule))
        self._seen: set[int] = set()
        self.scores: dict[str, int] = {p.name: 0 for p in self._profiles}
        self.lines = 0

    def feed(self, line: str) -> None:
        self.lines += 1
        raw = strip_ansi(classify_prefix(line)).rstrip("\r\n")  # bounded work per line, whatever its length
        cleaned = clean_line(raw)
        lower_raw: list[str] = []
        lower_clean: list[str] = []
        for idx, (name, rule) in enumerate(self._rules):
            if idx in self._seen:
                continue
            hit = may_match(rule, raw, lower_raw) and rule.regex.search(raw) is not None
            if not hit and cleaned != raw:
                hit = may_match(rule, cleaned, lower_clean) and rule.regex.search(cleaned) is not None
            if hit:
                self._seen.add(idx)
                self.scores[name] += int(rule.payload)

    def best(self) -> str | None:
        detected = {n: s for n, s in self.scores.items() if s >= DETECT_THRESHOLD}
        if not detected:
            return None
        for p in self._profiles:
            if p.name in detected:
                for inner in p.embeds:
                    detected.pop(inner, None)
        return max(detected, key=lambda n: (detected[n], -self._order[n]))


def detect_from_lines(
    lines: Iterable[str], profiles: Sequence[EngineProfile], max_lines: int = 5000
) -> str | None:
    det = EngineDetector(profiles)
    for i, line in enumerate(lines):
        if i >= max_lines:
            break
        det.feed(line)
    return det.best()


# --- endpoint detection -----------------------------------------------------------------------------

# (path, engine the path is characteristic of), to try in order. The decision is taken from the response
# body by ``detect_from_endpoint`` (TensorRT-LLM also serves /server_info and /version; LMDeploy is only
# recognisable from /v1/models' ``owned_by``).
DETECTION_ENDPOINTS: list[tuple[str, str]] = [
    ("/server_info", "sglang"),
    ("/get_server_info", "sglang"),
    ("/props", "llamacpp"),
    ("/info", "tgi"),
    ("/api/version", "ollama"),
    ("/version", "vllm"),
    ("/v1/models", "lmdeploy"),
]

_OWNED_BY = {
    "vllm": "vllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "tensorrt_llm": "trtllm",
    "lmdeploy": "lmdeploy",
    "library": "ollama",
    "ollama": "ollama",
}


def _json(body: str) -> Any:
    try:
        return parse_json(body)
    except NotJSON:  # deeply nested JSON included
        return None


def _is_llamacpp_loading(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    err = data.get("error")
    return (
        isinstance(err, dict)
        and err.get("type") == "unavailable_error"
        and "Loading model" in str(err.get("message", ""))
    )


def detect_from_endpoint(path: str, status: int, body: str) -> str | None:
    """Decide the engine from one HTTP response (pure). ``None`` when the response says nothing."""
    path = "/" + path.split("?", 1)[0].strip("/")
    if status in (404, 405) or (status >= 500 and status != 503):
        return None
    data = _json(body)
    if path == "/" and "Ollama is running" in body:
        return "ollama"
    if path in ("/server_info", "/get_server_info") and isinstance(data, dict):
        if "disaggregated_params" in data:
            return "trtllm"
        if "vllm_config" in data:
            return "vllm"
        if any(k in data for k in ("mem_fraction_static", "internal_states", "schedule_policy", "tp_size")):
            return "sglang"
        return None
    if path in ("/model_info", "/get_model_info") and isinstance(data, dict):
        return "sglang" if "model_path" in data and "is_generation" in data else None
    if path == "/props":
        if _is_llamacpp_loading(data):
            return "llamacpp"
        if isinstance(data, dict) and any(
            k in data for k in ("default_generation_settings", "total_slots", "build_info", "chat_template")
        ):
            return "llamacpp"
        return None
    if path in ("/health", "/v1/health"):
        if _is_llamacpp_loading(data):
            return "llamacpp"
        if isinstance(data, dict) and data.get("error_type") == "healthcheck":
            return "tgi"
        return None
    if path == "/info" and isinstance(data, dict):
        if "model_id" in data and any(
            k in data
            for k in (
                "max_total_tokens",
                "max_input_tokens",
                "max_input_length",
                "router",
                "docker_label",
                "model_dtype",
                "validation_workers",
            )
        ):
            return "tgi"
        return None
    if path == "/api/version" and status == 200 and isinstance(data, dict) and "version" in data:
        return "ollama"
    if path == "/version" and status == 200 and isinstance(data, dict) and "version" in data:
        return "vllm"
    if path in ("/v1/models", "/models") and isinstance(data, dict):
        models = data.get("data")
        if isinstance(models, list):
            for m in models:
                if isinstance(m, dict):
                    eng = _OWNED_BY.get(str(m.get("owned_by", "")).lower())
                    if eng:
                        return eng
        if "models" in data and isinstance(data.get("models"), list) and path == "/models":
            return "llamacpp"
        return None
    if path in ("/metrics", "/prometheus/metrics") and status == 200:
        if isinstance(data, list):
            return "trtllm"
        for prefix, eng in (
            ("vllm:", "vllm"),
            ("sglang:", "sglang"),
            ("tgi_", "tgi"),
            ("llamacpp:", "llamacpp"),
            ("lmdeploy", "lmdeploy"),
        ):
            if re.search(r"(?m)^(?:# (?:HELP|TYPE) )?" + re.escape(prefix), body):
                return eng
    return None
