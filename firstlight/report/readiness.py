"""Kubernetes-style health endpoints (``--serve-readiness HOST:PORT``): ``/readyz``, ``/livez``, ``/startupz``,
and ``/events``, the watch's events as they happen (server-sent events).

A reporter like the others: it renders the state it is told (started, status, verdict, summary) and decides
nothing. Every answer comes from that state, under a lock, in microseconds: a kubelet probing every second never
causes a generation, a model-list request or even a TCP connect to the engine.

- ``/readyz``   200 only while the verdict is ``ready`` (or ``regression``: it serves, only slower than its
  baseline); a summary that ends serving (``failed``/``interrupted`` under supervision, or the watched engine
  gone) turns it 503 again, and so does the serving checks' status (``ready`` false: a failed check, not
  serving, hung; ``firstlight.serving``), 200 again when they pass. Any other time 503.
- ``/livez``    200 while the start progresses or the server serves; 503 once the verdict is ``hung`` or
  ``failed``, or the serving checks say ``hung``, so a kubelet restarts the engine container. A new start
  (``started``) makes it 200 again.
- ``/startupz`` 200 once READY was reached in the current start (a restarted engine container is a new start:
  the kubelet runs its startup probe again, and it must wait for the new start's READY); 503 before, and
  after the start ends in ``hung``/``failed``.

Each answer's body is the same JSON object: ``{state, phase, detail, elapsed_seconds, level, progress, eta_s,
verdict, evidence}`` plus ``ok``, ``start`` (1 for the first start watched), ``pid``, ``serving`` (the serving
checks' last status) and, on a group's leader, ``members`` and ``group``. ``state`` is ``starting`` until the
verdict, then the serving checks' state (``serving``, ``degraded``, ``not_serving``, ``hung``) or, before the first
check or without one, the verdict; ``elapsed_seconds`` is the judge's time since the start began, frozen at the
verdict; ``detail`` is the judge's note on the phase (e.g. "busy-wait suspected").

- ``/events``   ``text/event-stream``: every event the JSON Lines output carries (started, phase, level, engine,
  status at most once a second, serving, verdict, summary, messages), the same objects, each with its id;
  ``Last-Event-ID`` resumes after that id (``firstlight.report.events``). At most ``MAX_CLIENTS`` streams; the
  per-connection deadline ends when the stream begins, and a client that stops reading is dropped after
  ``REQUEST_TIMEOUT_S`` on a blocked write.

The server is the standard library's ThreadingHTTPServer in a daemon thread, bounded: at most
``MAX_CONCURRENT`` requests in flight (more get a 503 at once), a socket timeout on every connection (a
client that connects and sends nothing, or trickles its request line, is dropped), GET/HEAD only, no request
body read, HTTP/1.0 (one request per connection, so no idle keep-alive threads pile up).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from firstlight.assessment import Assessment, Event
from firstlight.bounded import whole
from firstlight.report import events as event_log
from firstlight.report import listener
from firstlight.report.base import QuietReporter
from firstlight.report.jsonl import (
    judge_event,
    message_event,
    serving_event,
    started_event,
    status_event,
    summary_event,
    verdict_event,
)
from firstlight.result import RunResult, summary_dict
from firstlight.serving import ServingStatus
from firstlight.vocab import FAILED, HUNG, SERVING_VERDICTS, STARTING

ENDPOINTS = ("/readyz", "/livez", "/startupz", "/events")
NOT_LIVE = (HUNG, FAILED)
MAX_CONCURRENT = 16  # a kubelet sends one probe per period; this leaves room for people and scrapers
REQUEST_TIMEOUT_S = 5.0  # per connection: read the request line and headers, write the answer
STATUS_EVENT_S = 1.0  # status events on /events at most this often (as in the JSON Lines output)
LINGER_S = 5.0  # a failed/hung node that was being probed answers until its verdict was read once (multinode)
MAX_CONNECTIONS = 64  # connections still sending their request at once; beyond, the oldest is cut (shed by age)


def parse_bind(spec: str, option: str = "--serve-readiness") -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1) -> (host, port). ValueError if bad."""
    host, sep, port_text = spec.strip().rpartition(":")
    if not sep:
        host, port_text = "", spec.strip()
    host = host.strip("[]") or "127.0.0.1"
    port = whole(port_text, 5)
    if port is None or port > 65535:
        raise ValueError(f"{option} {spec!r}: expected HOST:PORT with a port 0..65535 (e.g. 127.0.0.1:8081)")
    return host, port


