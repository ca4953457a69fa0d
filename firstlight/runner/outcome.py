"""What a run comes to: its result and the exit code the CLI gives it (a leaf: the restart loops, the API and
the tests read it without the session)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from firstlight.result import RunResult


@dataclass
class Outcome:
    result: RunResult
    exit_code: int

    @property
    def verdict(self) -> str:
        return self.result.verdict

    @property
    def summary(self) -> dict[str, Any]:
        return self.result.to_dict()

    @property
    def server_pid(self) -> int | None:
        return self.result.pid
