"""The stream of a watch's events behind ``/events`` (server-sent events, ``firstlight.report.readiness``).

A bounded log of the JSON objects firstlight emits (``firstlight.report.jsonl``'s ``*_event`` functions: the JSON
Lines objects, the same ones), each with an id that only grows, across the starts a sidecar watches and across
its restarts: a readiness server's log counts from the wall clock's milliseconds when it began (``first_id``), so
a later process's ids are above an earlier one's. A client follows the log from the id it last saw
(``Last-Event-ID``, which a browser's ``EventSource`` sends by itself when it reconnects), so a reconnect loses
nothing the log still holds; an id from before this log began (the sidecar restarted) or past its newest one (not
this log's) follows it from its start. The log keeps the last ``CAPACITY`` events (a
client further behind is told how many it missed) and serves at most ``MAX_CLIENTS`` at once: a stream holds a
thread for as long as it is open, and the kubelet's probes must never wait for one.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from typing import Any

from firstlight.bounded import whole

CAPACITY = 2048  # events kept for resumption: a start's phases, levels and verdict, and ~30 min of status
MAX_CLIENTS = 8  # streams open at once; more are refused with a 503
KEEPALIVE_S = 15.0  # a comment line when nothing happened: proxies cut idle connections, clients see it is alive
RETRY_MS = 1000  # the reconnect delay the stream asks an EventSource for
DRAIN_S = 2.0  # at the end of a watch, how long the streams get to send their last events


class EventLog:
    """Events in order with their ids; append from the reporter, read from the HTTP threads."""

    def __init__(self, capacity: int = CAPACITY, max_clients: int = MAX_CLIENTS, first_id: int = 1) -> None:
        self._cond = threading.Condition()
        self._events: deque[tuple[int, str]] = deque(maxlen=capacity)
        self.first_id = first_id
        self._next_id = first_id
        self._clients = 0
        self.max_clients = max_clients
        self.closed = False

    def append(self, obj: dict[str, Any]) -> int:
        data = json.dumps(obj, default=str)  # one line: JSON escapes every newline
        with self._cond:
            event_id = self._next_id
            self._next_id += 1
            self._events.append((event_id, data))
            self._cond.notify_all()
            return event_id

    def after(self, last_id: int, timeout: float) -> tuple[list[tuple[int, str]], int]:
        """The events after ``last_id`` (waiting up to ``timeout`` seconds for one), and how many of those the log
        no longer holds (a client that fell more than ``CAPACITY`` behind)."""
        with self._cond:
            if not self.first_id <= last_id < self._next_id:  # not one of this log's ids: from its start
                last_id = self.first_id - 1
            self._cond.wait_for(lambda: self.closed or (bool(self._events) and self._events[-1][0] > last_id),
                                timeout)
            out = [e for e in self._events if e[0] > last_id]
            missed = max(0, out[0][0] - last_id - 1) if out else 0
            return out, missed

    def join(self) -> bool:
        """A client begins to follow; False when ``MAX_CLIENTS`` already do (or the log is closed)."""
        with self._cond:
            if self.closed or self._clients >= self.max_clients:
                return False
            self._clients += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._clients = max(0, self._clients - 1)
            self._cond.notify_all()

    @property
    def clients(self) -> int:
        with self._cond:
            return self._clients

    def close(self, drain_s: float = 0.0) -> bool:
        """The watch ends: every stream sends what is left and ends. Waits up to ``drain_s`` seconds for the
        streams to have sent it (a process about to exit would cut them mid-event); True when all have."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._clients == 0, drain_s)


def frame(event_id: int, data: str) -> bytes:
    """One server-sent event: its id (what ``Last-Event-ID`` resumes from) and the JSON object as its data."""
    return f"id: {event_id}\ndata: {data}\n\n".encode()


def first_id_now() -> int:
    """A new log's first id: the wall clock's milliseconds, above every id an earlier process's log gave (one
    event a millisecond would be needed to catch up)."""
    return int(time.time() * 1000)


def last_event_id(header: str | None) -> int:
    """The id a client resumes after: the ``Last-Event-ID`` header; 0 (from the start) when absent or not an id."""
    found = whole((header or "").strip(), 18)  # "²" is a digit to str.isdigit, not to int()
    return found if found is not None else 0