class ReadinessState:
    """What the endpoints answer from. Updated only by the reporter methods, read by the HTTP threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.verdict = STARTING
        self.phase: str | None = None
        self.detail: str | None = None
        self.elapsed_s: float | None = None  # the judge's, since the start began; frozen at the verdict
        self.level = "none"
        self.progress: dict[str, Any] = {}
        self.eta_s: float | None = None
        self.evidence: list[dict[str, Any]] = []
        self.start = 0  # how many starts have begun (0: waiting for the first)
        self.pid: int | None = None
        # this endpoint, told apart from every other: a leader given its own URL as a member's knows it is itself
        self.instance = secrets.token_hex(8)
        self.reached_ready = False  # in the current start
        self.serving: dict[str, Any] | None = None  # the serving checks' status after READY (None: none yet)
        self.last_progress_at: float | None = None  # wall clock of this node's last progress (docs/multinode.md)
        self.node_rank: int | None = None
        self.role: str | None = None
        self.members: list[dict[str, Any]] = []  # each member's last state (runner/members.py), leader only
        self.group: dict[str, Any] | None = None  # the group verdict (firstlight/group.py); None: no members
        self.probed = False  # someone read an endpoint: a leader or a kubelet watches this node
        self.final_read = threading.Event()  # a failed/hung verdict was answered once

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"state": self._state(), "detail": self.detail,
                    "elapsed_seconds": None if self.elapsed_s is None else round(self.elapsed_s, 3),
                    "verdict": self.verdict, "phase": self.phase, "level": self.level, "progress": self.progress,
                    "eta_s": self.eta_s, "evidence": self.evidence, "start": self.start, "pid": self.pid,
                    "instance": self.instance, "reached_ready": self.reached_ready, "serving": self.serving,
                    "last_progress_at": self.last_progress_at, "node_rank": self.node_rank, "role": self.role,
                    "members": self.members, "group": self.group}


    def _state(self) -> str:
        if self.verdict == STARTING or self.start == 0:
            return STARTING
        if self.serving and self.verdict in SERVING_VERDICTS and self.serving.get("state"):
            return str(self.serving["state"])
        return self.verdict


def answer(path: str, s: dict[str, Any]) -> int:
    """The HTTP status of endpoint ``path`` for state snapshot ``s`` (404 for anything else)."""
    serving = s.get("serving") or {}
    group = s.get("group") or {}
    if path == "/readyz":  # with members: the group's readiness (every member ready too)
        return 200 if (s["verdict"] in SERVING_VERDICTS and serving.get("ready", True)
                       and group.get("serving", True)) else 503
    if path == "/livez":
        return 503 if (s["verdict"] in NOT_LIVE or not serving.get("live", True)
                       or group.get("verdict") in NOT_LIVE) else 200
    if path == "/startupz":
        return 200 if s["reached_ready"] and s["verdict"] not in NOT_LIVE else 503
    return 404


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, addr: tuple[str, int], state: ReadinessState) -> None:
        self.state = state
        self.slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self._lock = threading.Lock()
        # Connections with a thread, oldest first: socket -> True once its request was read (it is answered).
        self._open: dict[Any, bool] = {}
        self._shed: set[Any] = set()  # cut to make room: their threads end at once
        self._deadlines: dict[Any, threading.Timer] = {}
        self.events = event_log.EventLog(first_id=event_log.first_id_now())  # above an earlier process's ids
        self.address_family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        super().__init__(addr, _Handler)

    def _admit(self, request: Any) -> bool:
        """Room for one more connection: beyond MAX_CONNECTIONS, the oldest one still sending its request is cut
        (shed by age: 80 slow clients held all 64 and refused the kubelet's /livez). A probe sends its request
        at once and is answered in milliseconds, so it is never the oldest still sending."""
        with self._lock:
            if len(self._open) - len(self._shed) >= MAX_CONNECTIONS:
                oldest = next((r for r, answering in self._open.items() if not answering and r not in self._shed),
                              None)
                if oldest is None or len(self._open) >= 2 * MAX_CONNECTIONS:  # every one answered, or cuts pending
                    return False
                self._shed.add(oldest)
                _cut(oldest)
            self._open[request] = False
            return True

    def answering(self, request: Any) -> None:
        with self._lock:
            if request in self._open:
                self._open[request] = True

    def _closed(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)
            self._shed.discard(request)
            self._deadlines.pop(request, None)

    def streaming(self, request: Any) -> None:
        """A stream began on this connection: its request was read in time, and the stream lasts; the whole-request
        deadline no longer applies (each blocked write still times out: REQUEST_TIMEOUT_S)."""
        with self._lock:
            timer = self._deadlines.pop(request, None)
        if timer is not None:
            timer.cancel()

    def process_request(self, request: Any, client_address: Any) -> None:
        """One thread per connection, at most MAX_CONNECTIONS sending their requests (see _admit)."""
        if not self._admit(request):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._closed(request)
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        """socketserver prints a traceback for any error in a handler. A client that went away before its answer
        (a probe's timeout, a reset, a cut by the deadline) is no error of firstlight's: nothing to say. Anything
        else is one line on stderr, never a traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        print(f"firstlight: readiness endpoint: {type(exc).__name__}: {exc}", file=sys.stderr)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        # The whole request (line, headers, answer) within REQUEST_TIMEOUT_S: the per-read socket timeout alone
        # lets a client trickle one byte every few seconds and hold its thread forever.
        deadline = threading.Timer(REQUEST_TIMEOUT_S, _cut, (request,))
        deadline.daemon = True
        with self._lock:
            self._deadlines[request] = deadline
        deadline.start()
        try:
            super().process_request_thread(request, client_address)
        finally:
            deadline.cancel()
            self._closed(request)


def _progressed_at(st: ReadinessState, a: Assessment, now: float) -> float | None:
    """This node's last progress: a new phase, more weight bytes read, a new progress line, or its last log line."""
    p = a.progress
    old = st.progress or {}
    if (a.phase != st.phase or p.read_bytes > int(old.get("read_bytes") or 0)
            or (p.progress_line and p.progress_line != old.get("progress_line"))):
        return now
    if p.since_last_log_s is not None:
        return max(st.last_progress_at or 0.0, now - p.since_last_log_s)
    return st.last_progress_at


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"
    timeout = REQUEST_TIMEOUT_S  # socketserver sets it on the connection: no request can hold a thread forever
    server_version = "firstlight"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a probe every second would drown the watch's own output

    def _send(self, status: int, body: dict[str, Any], head: bool) -> None:
        data = (json.dumps(body, default=str) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _get(self, head: bool) -> None:
        self.server.answering(self.request)  # its request is in: no longer one to shed
        if self.path.split("?", 1)[0] == "/events":
            self._stream(head)
            return
        if not self.server.slots.acquire(blocking=False):
            self._send(503, {"error": "too many concurrent requests"}, head)
            return
        try:
            path = self.path.split("?", 1)[0]
            s = self.server.state.snapshot()
            status = answer(path, s)
            self.server.state.probed = True
            if s["verdict"] in NOT_LIVE:
                self.server.state.final_read.set()
            if status == 404:
                self._send(404, {"error": f"unknown path {path[:100]}", "endpoints": list(ENDPOINTS)}, head)
                return
            body = {"ok": status == 200, **{k: s[k] for k in ("state", "phase", "detail", "elapsed_seconds",
                                                              "level", "progress", "eta_s", "verdict",
                                                              "evidence", "start", "pid", "instance", "serving",
                                                              "last_progress_at", "node_rank", "role",
                                                              "members", "group")}}
            self._send(status, body, head)
        finally:
            self.server.slots.release()

    def _stream(self, head: bool) -> None:
        """``/events``: the events after ``Last-Event-ID``, then each one as it comes, until the watch ends or the
        client goes."""
        log = self.server.events
        if not log.join():
            self._send(503, {"error": f"too many event streams (at most {log.max_clients})"}, head)
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Accel-Buffering", "no")  # nginx in front: pass each event on, do not buffer
            # A dashboard on another origin may follow it (a browser's EventSource); the objects are the JSON
            # Lines output's, secrets already redacted, and the other endpoints answer anyone who asks too.
            self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()
            if head:
                return
            self.server.streaming(self.request)
            last = event_log.last_event_id(self.headers.get("Last-Event-ID"))
            self.wfile.write(f"retry: {event_log.RETRY_MS}\n\n".encode())
            self.wfile.flush()
            while True:
                batch, missed = log.after(last, event_log.KEEPALIVE_S)
                out = [f": {missed} earlier events are no longer kept\n\n".encode()] if missed else []
                out += [event_log.frame(i, data) for i, data in batch]
                if not batch and not log.closed:
                    out.append(b": keep-alive\n\n")
                self.wfile.write(b"".join(out))
                self.wfile.flush()
                if batch:
                    last = batch[-1][0]
                elif log.closed:
                    return
        except OSError:
            return  # the client went, or stopped reading and a write timed out
        finally:
            log.leave()

    def do_GET(self) -> None:
        self._get(head=False)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def _not_allowed(self) -> None:
        self.send_response(405)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed


class ReadinessServer(QuietReporter):
    """A Reporter that serves /readyz, /livez and /startupz. Binds at once; raises OSError when it cannot.
    ``serve`` False: the same state kept, served nowhere (a group's leader without --serve-readiness, such as a CI
    check of a group start: its members are read and the group decided all the same)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, node_rank: int | None = None,
                 role: str | None = None, serve: bool = True) -> None:
        self.state = ReadinessState()
        self.state.node_rank, self.state.role = node_rank, role
        self._server = _Server((host, port), self.state) if serve else None
        self.host = host
        self.port = int(self._server.server_address[1]) if self._server is not None else 0
        self.events = self._server.events if self._server is not None else event_log.EventLog()
        self._last_status_event = 0.0
        self._thread: threading.Thread | None = None
        if self._server is not None:
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                            name="firstlight-readiness", daemon=True)
            self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -- the Reporter protocol -------------------------------------------------------------------------------
    def started(self, info: dict[str, Any]) -> None:
        self.events.append(started_event(info))
        with self.state.lock:
            st = self.state
            st.start += 1
            st.final_read.clear()
            st.verdict, st.phase, st.level = STARTING, "process_start", "none"
            st.progress, st.eta_s, st.evidence = {}, None, []
            st.detail, st.elapsed_s = None, 0.0
            st.pid = info.get("pid")
            st.role = st.role or info.get("role")  # the engine's (a worker of a multi-node start) unless told
            rank = info.get("node_rank")
            st.node_rank = st.node_rank if st.node_rank is not None or not isinstance(rank, int) else rank
            st.reached_ready = False
            st.serving = None
            st.last_progress_at = time.time()

    def serving(self, status: ServingStatus, changed: bool) -> None:
        if changed:
            with self.state.lock:
                self.state.serving = status.to_dict()
            self.events.append(serving_event(status))

    def event(self, ev: Event, a: Assessment) -> None:
        self.events.append(judge_event(ev, a))
        self._assessed(a)

    def message(self, text: str) -> None:
        self.events.append(message_event(text))

    def status(self, a: Assessment) -> None:
        now = time.monotonic()
        if now - self._last_status_event >= STATUS_EVENT_S:
            self._last_status_event = now
            self.events.append(status_event(a))
        self._assessed(a)

    def _assessed(self, a: Assessment) -> None:
        with self.state.lock:
            st = self.state
            if st.verdict != STARTING:  # the verdict is out: only a new start changes the state again
                return
            st.last_progress_at = _progressed_at(st, a, time.time())
            st.phase, st.level = a.phase, a.level.label
            st.progress = a.progress.to_dict()
            st.eta_s = a.progress.eta_total_s
            st.evidence = [e.to_dict() for e in a.evidence]
            st.detail, st.elapsed_s = a.detail, a.elapsed_s

    def verdict(self, result: RunResult) -> None:
        self.events.append(verdict_event(result))
        self._ended(result)

    def summary(self, result: RunResult) -> None:
        self.events.append(summary_event(result))
        self._ended(result)

    def _ended(self, result: RunResult) -> None:
        s = summary_dict(result)
        with self.state.lock:
            st = self.state
            st.verdict = s.get("verdict") or FAILED
            st.phase = s.get("phase") or st.phase
            st.level = s.get("level") or st.level
            if isinstance(s.get("progress"), dict):
                st.progress = s["progress"]
                st.eta_s = s["progress"].get("eta_total_s")
            st.evidence = list(s.get("evidence") or [])
            st.detail = s.get("detail") or st.detail
            if st.verdict != STARTING:
                st.elapsed_s = max(0.0, (result.ready_at or result.ended_at) - result.started_at)
            if st.verdict in SERVING_VERDICTS:
                st.reached_ready = True
            if s.get("pid") is not None:
                st.pid = s["pid"]

    def group_update(self, members: list[dict[str, Any]], group: dict[str, Any]) -> None:
        """The members' last states and the group verdict, told by runner/members.py (rendered, not decided)."""
        with self.state.lock:
            self.state.members, self.state.group = members, group

    def close(self) -> None:
        self.events.close(event_log.DRAIN_S)  # every stream sends what is left (the summary) and ends
        # A node whose start failed or hung, and which someone probes (its group's leader), answers until that
        # verdict was read once, at most LINGER_S: the leader names its verdict, not just "unreachable".
        if self.state.probed and self.state.verdict in NOT_LIVE:
            self.state.final_read.wait(LINGER_S)
        if self._server is not None:
            listener.stop(self._server)
