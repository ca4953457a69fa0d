"""The leader's view of its members (``--member URL``, docs/multinode.md): a thread reads each member's
``GET URL/readyz`` every ``POLL_S``, side by side (``READERS`` at a time), through the one HTTP layer
(``firstlight.wire``: a wall-clock deadline of ``REQUEST_TIMEOUT_S`` on every byte, a capped body, no proxy), and
tells the readiness endpoints the members' states and the group verdict (decided by ``firstlight.group``). Observes
and forwards; decides nothing. Its thread runs under the guard every thread has (``firstlight.samplers.base.Guard``):
a poll that raises is said, and the next one comes as usual.

Bound (pinned in tests/e2e/runner/test_multinode.py): after READY, a member whose /readyz stops answering 200 turns the
leader's /readyz 503 within ``POLL_S + REQUEST_TIMEOUT_S`` (``AFTER_READY_BOUND_S``) of that member's change.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from firstlight.group import LEADER, GroupVerdict, MemberState, decide_group, member_from_body, unreachable
from firstlight.redact import Redactor
from firstlight.report.base import QuietReporter
from firstlight.report.readiness import ReadinessServer
from firstlight.result import RunResult
from firstlight.samplers.base import Guard
from firstlight.timeline import SourceNote
from firstlight.vocab import FAILED, HUNG, READY
from firstlight.wire import NotJSON, Wire, WireError


class GroupSink(Protocol):
    def group_update(self, members: list[dict[str, Any]], group: dict[str, Any]) -> None: ...


POLL_S = 1.0
REQUEST_TIMEOUT_S = 2.0  # connect, and the whole answer: the request's wall-clock deadline
MAX_READYZ_BODY = 1 << 20  # bytes of a member's /readyz read (a firstlight body is a few KiB); more is not one
# The leader's own start failed or hung: before the group blames the leader, its members are read again for up to
# this long, so that a worker whose death broke the leader (llama.cpp's "Remote RPC server crashed") is named; a
# member's own watch sees its process end within its sample interval.
SETTLE_S = 3.0
AFTER_READY_BOUND_S = POLL_S + REQUEST_TIMEOUT_S
# Members read at once: a poll of N members takes ceil(N / READERS) request deadlines at the most, not N.
READERS = 16
LWS_MEMBER_PORT = 8081  # the member readiness port on every LeaderWorkerSet pod (--member-port)


def members_from_lws(env: Mapping[str, str], port: int = LWS_MEMBER_PORT) -> list[str]:
    """On the LeaderWorkerSet leader (``LWS_WORKER_INDEX`` 0), its workers' readiness URLs.

    LWS names worker pods ``<leader pod>-<index>`` in the same headless service as the leader, whose address is
    ``LWS_LEADER_ADDRESS`` = ``<leader pod>.<service>.<namespace>``; so worker i (1..LWS_GROUP_SIZE-1) answers on
    ``http://<leader pod>-<i>.<service>.<namespace>:<port>``. Not the leader, or no LWS env: no members. No
    ``LWS_WORKER_INDEX`` either: a worker that took itself for the leader would poll its own /readyz, whose answer
    would wait on that poll (the manifests set it from the pod's worker-index label, for the sidecar too)."""
    addr, size, index = env.get("LWS_LEADER_ADDRESS"), env.get("LWS_GROUP_SIZE"), env.get("LWS_WORKER_INDEX")
    if not addr or not size or not size.isdigit() or index != "0":
        return []
    pod, _, rest = addr.partition(".")
    return [f"http://{pod}-{i}{'.' + rest if rest else ''}:{port}" for i in range(1, int(size))]


class MemberWatch(QuietReporter):
    """Polls the members and feeds the leader's readiness endpoints the group verdict; closed with the others."""

    def __init__(self, urls: list[str], server: ReadinessServer, stall_timeout_s: float,
                 message: Callable[[str], None] = lambda m: None) -> None:
        self.urls = [u.rstrip("/") for u in urls]
        # A member's URL as every output shows it (its /readyz body, the group: lines, the JSON events): a password
        # or a token in its query masked, also inside an error's words
        self._redactor = Redactor()
        for u in self.urls:
            self._redactor.add_from_url(u)
        self._shown = {u: self._redactor.url(u) for u in self.urls}
        self.server = server
        self.sinks: list[GroupSink] = []  # told the same as the readiness server (the Prometheus exporter)
        self.stall_timeout_s = stall_timeout_s
        self._say = message
        self.states: dict[str, MemberState] = {}
        self._itself: set[str] = set()  # member URLs that answered as this leader's own endpoint
        self.group: GroupVerdict | None = None
        self._stop = threading.Event()
        self._poll_lock = threading.Lock()  # the loop's polls and the verdict's settling, one at a time
        self._guard = Guard("members", "the members' poll", clock=time.time)
        self._thread = threading.Thread(target=self._loop, name="firstlight-members", daemon=True)
        self._thread.start()

    def _read(self, wires: dict[str, Wire], url: str) -> MemberState:
        prev, shown = self.states.get(url), self._shown[url]
        try:
            wire = wires.get(url)
            if wire is None:
                wire = wires[url] = Wire(url, connect_timeout=REQUEST_TIMEOUT_S)
            answer = wire.request("GET", "/readyz", read_timeout=REQUEST_TIMEOUT_S,
                                  deadline_at=time.monotonic() + REQUEST_TIMEOUT_S, max_body=MAX_READYZ_BODY)
        except (WireError, ValueError) as e:  # ValueError: a URL that names no server
            return unreachable(shown, self._redactor.text(str(e))[:160] or "no answer", prev, time.time())
        try:
            body = answer.json()
        except NotJSON:
            body = None
        return member_from_body(shown, answer.status, body, prev)

    def _read_all(self, wires: dict[str, Wire], urls: list[str]) -> list[MemberState]:
        """Every member's state, read side by side: one member that takes its whole deadline delays no other."""
        for url in urls:  # made here, one thread: the readers only use them, one member each
            if url not in wires:
                with contextlib.suppress(ValueError):  # a URL that names no server: its read says so
                    wires[url] = Wire(url, connect_timeout=REQUEST_TIMEOUT_S)
        if len(urls) <= 1:
            return [self._read(wires, url) for url in urls]
        with ThreadPoolExecutor(min(READERS, len(urls)), thread_name_prefix="firstlight-member") as readers:
            return list(readers.map(lambda url: self._read(wires, url), urls))

    def poll_once(self, wires: dict[str, Wire] | None = None) -> GroupVerdict:
        """Read every member once. ``wires``: connections kept from one read to the next (the loop's, filled as
        needed); without, ones for this read only."""
        own: dict[str, Wire] = {} if wires is None else wires
        try:
            with self._poll_lock:
                return self._poll(own)
        finally:
            if wires is None:
                _close(own)

    def _poll(self, wires: dict[str, Wire]) -> GroupVerdict:
        urls = [u for u in self.urls if u not in self._itself]
        for url, state in zip(urls, self._read_all(wires, urls), strict=True):
            self.states[url] = state
        s = self.server.state.snapshot()
        for url in urls:
            if self.states[url].instance == s["instance"]:  # its /readyz would wait on this very poll
                self._itself.add(url)
                self._say(f"group: member {self._shown[url]} is this leader's own readiness endpoint: left out "
                          "of the group")
        members = [self.states[u] for u in self.urls if u not in self._itself]
        g = decide_group(s["verdict"], s["last_progress_at"], members, self.stall_timeout_s, time.time(),
                         reached_ready=self.group is not None and self.group.verdict == READY)
        told = [m.to_dict() for m in members]
        verdict = {"verdict": g.verdict, "serving": g.serving, "culprit": g.culprit, "evidence": list(g.evidence)}
        self.server.group_update(told, verdict)
        for sink in self.sinks:
            sink.group_update(told, verdict)
        if self.group is None or (g.verdict, g.serving, g.culprit) != (self.group.verdict, self.group.serving,
                                                                       self.group.culprit):
            why = "; ".join(str(e.get("message")) for e in g.evidence[:3])
            self._say(f"group: {g.verdict}{'' if g.serving or g.verdict != 'ready' else ' (not serving)'}"
                         f" ({len(members)} member(s)){': ' + why if why else ''}")
        self.group = g
        return g

    def _loop(self) -> None:
        wires: dict[str, Wire] = {}
        try:
            while not self._stop.is_set():
                self._guard.step(lambda: self.poll_once(wires), self._escaped,
                                 "the group's state is the last poll's that worked")
                self._stop.wait(POLL_S)
        finally:
            _close(wires)

    def _escaped(self, note: SourceNote) -> None:
        self._say(f"group: {note.message}")

    def summary(self, result: RunResult) -> None:
        """The leader's start ended: the group's last word is read at its verdict (a ``--stop-when-ready`` check
        gets the group as it was then, not as the last poll found it). Failed or hung: the members are read again
        (``SETTLE_S`` at most) until one of them explains it, so that the group names the worker whose end broke the
        leader, not the leader."""
        if result.verdict not in (FAILED, HUNG):
            self._guard.step(self.poll_once, self._escaped, "the group's state is the last poll's that worked")
            return
        deadline = time.monotonic() + SETTLE_S
        wires: dict[str, Wire] = {}
        try:
            while self.poll_once(wires).culprit in (None, LEADER) and time.monotonic() < deadline:
                self._stop.wait(POLL_S / 4)
        finally:
            _close(wires)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=poll_bound_s(len(self.urls)) + REQUEST_TIMEOUT_S)


def poll_bound_s(members: int) -> float:
    """The longest one poll of ``members`` members can take: their reads side by side, ``READERS`` at a time."""
    return REQUEST_TIMEOUT_S * max(1, math.ceil(members / READERS))


def _close(wires: dict[str, Wire]) -> None:
    for wire in wires.values():
        wire.close()
