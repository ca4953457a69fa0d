"""What a server said, read once for everybody: JSON, the model list, generated text, event-stream lines, and
server-controlled text made safe to print.

Every parser here is total: hostile input (deeply nested JSON, huge numbers, lines that never end, escape
sequences) gives "not JSON", "not a model list" or a clean, clipped string, never an exception that escapes.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from firstlight.errors import FirstlightError
from firstlight.logtext import ANSI_RE

MAX_BODY = 4 << 20  # bytes of one answer that are read; the rest is left unread
MAX_SSE_LINE = 1 << 20  # bytes of one unterminated event-stream line before the stream is refused
MAX_MODEL_ID = 512  # characters: a longer "id" is not a model name
_UNHEALTHY = {"unhealthy", "loading", "initializing", "starting", "error", "unavailable", "not_ready"}
# C0 and C1 controls, DEL, and the Unicode bidirectional overrides (which reorder what a terminal shows).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SPACE_RE = re.compile(r"[\t\n]+")


class NotJSON(FirstlightError, ValueError):
    """The body is not JSON (or is JSON nested too deeply to read safely)."""


def parse_json(raw: bytes | str) -> Any:
    """``json.loads`` that fails only with :class:`NotJSON` (RecursionError on deep nesting included)."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise NotJSON("JSON nested too deeply") from None
    except (ValueError, TypeError) as e:  # UnicodeDecodeError is a ValueError
        raise NotJSON(str(e)[:120]) from None


def clean_text(text: str, limit: int = 200) -> str:
    """Server-controlled text fit for a terminal or a JSON report: ANSI/OSC escapes and control characters
    removed, newlines and tabs as spaces, at most ``limit`` characters (then "…")."""
    bound = limit * 4 + 64  # bound the work on a 4 MiB body
    head = _CONTROL_RE.sub("", _SPACE_RE.sub(" ", ANSI_RE.sub("", text[:bound])))
    clipped = len(head) > limit or len(text) > bound
    return head[:limit] + ("…" if clipped else "")


def snippet(body: bytes, limit: int = 160) -> str:
    """The start of a body as one clean line."""
    bound = limit * 4 + 64
    text = clean_text(body[:bound].decode("utf-8", "replace"), limit).strip()
    return text + "…" if len(body) > bound and not text.endswith("…") else text


def model_ids(data: Any) -> list[str] | None:
    """Model ids of a model list, or None if ``data`` is not one. The one parser for probe and bench: the list
    is under ``data`` (OpenAI) or ``models`` (Ollama, llama.cpp's /models); an entry names its model by
    ``id``, ``name`` or ``model``."""
    if not isinstance(data, dict):
        return None
    items = data.get("data", data.get("models"))
    if not isinstance(items, list):
        return None
    ids = []
    for m in items:
        if isinstance(m, dict):
            name = m.get("id") or m.get("name") or m.get("model")
            if isinstance(name, str) and name.strip() and len(name) <= MAX_MODEL_ID:
                ids.append(name)
    return ids


def says_unhealthy(data: Any) -> bool:
    """A 200 whose JSON says otherwise (Dynamo's frontend, LMDeploy's monitor)."""
    if isinstance(data, dict):
        status = data.get("status")
        return isinstance(status, str) and status.lower() in _UNHEALTHY
    return False


def generated_text(data: Any, chat: bool) -> tuple[str | None, str | None]:
    """The text of a non-streamed completion (``chat``: a chat completion), or why it is not one."""
    if not isinstance(data, dict):
        return None, "not a JSON object"
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, "no choices in the answer"
    c = choices[0]
    if chat:
        msg = c["message"] if isinstance(c.get("message"), dict) else {}
        text = msg.get("content") or msg.get("reasoning_content") or msg.get("reasoning")
    else:
        text = c.get("text")
    if not isinstance(text, str):
        return None, "no text in the first choice"
    if not text.strip():
        return text, "an empty completion"
    return text, None


MAX_ANSWER_TOKENS = 4096  # tokens of one answer read with their log-probabilities (the most --max-tokens allows)


