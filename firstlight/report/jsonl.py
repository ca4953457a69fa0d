"""JSON Lines on stdout: one object per event, a status object per second, and a last summary object.

The objects are built by the ``*_event`` functions below, the one rendering of firstlight's events: the readiness
server's ``/events`` stream (``firstlight.report.readiness``) sends the same objects."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import IO, Any

from firstlight.assessment import Assessment, Event
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.serving import ServingStatus


def started_event(info: dict[str, Any]) -> dict[str, Any]:
    return {"event": "started", "t": info.get("started_at"), **info}


def judge_event(ev: Event, a: Assessment) -> dict[str, Any]:
    """A phase, level, engine or note event of the judge."""
    return {"event": ev.type, "t": ev.t, "message": ev.message, "phase": a.phase, **ev.data}


def status_event(a: Assessment) -> dict[str, Any]:
    return {"event": "status", "t": time.time(), "phase": a.phase, "level": a.level.label, "verdict": a.verdict,
            "engine_ready": a.engine_ready, "elapsed_s": round(a.elapsed_s, 3), **a.progress.to_dict()}


def message_event(text: str) -> dict[str, Any]:
    return {"event": "message", "t": time.time(), "message": text}


def verdict_event(result: RunResult) -> dict[str, Any]:
    return {"event": "verdict", "t": result.ended_at, "verdict": result.verdict, "phase": result.phase,
            "failure": result.failure}


def summary_event(result: RunResult) -> dict[str, Any]:
    return {"event": "summary", **result.to_dict()}


def serving_event(status: ServingStatus) -> dict[str, Any]:
    return {"event": "serving", "t": status.since, **status.to_dict()}


def group_event(members: list[dict[str, Any]], group: dict[str, Any]) -> dict[str, Any]:
    """A multi-node start's group, as its leader decided it (runner/members.py): the verdict, the member it blames
    and each member's state (docs/multinode.md)."""
    return {"event": "group", "t": time.time(), **group, "members": members}


def _group_key(members: list[dict[str, Any]], group: dict[str, Any]) -> tuple[Any, ...]:
    """What a change of the group is: its verdict, serving and culprit, and each member's state and reachability
    (not its last progress, which moves with every line)."""
    return (group.get("verdict"), group.get("serving"), group.get("culprit"),
            tuple((m.get("url"), m.get("state"), m.get("ok"), bool(m.get("error"))) for m in members))


class JsonLinesReporter(QuietReporter):
    def __init__(self, stream: IO[str] | None = None, status_interval: float = 1.0) -> None:
        self.stream = stream or sys.stdout
        self.status_interval = status_interval
        self._lock = threading.Lock()
        self._last_status = 0.0
        self._last_group: tuple[Any, ...] | None = None

    def _write(self, obj: dict[str, Any]) -> None:
        with self._lock:
            try:
                self.stream.write(json.dumps(obj, default=str) + "\n")
                self.stream.flush()
            except (BrokenPipeError, ValueError):
                pass  # a reader that went away must not take the server down with it

    def started(self, info: dict[str, Any]) -> None:
        self._write(started_event(info))

    def event(self, ev: Event, a: Assessment) -> None:
        self._write(judge_event(ev, a))

    def status(self, a: Assessment) -> None:
        now = time.monotonic()
        if now - self._last_status < self.status_interval:
            return
        self._last_status = now
        self._write(status_event(a))

    def server_line(self, stream: str, text: str) -> None:
        pass  # server lines are in the log; the JSON stream carries what firstlight concluded

    def group_update(self, members: list[dict[str, Any]], group: dict[str, Any]) -> None:
        """On a group's leader: one ``group`` object at each change of the group (polled every second)."""
        key = _group_key(members, group)
        if key != self._last_group:
            self._last_group = key
            self._write(group_event(members, group))

    def message(self, text: str) -> None:
        self._write(message_event(text))

    def verdict(self, result: RunResult) -> None:
        self._write(verdict_event(result))

    def summary(self, result: RunResult) -> None:
        self._write(summary_event(result))

    def serving(self, status: ServingStatus, changed: bool) -> None:
        if changed:
            self._write(serving_event(status))

    def close(self) -> None:
        pass
