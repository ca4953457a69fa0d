"""One start across many nodes: the group verdict (docs/multinode.md).

A start has members: the leader (rank 0, which serves; judged by its own firstlight as today) and workers, each
watched by its own ``firstlight up --serve-readiness HOST:PORT``. The leader reads each member's ``/readyz`` body
(``member_from_body``; an unreachable member is ``unreachable``) and ``decide_group`` turns the leader's verdict and
the members' states into the group's. Pure functions of their inputs: no clock, no I/O (the caller passes ``now``).

Rules, in order:
1. a member whose own verdict is ``failed`` -> the group is ``failed``, naming it, its verdict and its evidence (a
   verdict is final: a member that said it and then went away, as its firstlight does once the verdict was read,
   still counts);
2. a member whose own verdict is ``hung`` (also one that said it and went away; or, after its own READY, whose
   serving checks say ``hung``: a frozen worker), or the whole group without progress for ``stall_timeout_s``
   (no node's ``last_progress_at`` within it) -> ``hung``, naming the member hung itself, else a member whose own
   serving checks fail, else the node whose last progress is the oldest (the one that stopped first); an
   unreachable member's last progress is its last one seen;
3. the leader ``ready`` and every member ready or serving (its ``/readyz`` 200) -> ``ready``;
4. otherwise ``starting`` (a slow member that progresses keeps the group starting); once the group reached READY,
   a member that stops answering 200 makes the group not serving (``serving`` False: the leader's /readyz 503).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from firstlight.bounded import number
from firstlight.vocab import DEGRADED, FAILED, HUNG, NOT_SERVING, READY, SERVING_VERDICTS, STARTING
from firstlight.wire.content import clean_text

LEADER = "leader"
FINAL = (FAILED, HUNG)  # a member's verdicts that its going away does not undo


@dataclass(frozen=True)
class MemberState:
    """What one member's firstlight said last (or that it could not be read)."""

    url: str
    verdict: str | None = None  # its own verdict; None when never read
    ok: bool = False  # its /readyz answered 200: its own ranks ready / serving
    node_rank: int | None = None
    role: str | None = None
    phase: str | None = None
    last_progress_at: float | None = None  # wall-clock epoch seconds of that node's last progress
    evidence: tuple[dict[str, Any], ...] = ()
    error: str | None = None  # why it could not be read (None: read)
    unreachable_since: float | None = None
    serving: str | None = None  # after its own READY: its serving checks' state (a frozen worker: hung)
    # the member's start as its /readyz names it (its engine's pid, its firstlight's start count), and how many
    # times the leader saw it change: a member restarting while the others wait
    start_key: tuple[Any, Any] | None = None
    restarts: int = 0
    instance: str | None = None  # which firstlight answered (its /readyz's own token)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "node_rank": self.node_rank, "role": self.role,
                "state": "unreachable" if self.error else ("ready" if self.ok else (self.verdict or STARTING)),
                "verdict": self.verdict, "phase": self.phase, "ok": self.ok,
                "last_progress_at": self.last_progress_at, "evidence": list(self.evidence),
                "error": self.error, "unreachable_since": self.unreachable_since, "serving": self.serving,
                "restarts": self.restarts}


def member_from_body(url: str, status: int, body: Any, previous: MemberState | None = None) -> MemberState:
    """A member's state from its /readyz answer (any status carries the JSON body)."""
    if not isinstance(body, dict):
        return unreachable(url, f"HTTP {status}: not a firstlight readiness body", previous, None)
    rank = body.get("node_rank")
    lp = body.get("last_progress_at")  # a JSON number only; 400 digits: no time, never an OverflowError
    lp = number(lp, 0.0, MAX_EPOCH_S) if isinstance(lp, int | float) else None
    serving = body.get("serving")
    serving_state = _text(serving.get("state")) if isinstance(serving, dict) else None
    evidence = _evidence(body.get("evidence"))
    if isinstance(serving, dict) and serving_state not in (None, "serving"):  # why it stopped serving, first
        evidence = _evidence(serving.get("evidence")) + evidence
    said = (body.get("pid"), body.get("start"))
    key = None if said == (None, None) else said
    before = previous.start_key if previous is not None else None
    restarts = (previous.restarts if previous is not None else 0) + (None not in (before, key) and key != before)
    return MemberState(url=url, verdict=_text(body.get("verdict")) or STARTING, ok=status == 200,
                       node_rank=rank if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 1 << 20
                       else None,
                       role=_text(body.get("role")), phase=_text(body.get("phase")), last_progress_at=lp,
                       evidence=evidence, serving=serving_state, start_key=key, restarts=restarts,
                       instance=_text(body.get("instance")))


MAX_EPOCH_S = 1e11  # a member's progress time, POSIX seconds: beyond is not a time
MAX_EVIDENCE = 8  # a member's evidence entries kept: its first ones explain it


def _text(value: Any) -> str | None:
    """A member's word, printable (escapes, bidi controls and newlines out, bounded): it reaches a terminal."""
    return clean_text(value) if isinstance(value, str) else None


