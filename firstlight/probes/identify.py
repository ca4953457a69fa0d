"""Which engine serves a URL, from its engine-specific endpoints, within a fixed budget.

All the endpoints are asked at once, each request bounded by the same deadline, so a server whose endpoints
never answer costs ``budget_s`` in all, not one full timeout per endpoint. The paths and their order are the
registered profiles' ``endpoint_rules``, weighed by priority (``/v1/models``' ``owned_by``, the server naming itself,
first; each engine's own endpoints; ``/metrics`` prefixes last); the answer is given as soon as those received
decide it.

It lives with the probes, above both the wire (how to ask) and the engines (what each engine's endpoints
say), so neither of those imports the other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from firstlight.engines import detect_from_endpoint, detection_paths
from firstlight.wire import Answer, Wire

IDENTIFY_BUDGET_S = 2.0


def identify_paths() -> list[str]:
    """The paths the registered profiles' endpoint rules ask, in the order they are weighed."""
    return detection_paths()


def identify_engine(wire: Wire, budget_s: float = IDENTIFY_BUDGET_S) -> tuple[str, str] | None:
    """``(engine, "GET path -> status")`` or None when no endpoint says, all within ``budget_s``."""
    paths = identify_paths()
    until = time.monotonic() + budget_s
    answers: dict[str, Answer | None] = {}  # None: asked, no usable answer
    changed = threading.Condition()

    def ask(path: str) -> None:
        answer: Answer | None
        try:
            answer = wire.get(path, read_timeout=budget_s, deadline_at=until)
        except Exception:  # WireError or worse: identification is best effort, never fatal
            answer = None
        with changed:
            answers[path] = answer
            changed.notify_all()

    for p in paths:
        threading.Thread(target=ask, args=(p,), name="firstlight-identify", daemon=True).start()
    with changed:
        while True:
            decided, found = _decide(paths, answers, detect_from_endpoint)
            left = until - time.monotonic()
            if decided or left <= 0:
                return found
            changed.wait(left)


def _decide(paths: list[str], answers: dict[str, Answer | None],
            detect: Callable[[str, int, str], str | None]) -> tuple[bool, tuple[str, str] | None]:
    """(decided, result) from the answers so far, weighed in ``paths`` order: decided once a path names the
    engine and every path before it has answered without naming one, or once all have answered."""
    for path in paths:
        if path not in answers:
            return False, None  # a path weighed earlier is still out
        a = answers[path]
        if a is None:
            continue
        try:
            name = detect(path, a.status, a.body[:65536].decode("utf-8", "replace"))
        except Exception:  # a parser bug on hostile input is "says nothing"
            name = None
        if name is not None:
            return True, (name, f"GET {path} -> {a.status}")
    return True, None
