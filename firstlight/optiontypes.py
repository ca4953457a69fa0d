"""Click types for numeric options that must be real, finite durations.

click's ``FloatRange`` lets ``nan`` through (every comparison with NaN is false), so ``--timeout nan`` never
fired and ``--sample-interval 0`` busy-looped. A duration here is finite, within its bounds, and a bad one is
a usage error (exit 64) in one line.
"""

from __future__ import annotations

import math
from typing import Any

import click

DAY = 86400.0


class Seconds(click.ParamType):
    """A finite number of seconds in ``(0, maximum]``, or ``[0, maximum]`` with ``zero_ok``."""

    name = "seconds"

    def __init__(self, maximum: float = 30 * DAY, zero_ok: bool = False, minimum: float = 0.0) -> None:
        self.maximum, self.zero_ok, self.minimum = maximum, zero_ok, minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float | int) and not isinstance(value, bool):
            x = float(value)
        else:
            try:
                x = float(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        low_ok = x >= self.minimum if self.zero_ok else x > self.minimum
        if not low_ok:
            bound = f"at least {self.minimum:g}" if self.zero_ok else f"more than {self.minimum:g}"
            self.fail(f"{value!r} must be {bound} seconds", param, ctx)
        if x > self.maximum:
            self.fail(f"{value!r} is more than {self.maximum:g} seconds", param, ctx)
        return x


# The periods of sampling and polling: a positive minimum so that nothing busy-loops.
PERIOD = Seconds(maximum=3600.0, minimum=0.01, zero_ok=True)
DURATION = Seconds()
GRACE = Seconds(maximum=3600.0, zero_ok=True)
