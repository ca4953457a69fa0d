"""The run's result: one typed record, built in one place (the session), read by every reporter.

(In progress: the session still builds a summary dict; ``summary_dict`` lets reporters accept either.)
"""

from __future__ import annotations

from typing import Any


def summary_dict(result: Any) -> dict[str, Any]:
    """The JSON summary of a run result (a typed result's ``to_dict()``, or a dict as it is)."""
    to_dict = getattr(result, "to_dict", None)
    return to_dict() if callable(to_dict) else dict(result)
