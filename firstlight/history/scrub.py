"""Secrets out of what the history stores: every string of a run's summary and benchmark, before it is written."""

from __future__ import annotations

from typing import Any

from firstlight.redact import MASK, Redactor, is_secret_name


def scrub(obj: Any, r: Redactor) -> Any:
    """``obj`` with secret-named fields masked and every string redacted."""
    if isinstance(obj, dict):
        return {k: MASK if isinstance(v, str) and v and is_secret_name(str(k)) else scrub(v, r)
                for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [scrub(v, r) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj, r)
    return obj


_PATTERN_HINTS = ("=", ":", "Bearer", "hf_", "sk-")


def redact_text(s: str, r: Redactor) -> str:
    """``r.text`` with a fast path: its key=value pattern is quadratic in the length of a long word, so strings
    that cannot match any of its patterns (no '=', ':', 'Bearer', 'hf_', 'sk-') only get the literal secrets."""
    if any(h in s for h in _PATTERN_HINTS):
        return r.text(s)
    for secret in sorted(r.secrets, key=len, reverse=True):
        s = s.replace(secret, MASK)
    return s
