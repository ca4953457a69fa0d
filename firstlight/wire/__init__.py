"""The one HTTP layer between firstlight and a server: the readiness ladder, the serving checks, the members'
/readyz, the engine's model-load stream and the benchmark all go through it; no request is made elsewhere.

- ``client``: ``Wire`` (blocking) and ``AsyncWire`` (streaming): headers (User-Agent, the bearer token), connect
  and read timeouts, a wall-clock deadline on every request covering connect, headers and body, capped bodies;
  ``Wire.stream``: an event stream, its headers by the deadline, then each read within the read timeout;
- ``deadline``: how that deadline is enforced (an httpcore network backend; httpx's timeouts are per read);
- ``content``: what a server said: JSON that cannot blow the stack, the model list (one parser), generated text
  (completion or chat, whole or streamed), event-stream lines with a capped pending line, and server text made
  safe to print;
- ``errors``: ``WireError`` and the one describer of a failed request;
- ``urls``: base URLs (no ``/v1/v1``, no port 0).

The bottom HTTP layer: it imports nothing of firstlight but the leaves (which engine serves a URL is asked
through it, from :mod:`firstlight.probes.identify`).
"""

from firstlight.wire.client import USER_AGENT, Answer, AsyncWire, Wire, headers
from firstlight.wire.content import (
    MAX_BODY,
    LineTooLong,
    NotJSON,
    SSELines,
    answer_tokens,
    chunk_text,
    clean_text,
    generated_text,
    model_ids,
    parse_json,
    says_unhealthy,
)
from firstlight.wire.errors import WireError, describe_error
from firstlight.wire.urls import join_url, normalise_url, split_url

__all__ = [
    "MAX_BODY",
    "USER_AGENT",
    "Answer",
    "AsyncWire",
    "LineTooLong",
    "NotJSON",
    "SSELines",
    "Wire",
    "WireError",
    "answer_tokens",
    "chunk_text",
    "clean_text",
    "describe_error",
    "generated_text",
    "headers",
    "join_url",
    "model_ids",
    "normalise_url",
    "parse_json",
    "says_unhealthy",
    "split_url",
]
