"""ONE interpretation of a server's log lines, for the live judge and for replay alike.

A :class:`LineInterpreter` follows one start line by line: which phase a line moves it to (forward only: a
line that only confirms an earlier phase, such as a TP rank's late "Load weight end", never moves it back),
its progress (shards, graph batches), whether it is startup progress at all (an HTTP access line answers our
own probes, it is not progress), failure signatures and which of them is the root cause (a named cause beats
a generic wrapper such as "Scheduler hit an exception"; the phase freezes at the first fatal line, except that
the frames of that traceback may still move it forward to where the crash happened), the engine's own
listening and ready lines, and failures after ready (a crash while serving).

It knows nothing of clocks, processes or probes: the judge (``firstlight.judge``) combines what it says with
the other signals, and ``firstlight replay`` drives that same judge with a log's lines. So the live path and
the post-mortem cannot disagree about what a line meant.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from firstlight.engines.lines import clean_line
from firstlight.engines.profile import NO_MATCH, ClockMarker, EngineProfile, Failure, LineMatch, Progress
from firstlight.logtext import is_access_line
from firstlight.vocab import PHASE_INDEX, RELABELS

EVIDENCE_TEXT_MAX = 300
MAX_FAILURE_EVIDENCE = 12
MAX_PHASE_EVIDENCE = 25
ROOT_WINDOW_LINES = 2000  # non-fatal failures this close before the first fatal line can be its root cause
DEATH_LINES = 8  # fatal lines this close (in lines read) after the first fatal one tell the same death (where)
CUT_CAUSE_LINES = 50  # ... this close before a traceback the log ends in, cut before its exception line

# A Python exception header ("ValueError: ...", "torch.OutOfMemoryError: ...") and the lines of a traceback.
# (a module's own lower-case one too: "socket.gaierror: [Errno -3] ...")
_EXC_LINE = re.compile(
    r"^(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)|Exception)(?::|$)|^[a-z_]\w*\.[a-z]*error:"
)
_TB_LINE = re.compile(
    r"^(?:\s|Traceback \(most recent call last\)|During handling of the above exception|"
    r"The above exception was the direct cause|File \"|\^+$|~+$)"
)

# A line logged at ERROR level (vLLM's "ERROR 05-26 00:17:47 [engine.py:448] ...", a Python logger's "- ERROR -"):
# followed at once by a traceback, it is that exception's message (``logger.exception``)
_ERROR_LEVEL = re.compile(r"^.{0,120}?(?:\bERROR\b|\blevel=ERROR\b)")

# The log ends inside an uncaught traceback: the process most likely died with it.
UNCAUGHT = Failure(
    "other",
    "the log ends with an uncaught exception (the process most likely exited): see the last traceback",
    True,
    1,
)


def clip(text: str, n: int = EVIDENCE_TEXT_MAX) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 1] + "…"


@dataclass(frozen=True)
class FailureHit:
    """A failure signature on one line."""

    line: int
    text: str  # clipped
    failure: Failure
    t: float | None = None


def better(a: FailureHit, b: FailureHit | None) -> bool:
    """``a`` is a better root cause than ``b`` (higher rank; ties: the earlier line)."""
    if b is None:
        return True
    if a.failure.rank != b.failure.rank:
        return a.failure.rank > b.failure.rank
    return a.line < b.line


@dataclass(frozen=True)
class Reading:
    """What one line meant for the start."""

    line: int
    text: str  # clipped, for evidence
    match: LineMatch
    progress_line: bool  # startup progress (False for HTTP access lines, which our own probes cause)
    phase: str | None = None  # the phase this line moved the start to (forward only), if it moved
    failure: FailureHit | None = None
    first_fatal: bool = False  # this line made the start dead
    ready: bool = False  # the engine's own ready line, first time
    listening: bool = False  # the engine says its port is open, first time
    serving: bool = False  # seen after the engine's ready line
    compile_cache: tuple[str, float | None] | None = None  # the engine's compile-cache word: hit | miss | total
    engine_clock: tuple[ClockMarker, float] | None = None  # the engine's own figure for a stage, and its seconds
    start_line: tuple[str, str] | None = None  # ("peer", text) or ("version", V): the start type's lines


@dataclass
class LineInterpreter:
    """Feed a start's lines in order; read its phase, progress and root cause at any moment."""

    profile: EngineProfile
    phase: str = "process_start"
    lines: int = 0
    progress: Progress | None = None
    progress_at: int | None = None  # line of the last progress line
    first_fatal: FailureHit | None = None
    ready_line: FailureHit | None = None  # (reused record: line and text of the engine's ready line)
    listening_line: int | None = None
    _listening: FailureHit | None = None  # the first listening line (line and text), for a daemon's idle ready
    _asked: bool = False  # a daemon that loads on demand was asked for a model (``EngineProfile.on_demand``)
    serving_failure: FailureHit | None = None  # the worst failure after ready
    serving_fatal: bool = False
    failure_evidence: list[FailureHit] = field(default_factory=list)
    phase_evidence: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=MAX_PHASE_EVIDENCE))
    _root: FailureHit | None = None
    _phase_progressed: bool = False  # a progress line came since the phase began (no relabel after it)
    _entered: set[str] = field(default_factory=set)  # the phases this start has been in (a relabel only once)
    _in_root_tb: bool = False  # the frames after the first fatal line still belong to its traceback
    root_traceback_open: bool = False  # ... and no line has closed it yet (its exception line, or plain text)
    _recent_nonfatal: deque[FailureHit] = field(default_factory=lambda: deque(maxlen=64))
    _tail_start: int | None = None  # first line of the traceback the log currently ends in
    _tail_hits: list[FailureHit] = field(default_factory=list)
    _tail_exc: FailureHit | None = None
    # the log ends inside a traceback's frames, cut before its exception line (an excerpt, a killed process):
    # its "Traceback (most recent call last):" line, once a frame followed it
    _tail_header: FailureHit | None = None
    _tail_open: FailureHit | None = None
    _last_exc: int | None = None  # the line of the last exception line (a traceback's end), any process's
    _error_line: int | None = None  # the last ERROR-level line that is not a traceback's
    _fatal_count: int = 0  # the lines read when the first fatal one came (a count of lines, whatever their framing)
    _placed: bool = False  # a line after the first fatal one said where the start died

    def use_profile(self, profile: EngineProfile) -> None:
        """The engine became known after some lines (detected from its log or endpoints)."""
        self.profile = profile

    # -- feeding -----------------------------------------------------------------------------------------
    def feed(self, text: str, t: float | None = None, final: bool = True, lineno: int | None = None) -> Reading:
        """One decoded line (``final`` False for a progress-bar redraw that a later redraw replaces).
        ``lineno``: the line's number in its own stream, when the caller counts (several streams interleave)."""
        if final:
            self.lines += 1
        if lineno is None:
            lineno = self.lines if final else self.lines + 1
        cleaned = clean_line(text)
        m = self.profile.classify_clean(cleaned) if cleaned else NO_MATCH
        if final:
            self._track_tail(text, cleaned, lineno, m, t)
            if self.profile.on_demand and not self._asked:
                self._asked = self.profile.asks_a_model(cleaned)
        progress_line = not (is_access_line(text) and m.progress is None and not m.ready)
        # compile-cache lines are compile or phase lines: the rest of the log costs no regex
        cache = (self.profile.compile_cache_state(cleaned)
                 if final and ("ompil" in cleaned or m.phase is not None) else None)
        clock = self.profile.clock_reading(cleaned) if final else None
        # before READY only: a peer-load or version line is the start's
        start = self.profile.start_line(cleaned) if final and self.ready_line is None else None
        if m is NO_MATCH:
            return Reading(lineno, clip(text), m, progress_line, compile_cache=cache, engine_clock=clock,
                           start_line=start)
        if m.progress is not None:
            self.progress, self.progress_at = m.progress, lineno
        hit = FailureHit(lineno, clip(text), m.failure, t) if m.failure is not None and final else None
        if self.ready_line is not None:
            return self._after_ready(lineno, text, m, hit, progress_line)
        phase = self._phase_move(m, lineno, text)
        if phase is not None:
            self._phase_progressed = False
        if m.progress is not None and m.progress.kind != "download":
            self._phase_progressed = True
        first_fatal = hit is not None and self._on_failure(hit, cleaned)
        if first_fatal and self._root is not hit and self._root is not None:
            phase = self._root_phase() or phase
        listening = m.listening and self.listening_line is None
        if listening:
            self.listening_line = lineno
            self._listening = FailureHit(lineno, clip(text), UNCAUGHT, t)
        ready = m.ready and final
        if ready:
            self.ready_line = FailureHit(lineno, clip(text), UNCAUGHT, t)
            self.listening_line = self.listening_line or lineno
            self.phase = phase = "ready"
        return Reading(lineno, clip(text), m, progress_line, phase, hit, first_fatal, ready, listening,
                       compile_cache=cache, engine_clock=clock, start_line=start)

    def _after_ready(self, lineno: int, text: str, m: LineMatch, hit: FailureHit | None,
                     progress_line: bool) -> Reading:
        if hit is not None:
            if better(hit, self.serving_failure):
                self.serving_failure = hit
            self.serving_fatal = self.serving_fatal or hit.failure.fatal
            self._add_failure_evidence(hit)
        return Reading(lineno, clip(text), m, progress_line, failure=hit, serving=True)

    def downloading(self) -> None:
        """The start is in its download, as the hub cache showed (not a line): the lines go on from there."""
        if self.first_fatal is None and (PHASE_INDEX[self.phase] < PHASE_INDEX["download"]
                                         or RELABELS.get("download") == self.phase):
            self.phase = "download"
            self._entered.add("download")
            self._phase_progressed = False

    def _phase_move(self, m: LineMatch, lineno: int, text: str) -> str | None:
        """Phases only move forward; the phase freezes at the first fatal line, except for the frames of that
        traceback (where the crash happened)."""
        target: str | None = None
        if m.phase is not None and self.first_fatal is None and PHASE_INDEX[m.phase] > PHASE_INDEX[self.phase]:
            target = m.phase
        elif (m.phase is not None and self.first_fatal is None and RELABELS.get(m.phase) == self.phase
              and not self._phase_progressed and m.phase not in self._entered):
            target = m.phase  # a download inside a load that has not begun: that span was the download's
        if (m.frame_phase is not None and (self.first_fatal is None or self._in_root_tb)
                and PHASE_INDEX[m.frame_phase] > PHASE_INDEX[target or self.phase]):
            target = m.frame_phase
        implied = m.failure.phase if m.failure is not None and m.failure.fatal else None
        # ... or one of the lines that tell the same death just after it (an OOM's line, then the loader's "failed
        # to initialize the context" that says where)
        in_death = self.first_fatal is None or (self.lines - self._fatal_count <= DEATH_LINES
                                                 and self.first_fatal.failure.phase is None)
        if (implied is not None and in_death
                and PHASE_INDEX[implied] > PHASE_INDEX[target or self.phase]):
            target = implied  # the first fatal line says where the start died (vocab.FAILURE_PHASES)
            self._placed = self.first_fatal is not None
        if target is None:
            return None
        self.phase = target
        self._entered.add(target)
        self.phase_evidence.append((lineno, clip(text)))
        return target

    @property
    def death_placed(self) -> bool:
        """Where the start died is told: the first fatal line said so, a line of its death after it did, or
        DEATH_LINES lines have been read since (a verdict waits for them, live as in replay)."""
        f = self.first_fatal
        return (f is None or f.failure.phase is not None or self._placed
                or self.lines - self._fatal_count >= DEATH_LINES)

    def _root_phase(self) -> str | None:
        """A wrapper's fatal line ("Scheduler hit an exception") after the cause it wraps (NCCL's WARN line): the
        cause says where the start died, forward only, as a fatal line's own words do."""
        root = self._root
        implied = root.failure.phase if root is not None else None
        if implied is None or root is None or PHASE_INDEX[implied] <= PHASE_INDEX[self.phase]:
            return None
        self.phase = implied
        self._entered.add(implied)
        self.phase_evidence.append((root.line, root.text))
        return implied

    def _add_failure_evidence(self, hit: FailureHit) -> None:
        if len(self.failure_evidence) < MAX_FAILURE_EVIDENCE:
            self.failure_evidence.append(hit)

    def _on_failure(self, hit: FailureHit, cleaned: str) -> bool:
        """Track the root cause; True when this line is the first fatal one."""
        self._add_failure_evidence(hit)
        if self.first_fatal is not None:
            if better(hit, self._root):
                self._root = hit
            return False
        if not hit.failure.fatal:
            self._recent_nonfatal.append(hit)
            return False
        self.first_fatal = self._root = hit
        self._fatal_count = self.lines
        for prior in self._recent_nonfatal:
            if prior.line >= hit.line - ROOT_WINDOW_LINES and better(prior, self._root):
                self._root = prior
        self._in_root_tb = self.root_traceback_open = _EXC_LINE.match(cleaned) is None
        return True

    def _track_tail(self, text: str, cleaned: str, lineno: int, m: LineMatch, t: float | None) -> None:
        """Follow the traceback the log currently ends in (for "the log ends in an uncaught exception", and to
        close the root traceback after the first fatal line)."""
        is_exc = _EXC_LINE.match(cleaned) is not None
        after_fatal = self.first_fatal is not None and lineno > self.first_fatal.line
        if cleaned and not _TB_LINE.match(cleaned) and not is_exc:
            error = _ERROR_LEVEL.match(text) is not None
            if error:
                self._error_line = lineno
            if after_fatal:
                self.root_traceback_open = False
            if error and self._tail_exc is not None:
                return  # an error said after the exception (an NPU runtime's own line) is no recovery from it
            self._tail_start, self._tail_hits, self._tail_exc = None, [], None
            self._tail_header = self._tail_open = None
            return
        if is_exc and after_fatal:
            self.root_traceback_open = False
        if self._tail_start is None:
            self._tail_start = lineno
        if not is_exc:
            if cleaned.startswith("Traceback (most recent call last)"):
                self._tail_header = FailureHit(lineno, clip(cleaned), UNCAUGHT, t)
                if self._error_line == lineno - 1:  # a logged exception: its message, then its traceback
                    self._last_exc = lineno - 1
            elif self._tail_header is not None and cleaned.lstrip().startswith('File "'):
                self._tail_open = self._tail_header
            return
        self._tail_header = self._tail_open = None  # its exception line came: _tail_exc says it
        self._last_exc = lineno
        if m.failure is not None and not m.failure.fatal:
            self._tail_hits.append(FailureHit(lineno, clip(cleaned), m.failure, t))
        # a Ctrl+C is a stop, not a failed start
        interrupted = cleaned.startswith("KeyboardInterrupt")
        self._tail_exc = None if interrupted else FailureHit(lineno, clip(cleaned), UNCAUGHT, t)
        if self._in_root_tb and self.first_fatal is not None and lineno > self.first_fatal.line:
            self._in_root_tb = False

    # -- reading -----------------------------------------------------------------------------------------
    def idle_ready(self) -> FailureHit | None:
        """At the log's end: a daemon that loads models on demand (``EngineProfile.on_demand``) left listening,
        asked for no model and with no failure, serves; its listening line becomes its ready line."""
        if (not self.profile.on_demand or self._asked or self._listening is None or self.ready_line is not None
                or self.phase != "process_start" or self.root_cause(True) is not None):
            return None
        self.ready_line, self.phase = self._listening, "ready"
        return self._listening

    def root_cause(self, ended: bool) -> FailureHit | None:
        """The most specific failure behind a dead start. ``ended``: the process exited (or the log ended), so
        a log that stops inside an uncaught traceback counts as the cause too."""
        if self._root is not None or not ended:
            return self._root
        if self._tail_exc is None:
            # frames with no exception line after them: the excerpt stops before the traceback's end, so the death
            # is not in the text, unless another process's exception came just before (an engine core's, its
            # traceback over: the API server's cut one is its echo), which then names the cause
            cut = self._tail_open
            header = self._tail_header
            if cut is None and header is not None and self._last_exc is not None and self._last_exc < header.line - 1:
                cut = header  # its header alone, after another exception (not the logged message of its own)
            if cut is None or self._last_exc is None or self._last_exc < cut.line - CUT_CAUSE_LINES:
                return None
            root = cut
            for prior in self._recent_nonfatal:
                if cut.line - CUT_CAUSE_LINES <= prior.line < cut.line and better(prior, root):
                    root = prior
            return root
        root = self._tail_exc
        for h in self._tail_hits:
            if better(h, root):
                root = h
        return root


__all__ = ["UNCAUGHT", "FailureHit", "LineInterpreter", "Reading", "better", "clip"]
