"""Which engine serves a URL, from its engine-specific endpoints, within a fixed budget.

All the endpoints are asked at once, each request bounded by the same deadline, so a server whose endpoints
never answer costs ``budget_s`` in all, not one full timeout per endpoint. Answers are weighed in a fixed order:
``/v1/models``' ``owned_by`` (the server naming itself) first, then each engine's own endpoints, then
``/metrics`` prefixes.
"""

from __future__ import annotations

import threading
import time

from firstlight.wire.client import Answer, Wire

IDENTIFY_BUDGET_S = 2.0


def identify_paths() -> list[str]:
    from firstlight.engines import DETECTION_ENDPOINTS  # engines import the wire's parsers: import late

    return ["/v1/models", *dict.fromkeys(p for p, _ in DETECTION_ENDPOINTS if p != "/v1/models"), "/metrics"]


def identify_engine(wire: Wire, budget_s: float = IDENTIFY_BUDGET_S) -> tuple[str, str] | None:
    """``(engine, "GET path -> status")`` or None when no endpoint says, all within ``budget_s``."""
    from firstlight.engines import detect_from_endpoint

    paths = identify_paths()
    until = time.monotonic() + budget_s
    answers: dict[str, Answer] = {}
    lock = threading.Lock()

    def ask(path: str) -> None:
        try:
            a = wire.get(path, read_timeout=budget_s, deadline_at=until)
        except Exception:  # WireError or worse: identification is best effort, never fatal
            return
        with lock:
            answers[path] = a

    threads = [threading.Thread(target=ask, args=(p,), name="firstlight-identify", daemon=True) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, until - time.monotonic()) + 0.5)
    with lock:
        got = dict(answers)
    for path in paths:
        a = got.get(path)
        if a is None:
            continue
        try:
            name = detect_from_endpoint(path, a.status, a.body[:65536].decode("utf-8", "replace"))
        except Exception:  # a parser bug on hostile input is "says nothing"
            name = None
        if name is not None:
            return name, f"GET {path} -> {a.status}"
    return None
