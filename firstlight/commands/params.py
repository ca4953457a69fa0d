"""Option types shared by the commands: seconds that are finite, positive and capped.

``nan`` never compares, ``inf`` and ``1e12`` overflow timers, and a negative timeout is rejected deep inside
socket code: each is a usage error (exit 64) in one line, naming the option, before anything starts.
"""

from __future__ import annotations

import math
from typing import IO, Any

import click

from firstlight.vocab import EXIT_USAGE

MAX_TIMEOUT_S = 86_400.0  # one day: longer than any cold start, small enough for every timer


class OneLineUsage(click.UsageError):
    """A usage error shown as one line (click would add the usage block: this one says all there is)."""

    exit_code = EXIT_USAGE

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"Error: {self.format_message()}", file=file, err=True)


class Seconds(click.ParamType):
    """A number of seconds: finite, above 0 (or at least ``minimum``) and at most ``maximum``."""

    name = "seconds"

    def __init__(self, maximum: float = MAX_TIMEOUT_S) -> None:
        self.maximum = maximum

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float | int) and not isinstance(value, bool):
            number = float(value)
        else:
            try:
                number = float(str(value))
            except ValueError:
                number = math.nan
        name = param.opts[0] if param is not None and param.opts else "value"
        if not math.isfinite(number) or number <= 0 or number > self.maximum:
            raise OneLineUsage(f"{name} {value}: give a number of seconds above 0 and at most {self.maximum:g}")
        return number


class FiniteRange(click.FloatRange):
    """A FloatRange that also refuses ``nan`` (which passes every comparison) and infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            name = param.opts[0] if param is not None and param.opts else "value"
            raise OneLineUsage(f"{name} {value}: give a finite number")
        return number


TIMEOUT = Seconds()
