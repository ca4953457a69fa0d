"""Replay a startup log: which phases it went through (with timestamps), how it ended, and why.

* ``firstlight.logtext.LineSplitter`` turns raw bytes into text lines (``\\n`` splits, ``\\r`` redraws, invalid UTF-8
  replaced, ANSI removed, a container's / journald's / a shipper's framing peeled: ``firstlight.framing``); the
  live log sources use it as-is.
* :class:`Replayer` feeds one start's lines, with the log's own timestamps as the clock, to the driver of the
  judge (``firstlight.drive``) that ``up``/``watch`` use live: the same engine detection, line interpretation
  and verdict rules; then :meth:`Replayer.report`.
* :func:`replay_log` / :func:`replay_lines` / :func:`replay_timed` stream a whole log in bounded memory.
* ``firstlight.report.replay_text`` renders the human-readable post-mortem.

Outcome rules: ``ready`` if the engine's own ready marker appeared (a later crash goes to
``serving_failure``); ``failed`` if a fatal failure signature appeared before that, or a non-fatal one and
the log then ends inside that uncaught traceback; otherwise ``incomplete``. The failure category is the most
specific signature seen around the death (a generic wrapper such as "Scheduler hit an exception" only counts
when nothing more specific appears). ``phase`` is the last phase that began (in order of appearance; lines
that only report the end of a step never move it back), frozen at the first fatal line, except that the
frames of that traceback may still move it forward to where the crash happened.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from firstlight.analysis import analyse
from firstlight.config import JudgeConfig
from firstlight.drive import Driver
from firstlight.engines import get_profile
from firstlight.engines.profile import EngineProfile
from firstlight.interpret import LineInterpreter
from firstlight.judge import Judge
from firstlight.logtext import LineEvent, LineSplitter, read_lines, read_stream_lines
from firstlight.timeline import LogLine, ProcessSample
from firstlight.timestamps import TS_START, TimestampParser
from firstlight.vocab import FAILED, READY

MAX_PHASE_RECORDS = 500
# A log's clock moving more than a day at one line is a bad stamp unless the next dated line moves there too
MAX_CLOCK_JUMP_S = 86_400.0
READ_CHUNK = 1 << 20
REPLAY_RULES = JudgeConfig(timeout=float("inf"), ready_from_log=True)  # no probes: the ready line is READY


@dataclass
class ReplayReport:
    engine: str
    outcome: str  # "ready" | "failed" | "incomplete"
    phase: str  # last startup phase that began
    failure: str  # category or "none"
    hint: str | None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    serving_failure: dict[str, Any] | None = None
    lines: int = 0
    # extensions
    progress: dict[str, Any] | None = None  # last progress line seen (kind, done, total, fraction, line)
    ready_line: int | None = None
    listening_line: int | None = None
    anatomy: dict[str, Any] | None = None  # firstlight.analysis over the same judge (log lines only: no idle)
    engine_clock: dict[str, Any] | None = None  # the engine's own figures beside the anatomy (firstlight.analysis)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Replayer:
    """Replay of one start: feeds its lines, with the log's own timestamps as the clock where it has them, to
    the driver of the judge that ``firstlight up``/``watch`` use live. ``engine`` None: learnt from the lines,
    by the live rule (``firstlight.drive``).

    The log ending is what a process exit is live: it settles a pending root cause, and a log that stops inside
    an uncaught traceback is a failure. Without probes, the engine's own ready line stands in for the
    generation that READY needs live.
    """

    def __init__(self, engine: str | None = None) -> None:
        self._engine = engine
        self._first = get_profile(engine or "generic")  # raises ValueError for an unknown engine
        self._ts = TimestampParser()
        self._ts_candidates: deque[str] = deque(maxlen=16)  # recent lines that may carry a timestamp
        self._t: float | None = None  # the log's clock: the latest timestamp seen
        self._jump: float | None = None  # a line's time far from that clock, until the next dated line confirms it
        self._tick = 0.0  # tie-breaker, so lines keep their order at one timestamp
        self._driver: Driver | None = None  # made at the first line: the start is that line's time
        self._stamps: dict[int, float | None] = {}  # line -> its own time, for the report's phases
        self._clock_from: str | None = None  # "engine" | "framing": where this log's times are read
        self.lines = 0

    @property
    def driver(self) -> Driver:
        if self._driver is None:
            self._driver = Driver(REPLAY_RULES, self._first, self._clock(), detect=self._engine is None)
        return self._driver

    @property
    def judge(self) -> Judge:
        return self.driver.judge

    @property
    def profile(self) -> EngineProfile:
        return self.driver.profile

    @property
    def interpreter(self) -> LineInterpreter:
        return self.judge.log.lines

    def feed(self, text: str, final: bool = True, t: float | None = None, framed_ts: float | None = None,
             lines: int = 1) -> None:
        """Feed one decoded, ANSI-free, peeled line (``final`` False for a progress redraw). ``t``: the line's time
        when the source knows it (a journal entry's own timestamp); else it is read from the line, or taken from
        its framing (``framed_ts``, ``firstlight.framing``) where the engine's lines carry no time. ``lines``: the
        raw lines it stands for (joined partial records), so that line numbers stay the file's."""
        lineno = self.lines + 1
        if final:
            self.lines += max(lines, 1)
            if text[:1] in TS_START:
                self._ts_candidates.append(text)
        ts = t if t is not None else (self._timestamp(text, framed_ts) if final else None)
        if ts is not None:
            ts = self._steady(ts)
        if ts is not None:
            self._t = ts
        driver = self.driver
        if final:
            self._stamps[lineno] = ts
            if len(self._stamps) > 4 * MAX_PHASE_RECORDS:
                self._stamps = {k: v for k, v in self._stamps.items() if k in self._phase_lines()}
        driver.feed(LogLine(self._clock(), text, "file", lineno, final))

    def process_ended(self, sample: ProcessSample) -> None:
        """How the process ended, where the source knows it (a journal's exit message): judged like live."""
        self.driver.feed(dataclasses.replace(sample, t=max(sample.t, self._clock())))

    def _clock(self) -> float:
        self._tick += 1e-6
        return (self._t or 0.0) + self._tick

    def _steady(self, ts: float) -> float | None:
        """The line's time, or None (it keeps the log's clock) when it moves that clock by more than
        ``MAX_CLOCK_JUMP_S`` and the next dated line does not go there too: one badly stamped line (a year that
        is not this one) makes no century-long phase, and a log that really moves on (a start resumed the next
        day) follows from its second line there."""
        prev = self._t
        if prev is None or abs(ts - prev) <= MAX_CLOCK_JUMP_S:
            self._jump = None
            return ts
        if self._jump is not None and abs(ts - self._jump) <= MAX_CLOCK_JUMP_S:
            self._jump = None
            return ts
        self._jump = ts
        return None

    def _phase_lines(self) -> set[int]:
        return {s.line for s in self.judge.phases.spans if s.line is not None}

    def _timestamp(self, text: str, framed_ts: float | None = None) -> float | None:
        """The line's own timestamp, else the latest one printed shortly before it; in a log whose first dated
        line is dated by its framing alone (llama.cpp under Kubernetes), the framing's. One clock per log: the
        engine's (often local time) and the framing's (UTC) are never mixed."""
        if self._clock_from is None:
            own = self._ts.parse(text)
            if own is not None:
                self._clock_from = "engine"
                return own
            if framed_ts is not None:
                self._clock_from = "framing"
                return framed_ts
        if self._clock_from == "framing":
            return framed_ts
        ts = self._ts.parse(text)
        if ts is None:
            for cand in reversed(self._ts_candidates):
                if cand is text:
                    continue
                ts = self._ts.parse(cand)
                if ts is not None:
                    break
        return ts

    def report(self) -> ReplayReport:
        t = self._clock()
        a = self.driver.end_of_log(t)
        judge = self.judge
        lines = self.interpreter
        outcome = {READY: "ready", FAILED: "failed"}.get(a.verdict, "incomplete")
        evidence: list[dict[str, Any]] = [{"line": n, "text": text, "what": "phase"}
                                          for n, text in lines.phase_evidence]
        evidence += [{"line": h.line, "text": h.text, "what": "failure"} for h in lines.failure_evidence]
        failure, serving = "none", None
        if outcome == "ready":
            assert lines.ready_line is not None
            evidence.append({"line": lines.ready_line.line, "text": lines.ready_line.text, "what": "ready"})
            sf = lines.serving_failure
            if sf is not None and lines.serving_fatal:
                serving = {"category": sf.failure.category, "hint": sf.failure.hint, "line": sf.line,
                           "text": sf.text, "fatal": sf.failure.fatal}
        elif outcome == "failed":
            failure = a.failure or "other"
            root = lines.root_cause(True)
            if root is not None and not any(e["line"] == root.line for e in evidence):
                evidence.append({"line": root.line, "text": root.text, "what": "failure"})
        evidence.sort(key=lambda e: e["line"])
        if outcome == "failed" and judge.exited is not None:  # how the process ended (a journal says)
            evidence += [{"line": None, "text": e.value, "what": e.signal} for e in a.evidence
                         if e.signal in ("process", "memory")]
        phases = [{"name": s.name, "line": s.line, "timestamp": self._stamps.get(s.line) if s.line else None}
                  for s in judge.phases.spans if s.line is not None]
        if len(phases) > MAX_PHASE_RECORDS:
            phases = phases[: MAX_PHASE_RECORDS - 1] + phases[-1:]
        progress = None
        if lines.progress is not None:
            p = lines.progress
            progress = {"kind": p.kind, "done": p.done, "total": p.total, "fraction": p.fraction,
                        "line": lines.progress_at}
        found = analyse(judge, a)
        return ReplayReport(
            engine=self.profile.name,
            outcome=outcome,
            phase=a.phase,
            failure=failure,
            hint=a.hint,
            evidence=evidence,
            phases=phases,
            serving_failure=serving,
            anatomy=found.anatomy,
            engine_clock=found.engine_clock,
            lines=self.lines,
            progress=progress,
            ready_line=lines.ready_line.line if lines.ready_line else None,
            listening_line=lines.listening_line,
        )


# --- sources ----------------------------------------------------------------------------------------------


def _events_from_lines(lines: Iterable[str]) -> Iterator[LineEvent]:
    """Lines already decoded, peeled and split as bytes are (``LineSplitter.feed_text``)."""
    splitter = LineSplitter()
    for line in lines:
        yield from splitter.feed_text(line)
    yield from splitter.flush_text()


def _run(events: Iterable[LineEvent], engine: str | None) -> ReplayReport:
    replayer = Replayer(engine)
    for e in events:
        replayer.feed(e.text, e.final, framed_ts=e.ts, lines=e.lines)
    return replayer.report()


def replay_timed(entries: Iterable[tuple[float | None, str]], engine: str | None = None,
                 ending: Callable[[], ProcessSample | None] | None = None) -> ReplayReport:
    """Replay lines that come with their own times (a journal's entries): the time is the clock, as a log's
    timestamps are. Streams (bounded memory); the engine is learnt from the lines when not given.
    ``ending``: asked once the lines are read, how the process ended (systemd's exit message), if known."""
    replayer = Replayer(engine)
    splitter = LineSplitter()
    for t, text in entries:
        for e in splitter.feed_text(text):
            replayer.feed(e.text, e.final, t if e.final else None, lines=e.lines)
    for e in splitter.flush_text():
        replayer.feed(e.text, e.final, lines=e.lines)
    ended = ending() if ending is not None else None
    if ended is not None:
        replayer.process_ended(ended)
    return replayer.report()


def replay_lines(lines: Iterable[str], engine: str | None = None) -> ReplayReport:
    """Replay an iterable of lines (``\\r`` redraws inside a line are handled). With ``engine=None`` the
    engine is learnt from the lines, falling back to the generic profile."""
    return _run(_events_from_lines(lines), engine)


def replay_log(path: str | Path, engine: str | None = None) -> ReplayReport:
    """Replay a log file (or a pipe, read once), streaming it (bounded memory whatever its size)."""
    return _run(read_lines(Path(path), READ_CHUNK), engine)


def replay_stream(fh: BinaryIO, engine: str | None = None) -> ReplayReport:
    """Replay an open binary stream (standard input), read as a file is."""
    return _run(read_stream_lines(fh, READ_CHUNK), engine)


__all__ = ["ReplayReport", "Replayer", "replay_lines", "replay_log", "replay_stream", "replay_timed"]
