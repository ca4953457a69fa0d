"""The history's errors: it cannot be used, or its database did not answer in time."""

from __future__ import annotations

from firstlight.errors import FirstlightError


class HistoryError(FirstlightError):
    """The history cannot be used (unwritable path, locked for too long, written by a newer firstlight)."""


class Unreachable(HistoryError):
    """The shared database did not answer within its bound, refused the login, or has a newer schema: the run goes
    on without it and its record waits in the local spool."""


__all__ = ["HistoryError", "Unreachable"]