def answer_tokens(data: Any) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The tokens of a non-streamed answer and their log-probabilities, as the engine returned them when asked
    (``logprobs``); ``((), ())`` when it returned none, and no log-probabilities unless every token has a finite
    one. Two shapes: the completions API's ``logprobs.tokens`` / ``logprobs.token_logprobs`` (vLLM, SGLang), and
    the chat API's ``logprobs.content[].token`` / ``.logprob`` (every chat API; llama.cpp's server answers its
    completions API in this shape too)."""
    if not isinstance(data, dict):
        return (), ()
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return (), ()
    lp = choices[0].get("logprobs")
    if not isinstance(lp, dict):
        return (), ()
    content = lp.get("content")
    if isinstance(content, list):
        items = [c for c in content[:MAX_ANSWER_TOKENS] if isinstance(c, dict)]
        if len(items) != len(content[:MAX_ANSWER_TOKENS]):
            return (), ()
        tokens: list[Any] = [c.get("token") for c in items]
        values: list[Any] = [c.get("logprob") for c in items]
    else:
        raw, raw_values = lp.get("tokens"), lp.get("token_logprobs")
        if not isinstance(raw, list):
            return (), ()
        tokens = raw[:MAX_ANSWER_TOKENS]
        values = raw_values[:MAX_ANSWER_TOKENS] if isinstance(raw_values, list) else []
    if not tokens or not all(isinstance(t, str) for t in tokens):
        return (), ()
    finite = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    return tuple(tokens), tuple(float(v) for v in finite) if len(finite) == len(tokens) == len(values) else ()


def chunk_text(obj: Any, chat: bool) -> str:
    """The text of one streamed chunk ("" when it carries none)."""
    if not isinstance(obj, dict):
        return ""
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    c = choices[0]
    if chat:
        delta = c.get("delta")
        if not isinstance(delta, dict):
            return ""
        text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
    else:
        text = c.get("text")
    return text if isinstance(text, str) else ""


class LineTooLong(FirstlightError, ValueError):
    """An event-stream line longer than its cap, still without its end."""


class SSELines:
    """Lines of a server-sent event stream from its bytes, split here rather than by httpx so that the one
    line still pending is capped: a stream that never sends a newline costs ``max_line`` bytes, not memory
    without end. Lines end with LF or CRLF; invalid UTF-8 is replaced."""

    def __init__(self, max_line: int = MAX_SSE_LINE) -> None:
        self._pending = bytearray()
        self._max = max_line

    def feed(self, chunk: bytes) -> list[str]:
        self._pending += chunk
        if b"\n" not in chunk:
            self._check()
            return []
        *lines, rest = bytes(self._pending).split(b"\n")
        self._pending = bytearray(rest)
        self._check()
        return [line.rstrip(b"\r").decode("utf-8", "replace") for line in lines]

    def flush(self) -> list[str]:
        rest, self._pending = bytes(self._pending), bytearray()
        return [rest.rstrip(b"\r").decode("utf-8", "replace")] if rest else []

    def _check(self) -> None:
        if len(self._pending) > self._max:
            raise LineTooLong(f"an event-stream line longer than {self._max} bytes")


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format -> {sample name: value}: counters (``_total`` or TYPE counter) summed over label
    sets, other metrics averaged. Parsed by prometheus-client; a line it rejects is skipped, not fatal."""
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:  # one bad line fails the whole text: parse line by line and keep what parses
        families = []
        for line in text.splitlines():
            if line and not line.startswith("#"):
                with contextlib.suppress(ValueError):
                    families.extend(text_string_to_metric_families(line + "\n"))
    seen: dict[str, list[float]] = {}
    counters: set[str] = set()
    for family in families:
        for sample in family.samples:
            if math.isnan(sample.value):
                continue
            seen.setdefault(sample.name, []).append(sample.value)
            if family.type == "counter" or sample.name.endswith("_total"):
                counters.add(sample.name)
    return {name: sum(vs) if name in counters else sum(vs) / len(vs) for name, vs in seen.items()}
