"""Numbers read from outside: framed records' times, journal fields, engine endpoints, history rows, headers.

A number that another program wrote may be anything JSON or text can hold: ``1e400`` (infinite once read),
a 400-digit integer (``float()`` of it overflows), ``"²"`` (``str.isdigit()`` says yes, ``int()`` says no), ``NaN``.
Each is refused here, as None, so that no reader loops on it, raises on it or carries it into a verdict. The
callers state the range a value may have; nothing out of it is clipped into it.
"""

from __future__ import annotations

import math
import re

# ASCII digits only (``\d`` would take any Unicode digit), an optional sign, fraction and exponent, and a bounded
# length: a number that needs more than 64 characters is not one a server or a shipper writes honestly.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?", re.ASCII)
MAX_CHARS = 64


def number(value: object, low: float, high: float) -> float | None:
    """``value`` (an int, a float or its decimal text) as a float with ``low <= value <= high``, else None:
    a bool, a non-finite value, one out of range, text that is not plain ASCII decimal."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        # compared as an int: float() of a 400-digit integer raises OverflowError
        return float(value) if low <= value <= high else None
    if isinstance(value, float):
        f = value
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_CHARS or _DECIMAL.fullmatch(text) is None:
            return None
        f = float(text)
    else:
        return None
    return f if math.isfinite(f) and low <= f <= high else None


def whole(text: object, max_digits: int) -> int | None:
    """``text`` as a non-negative integer of at most ``max_digits`` ASCII digits, else None."""
    if not isinstance(text, str) or not 0 < len(text) <= max_digits or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


__all__ = ["MAX_CHARS", "number", "whole"]