def _evidence(entries: Any) -> tuple[dict[str, Any], ...]:
    """A member's evidence, each text printable; numbers only where they are bounded numbers."""
    if not isinstance(entries, list | tuple):
        return ()
    return tuple({k: (clean_text(v) if isinstance(v, str) else v if isinstance(v, bool | None) else
                      number(v, -MAX_EPOCH_S, MAX_EPOCH_S)) for k, v in e.items() if isinstance(k, str)}
                 for e in entries[:MAX_EVIDENCE] if isinstance(e, dict))


def unreachable(url: str, error: str, previous: MemberState | None, now: float | None) -> MemberState:
    """A member that could not be read: keeps what was last seen of it, and since when it is unreachable."""
    since = previous.unreachable_since if previous is not None and previous.error else now
    base = previous or MemberState(url=url)
    return MemberState(url=url, verdict=base.verdict, ok=False, node_rank=base.node_rank, role=base.role,
                       phase=base.phase, last_progress_at=base.last_progress_at, evidence=base.evidence,
                       error=error, unreachable_since=since, serving=base.serving, start_key=base.start_key,
                       restarts=base.restarts)


def member_name(m: MemberState) -> str:
    return f"member {m.url}" + (f" (node_rank {m.node_rank})" if m.node_rank is not None else "")


@dataclass(frozen=True)
class GroupVerdict:
    verdict: str  # starting / ready / failed / hung
    serving: bool  # the group serves (the leader's /readyz may answer 200)
    evidence: tuple[dict[str, Any], ...] = field(default=())
    culprit: str | None = None  # the member named (its url), or LEADER


def _why(m: MemberState) -> str:
    if m.error and m.verdict not in FINAL:
        return f"unreachable since {m.unreachable_since}: {m.error}"
    gone = f" (unreachable since {m.unreachable_since}: {m.error})" if m.error else ""
    ev = "; ".join(str(e.get("message") or e.get("value") or e.get("signal") or e) for e in m.evidence[:3])
    return (f"verdict {m.verdict}" + (f", serving {m.serving}" if m.serving else "")
            + (f", phase {m.phase}" if m.phase else "") + (f": {ev}" if ev else "") + gone)


def _ev(m: MemberState, message: str) -> dict[str, Any]:
    return {"signal": "group_member", "member": m.url, "node_rank": m.node_rank, "value": m.verdict,
            "since": m.unreachable_since if m.error else m.last_progress_at, "message": message,
            "member_evidence": list(m.evidence)}


def decide_group(leader_verdict: str, leader_last_progress_at: float | None, members: list[MemberState],
                 stall_timeout_s: float, now: float, reached_ready: bool = False) -> GroupVerdict:
    """The group's verdict from the leader's own verdict and each member's last state (rules in the module doc)."""
    for m in members:
        if m.verdict == FAILED:
            return GroupVerdict(FAILED, False, (_ev(m, f"{member_name(m)} failed: {_why(m)}"),), m.url)
    for m in members:  # hung before its READY, or after it (its serving checks: a frozen worker)
        if m.verdict == HUNG or (m.serving == HUNG and not m.error):
            return GroupVerdict(HUNG, False, (_ev(m, f"{member_name(m)} hung: {_why(m)}"),), m.url)
    if leader_verdict in (FAILED, HUNG):
        return GroupVerdict(leader_verdict, False, (), LEADER)
    all_ok = all(m.ok for m in members)
    if leader_verdict in SERVING_VERDICTS and all_ok:
        return GroupVerdict(READY, True, tuple(_ev(m, f"{member_name(m)} ready") for m in members))
    if reached_ready:  # after READY: a member that stops serving makes the group not serving
        bad = [m for m in members if not m.ok] or members
        return GroupVerdict(READY, False, tuple(_ev(m, f"{member_name(m)} not serving: {_why(m)}") for m in bad),
                            bad[0].url if bad else LEADER)
    # No node's progress within the stall timeout: the group is hung; name the node that stopped first.
    nodes: list[tuple[float, MemberState | None]] = [(lp, None) for lp in [leader_last_progress_at]
                                                     if lp is not None and leader_verdict not in SERVING_VERDICTS]
    nodes += [(m.last_progress_at if m.last_progress_at is not None else (m.unreachable_since or now), m)
              for m in members if not m.ok]
    if nodes and now - max(t for t, _ in nodes) >= stall_timeout_s:
        # a member whose own checks fail (it stopped serving) is what the others wait on, before the oldest
        failing = [n for n in nodes if n[1] is not None and n[1].serving in (DEGRADED, NOT_SERVING)]
        t, oldest = min(failing or nodes, key=lambda n: n[0])
        if oldest is None:
            return GroupVerdict(HUNG, False, ({"signal": "group_progress", "member": LEADER, "since": t,
                                               "message": f"the leader made no progress since {t}, no member "
                                                          f"either, for {stall_timeout_s:g} s"},), LEADER)
        return GroupVerdict(HUNG, False, (_ev(oldest, f"{member_name(oldest)} made no progress since {t} (the oldest "
                                                      f"in the group; none for {stall_timeout_s:g} s): "
                                                      f"{_why(oldest)}"),), oldest.url)
    waiting = [m for m in members if not m.ok]
    return GroupVerdict(STARTING, False, tuple(_ev(m, f"waiting for {member_name(m)}: {_why(m)}")
                                               for m in waiting))
