"""Replay a startup log: which phases it went through (with timestamps), how it ended, and why.

* ``firstlight.logtext.LineSplitter`` turns raw bytes into text lines (``\\n`` splits, ``\\r`` redraws, invalid UTF-8
  replaced, ANSI removed); a live log reader can use it as-is.
* :class:`Replayer` is the incremental state machine (feed lines, then :meth:`Replayer.report`).
* :func:`replay_log` / :func:`replay_lines` stream a whole log in bounded memory.
* :func:`format_replay_text` renders the human-readable post-mortem.

Outcome rules: ``ready`` if the engine's own ready marker appeared (a later crash goes to
``serving_failure``); ``failed`` if a fatal failure signature appeared before that, or a non-fatal one and
the log then ends inside that uncaught traceback; otherwise ``incomplete``. The failure category is the most
specific signature seen around the death (a generic wrapper such as "Scheduler hit an exception" only counts
when nothing more specific appears). ``phase`` is the last phase that began (in order of appearance; lines
that only report the end of a step never move it back), frozen at the first fatal line, except that the
frames of that traceback may still move it forward to where the crash happened.
"""

from __future__ import annotations

import calendar
import itertools
import re
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from firstlight.logtext import (
    LineSplitter,
    classify_prefix,
    is_seekable_file,
    read_line_events,
    split_redraws,
    strip_ansi,
)

from . import get_profile, new_detector
from .profile import NO_MATCH, PHASE_INDEX, EngineProfile, Failure, LineMatch, clean_line

EVIDENCE_TEXT_MAX = 300
DETECT_LINES = 2000
DETECT_MAX_LINES = 50_000
MAX_PHASE_RECORDS = 500
MAX_FAILURE_EVIDENCE = 12
MAX_PHASE_EVIDENCE = 25
ROOT_WINDOW_LINES = 2000  # non-fatal failures this close before the first fatal line can be its root cause
READ_CHUNK = 1 << 20

STALL_HINTS: dict[str, str] = {
    "process_start": "no engine progress line yet: still importing, downloading or compiling kernels, or the "
    "log level hides the markers",
    "distributed_init": "in distributed init: a hang here is usually NCCL (NCCL_DEBUG=INFO, P2P/IB "
    "settings, shm size)",
    "weights_loading": "loading weights: compare disk/network read throughput with the checkpoint size",
    "weights_loaded": "weights loaded; profiling memory and allocating the KV cache come next",
    "kv_cache": "profiling memory / allocating the KV cache",
    "compile": "torch.compile / JIT compilation: minutes on a cold cache (persist the compile cache)",
    "cuda_graph": "capturing CUDA graphs: can take minutes; no progress for long may be a hang",
    "http_listening": "the HTTP port is up but the engine's ready line has not appeared yet (warmup "
    "pending); do not trust /v1/models here",
    "warmup": "warming up: the first generation may be slow (JIT kernels)",
}


# --- timestamps -------------------------------------------------------------------------------------

_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}
_TS_PREFIX = re.compile(r"^(?:[\w.-]+-\d+\s+\|\s?)?(?:\([^)]*\)\s+)?(?:time=\"?)?")
_TS_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "iso",
        re.compile(
            r"(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)[T ](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))?"
            r"(?P<tz>Z|[+-]\d\d:?\d\d)?"
        ),
    ),
    (
        "bracket",
        re.compile(
            r"\[(?:(?:(?P<Y>\d{4})-)?(?P<M>\d\d)-(?P<D>\d\d) )?(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
            r"(?:[.,](?P<f>\d+))?(?: [A-Z]{2,3}\d+)*\]"
        ),
    ),
    (
        "vllm",
        re.compile(
            r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|TRACE) (?P<M>\d\d)-(?P<D>\d\d) "
            r"(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:\.(?P<f>\d+))?"
        ),
    ),
    (
        "gin",
        re.compile(r"\[GIN\] (?P<Y>\d{4})/(?P<M>\d\d)/(?P<D>\d\d) - (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"),
    ),
    ("glog", re.compile(r"[IWEF](?P<M>\d\d)(?P<D>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\.(?P<f>\d+)")),
    ("trt", re.compile(r"\[(?P<M>\d\d)/(?P<D>\d\d)/(?P<Y>\d{4})-(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\]")),
    ("syslog", re.compile(r"(?P<Mon>[A-Z][a-z]{2}) (?P<D>[ \d]\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d) ")),
    ("llamacpp", re.compile(r"(?P<rm>\d+)\.(?P<rs>\d\d)\.(?P<rms>\d{3})\.(?P<rus>\d{3}) [IWEDT] ")),
)
_EMBEDDED_TS = re.compile(r"\[(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)")
_JSON_TS = re.compile(r"\"timestamp\":\s*(?:(?P<epoch>\d{9,11})\b|\"(?P<iso>[^\"]{19,40})\")")


class TimestampParser:
    """Parse the timestamp at the start of a log line into a POSIX time (naive times are read as UTC).

    Year-less formats (vLLM ``05-12 10:11:12``, glog, syslog) take the year of the last full date seen, else
    the current year; time-only ones (old SGLang ``[23:17:01 TP0]``) take the last full date seen, else day
    0, rolling over at midnight. llama.cpp's ``--log-timestamps`` prefix is elapsed time since start.
    """

    def __init__(self) -> None:
        self._year: int | None = None
        self._date: tuple[int, int, int] | None = None
        self._last_time_only: float | None = None
        self._day_offset = 0

    def parse(self, line: str) -> float | None:
        head = line[:200]
        m0 = _TS_PREFIX.match(head)
        pos = m0.end() if m0 else 0
        for kind, rx in _TS_PATTERNS:
            m = rx.match(head, pos)
            if m is not None:
                return self._convert(kind, m)
        m = _EMBEDDED_TS.search(line[:400])
        if m is not None:
            return self._convert("bracket", m)
        m = _JSON_TS.search(classify_prefix(line))
        if m is not None:
            if m.group("epoch"):
                return float(m.group("epoch"))
            iso = _TS_PATTERNS[0][1].match(m.group("iso"))
            if iso is not None:
                return self._convert("iso", iso)
        return None

    def _convert(self, kind: str, m: re.Match[str]) -> float | None:
        g = m.groupdict()
        if kind == "llamacpp":
            return int(g["rm"]) * 60 + int(g["rs"]) + int(g["rms"]) / 1e3 + int(g["rus"]) / 1e6
        h, mi, s = int(g["h"]), int(g["m"]), int(g["s"])
        frac = float("0." + g["f"]) if g.get("f") else 0.0
        if g.get("Y"):
            year, month, day = int(g["Y"]), int(g["M"]), int(g["D"])
            self._year = year
            self._date = (year, month, day)
            self._last_time_only = None
            self._day_offset = 0
        elif g.get("M") or g.get("Mon"):
            month = int(g["M"]) if g.get("M") else _MONTHS.get(g["Mon"], 1)
            day = int(g["D"])
            year = self._year or time.gmtime().tm_year
        else:  # time only
            base = calendar.timegm((*self._date, 0, 0, 0, 0, 0, 0)) if self._date is not None else 0
            t = base + h * 3600 + mi * 60 + s + frac
            if (
                self._last_time_only is not None
                and t + self._day_offset * 86400 < self._last_time_only - 43200
            ):
                self._day_offset += 1
            t += self._day_offset * 86400
            self._last_time_only = t
            return float(t)
        try:
            t = calendar.timegm((year, month, day, h, mi, s, 0, 0, 0)) + frac
        except (ValueError, OverflowError):
            return None
        tz = g.get("tz")
        if tz and tz != "Z":
            sign = 1 if tz[0] == "+" else -1
            digits = tz[1:].replace(":", "")
            t -= sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)
        return float(t)


def _format_ts(ts: float | None) -> str:
    if ts is None:
        return ""
    if ts < 10 * 86400:  # time of day without a date, or llama.cpp's elapsed time
        return time.strftime("%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


# --- the report ------------------------------------------------------------------------------------------


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- the state machine ----------------------------------------------------------------------------------

_EXC_LINE = re.compile(
    r"^(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)|Exception)(?::|$)"
)
_TB_LINE = re.compile(
    r"^(?:\s|Traceback \(most recent call last\)|During handling of the above exception|"
    r"The above exception was the direct cause|File \"|\^+$|~+$)"
)
_TS_START = frozenset("[0123456789(IWEFt")


UNCAUGHT = Failure(
    "other",
    "the log ends with an uncaught exception (the process most likely exited): see the last traceback",
    True,
    1,
)


@dataclass
class _Hit:
    line: int
    text: str
    failure: Failure


def _trim(text: str) -> str:
    text = text.strip()
    return text if len(text) <= EVIDENCE_TEXT_MAX else text[: EVIDENCE_TEXT_MAX - 1] + "…"


def _better(a: _Hit, b: _Hit | None) -> bool:
    """a is a better root cause than b (higher rank; ties: earlier line)."""
    if b is None:
        return True
    if a.failure.rank != b.failure.rank:
        return a.failure.rank > b.failure.rank
    return a.line < b.line


class Replayer:
    """Incremental replay of one start: ``feed`` lines in order, then ``report``."""

    def __init__(self, profile: EngineProfile) -> None:
        self.profile = profile
        self.lines = 0
        self.phase = "process_start"
        self.phases: list[dict[str, Any]] = []
        self._ts = TimestampParser()
        self._ts_candidates: deque[str] = deque(maxlen=16)  # recent lines that may carry a timestamp
        self._phase_evidence: deque[dict[str, Any]] = deque(maxlen=MAX_PHASE_EVIDENCE)
        self._failure_evidence: list[dict[str, Any]] = []
        self._recent_nonfatal: deque[_Hit] = deque(maxlen=64)
        self._first_fatal: _Hit | None = None
        self._root: _Hit | None = None
        self._in_root_tb = False
        self._ready: dict[str, Any] | None = None
        self._listening_line: int | None = None
        self._serving: _Hit | None = None
        self._serving_fatal = False
        self._progress: dict[str, Any] | None = None
        self._tail_start: int | None = None  # first line of the traceback the log currently ends in
        self._tail_hits: list[_Hit] = []  # non-fatal signatures on exception lines of that traceback
        self._tail_exc: _Hit | None = None  # its last exception line

    # -- feeding --

    def feed(self, text: str, final: bool = True) -> LineMatch:
        """Feed one decoded, ANSI-free line (``final`` False for a progress redraw)."""
        if final:
            self.lines += 1
            lineno = self.lines
            if text[:1] in _TS_START:
                self._ts_candidates.append(text)
        else:
            lineno = self.lines + 1
        cleaned = clean_line(text)
        m = self.profile.classify_clean(cleaned)
        if final:
            self._track_tail(cleaned, lineno, m)
        if m is NO_MATCH:
            return m
        if m.progress is not None:
            p = m.progress
            self._progress = {
                "kind": p.kind,
                "done": p.done,
                "total": p.total,
                "fraction": p.fraction,
                "line": lineno,
            }
        if self._ready is not None:
            if m.failure is not None and final:
                hit = _Hit(lineno, _trim(text), m.failure)
                if _better(hit, self._serving):
                    self._serving = hit
                self._serving_fatal = self._serving_fatal or m.failure.fatal
                self._add_failure_evidence(hit)
            return m
        if m.phase is not None and self._first_fatal is None:
            if m.phase_weak:
                if PHASE_INDEX[m.phase] > PHASE_INDEX[self.phase]:
                    self._set_phase(m.phase, lineno, text)
            elif m.phase != self.phase or not self.phases:
                self._set_phase(m.phase, lineno, text)
        if (
            m.frame_phase is not None
            and (self._first_fatal is None or self._in_root_tb)
            and PHASE_INDEX[m.frame_phase] > PHASE_INDEX[self.phase]
        ):
            self._set_phase(m.frame_phase, lineno, text)
        if m.failure is not None and final:
            self._on_failure(_Hit(lineno, _trim(text), m.failure), cleaned)
        if m.listening and self._listening_line is None:
            self._listening_line = lineno
        if m.ready and final:
            self._ready = {"line": lineno, "text": _trim(text), "what": "ready"}
            self._set_phase("ready", lineno, text, evidence=False)
            self._listening_line = self._listening_line or lineno
        return m

    def _timestamp(self, text: str) -> float | None:
        """The line's own timestamp, else the latest one printed shortly before it."""
        ts = self._ts.parse(text)
        if ts is None:
            for cand in reversed(self._ts_candidates):
                if cand is text:
                    continue
                ts = self._ts.parse(cand)
                if ts is not None:
                    break
        return ts

    def _set_phase(self, phase: str, lineno: int, text: str, evidence: bool = True) -> None:
        self.phase = phase
        rec = {"name": phase, "line": lineno, "timestamp": self._timestamp(text)}
        if len(self.phases) >= MAX_PHASE_RECORDS:
            self.phases[-1] = rec
        else:
            self.phases.append(rec)
        if evidence:
            self._phase_evidence.append({"line": lineno, "text": _trim(text), "what": "phase"})

    def _add_failure_evidence(self, hit: _Hit) -> None:
        if len(self._failure_evidence) < MAX_FAILURE_EVIDENCE:
            self._failure_evidence.append({"line": hit.line, "text": hit.text, "what": "failure"})

    def _on_failure(self, hit: _Hit, cleaned: str) -> None:
        self._add_failure_evidence(hit)
        if self._first_fatal is None:
            if hit.failure.fatal:
                self._first_fatal = hit
                self._root = hit
                for prior in self._recent_nonfatal:
                    if prior.line >= hit.line - ROOT_WINDOW_LINES and _better(prior, self._root):
                        self._root = prior
                self._in_root_tb = _EXC_LINE.match(cleaned) is None
            else:
                self._recent_nonfatal.append(hit)
        elif _better(hit, self._root):
            self._root = hit

    def _track_tail(self, cleaned: str, lineno: int, m: LineMatch) -> None:
        """Follow the traceback the log is currently in (for the 'log ends in an uncaught exception' rule
        and to close the root traceback after the first fatal line)."""
        is_exc = _EXC_LINE.match(cleaned) is not None
        if not cleaned or _TB_LINE.match(cleaned) or is_exc:
            if self._tail_start is None:
                self._tail_start = lineno
            if is_exc:
                if m.failure is not None and not m.failure.fatal:
                    self._tail_hits.append(_Hit(lineno, _trim(cleaned), m.failure))
                # a Ctrl+C is a stop, not a failed start
                interrupted = cleaned.startswith("KeyboardInterrupt")
                self._tail_exc = None if interrupted else _Hit(lineno, _trim(cleaned), UNCAUGHT)
            if (
                is_exc
                and self._in_root_tb
                and self._first_fatal is not None
                and lineno > self._first_fatal.line
            ):
                self._in_root_tb = False
        else:
            self._tail_start = None
            self._tail_hits = []
            self._tail_exc = None

    # -- result --

    def report(self) -> ReplayReport:
        failure = "none"
        hint: str | None = None
        serving = None
        phase = self.phase
        evidence: list[dict[str, Any]] = list(self._phase_evidence)
        if self._ready is not None:
            outcome = "ready"
            phase = "ready"
            evidence.append(self._ready)
            if self._serving is not None and self._serving_fatal:
                s = self._serving
                serving = {
                    "category": s.failure.category,
                    "hint": s.failure.hint,
                    "line": s.line,
                    "text": s.text,
                    "fatal": s.failure.fatal,
                }
            # failures after ready, and any before it (e.g. a restart that then came up), stay visible
            evidence.extend(self._failure_evidence)
        else:
            root = self._root
            if root is None and self._tail_exc is not None:
                # the log ends in an uncaught exception: the process most likely died with it
                root = self._tail_exc
                for h in self._tail_hits:
                    if _better(h, root):
                        root = h
            if root is not None:
                outcome = "failed"
                failure = root.failure.category
                hint = root.failure.hint
                evidence.extend(self._failure_evidence)
                if not any(e["line"] == root.line for e in evidence):
                    evidence.append({"line": root.line, "text": root.text, "what": "failure"})
            else:
                outcome = "incomplete"
                hint = STALL_HINTS.get(phase)
                evidence.extend(self._failure_evidence)  # non-fatal warnings, if any
        evidence.sort(key=lambda e: e["line"])
        return ReplayReport(
            engine=self.profile.name,
            outcome=outcome,
            phase=phase,
            failure=failure,
            hint=hint,
            evidence=evidence,
            phases=list(self.phases),
            serving_failure=serving,
            lines=self.lines,
            progress=self._progress,
            ready_line=self._ready["line"] if self._ready else None,
            listening_line=self._listening_line,
        )


# --- drivers ----------------------------------------------------------------------------------------------


def _events_from_lines(lines: Iterable[str]) -> Iterator[tuple[str, bool]]:
    for line in lines:
        line = strip_ansi(line)
        if "\r" in line.rstrip("\r\n"):
            redraws, final = split_redraws(line)
            for r in redraws:
                yield r, False
            yield (final or (redraws[-1] if redraws else "")), True
        else:
            yield line.rstrip("\r\n"), True


def _events_from_file(path: Path) -> Iterator[tuple[str, bool]]:
    return read_line_events(path, READ_CHUNK)


def _run(events: Iterable[tuple[str, bool]], engine: str | None) -> ReplayReport:
    it = iter(events)
    head: list[tuple[str, bool]] = []
    if engine is None:
        det = new_detector()
        for ev in it:
            head.append(ev)
            if ev[1]:
                det.feed(ev[0])
                if det.lines >= DETECT_LINES:
                    break
        engine = det.best() or "generic"
    replayer = Replayer(get_profile(engine))
    for text, final in itertools.chain(head, it):
        replayer.feed(text, final)
    return replayer.report()


def _detect_file(path: Path) -> str:
    """Detect from the first DETECT_LINES lines; if that is not enough, keep reading up to
    DETECT_MAX_LINES (a long preamble: pip output, container banners)."""
    det = new_detector()
    for text, final in _events_from_file(path):
        if final:
            det.feed(text)
            if det.lines >= DETECT_LINES and (det.best() is not None or det.lines >= DETECT_MAX_LINES):
                break
    return det.best() or "generic"


def replay_lines(lines: Iterable[str], engine: str | None = None) -> ReplayReport:
    """Replay an iterable of lines (``\\r`` redraws inside a line are handled). With ``engine=None`` the
    engine is detected from the first lines (bounded buffer), falling back to the generic profile."""
    if engine is not None:
        get_profile(engine)  # validate early
    return _run(_events_from_lines(lines), engine)


def replay_log(path: str | Path, engine: str | None = None) -> ReplayReport:
    """Replay a log file, streaming it (bounded memory whatever its size)."""
    path = Path(path)
    if engine is not None:
        get_profile(engine)
    elif is_seekable_file(path):  # a pipe (<(zcat log.gz)) is read once: _run detects from its first lines
        engine = _detect_file(path)
    return _run(_events_from_file(path), engine)


# --- text rendering ------------------------------------------------------------------------------------


def format_replay_text(report: ReplayReport) -> str:
    """The human-readable post-mortem of a replay."""
    out: list[str] = []
    try:
        display = get_profile(report.engine).display_name
    except ValueError:
        display = report.engine
    out.append(f"Engine: {display} ({report.engine}), {report.lines} lines")
    verdict = {"ready": "READY", "failed": "FAILED", "incomplete": "INCOMPLETE"}.get(
        report.outcome, report.outcome.upper()
    )
    line = f"Outcome: {verdict}"
    if report.outcome == "failed":
        line += f" ({report.failure}) during {report.phase}"
    elif report.outcome == "incomplete":
        line += f": last phase {report.phase}"
    if report.ready_line:
        line += f" at line {report.ready_line}"
    out.append(line)
    if report.phases:
        out.append("Phases:")
        t0 = next((p["timestamp"] for p in report.phases if p.get("timestamp") is not None), None)
        shown = report.phases if len(report.phases) <= 40 else report.phases[:15] + report.phases[-25:]
        for i, p in enumerate(shown):
            if len(report.phases) > 40 and i == 15:
                out.append(f"  ... {len(report.phases) - 40} more phase changes ...")
            ts = p.get("timestamp")
            when = ""
            if ts is not None:
                when = _format_ts(ts)
                if t0 is not None and ts >= t0 and ts - t0 > 0:
                    when += f"  (+{ts - t0:.1f}s)"
            out.append(f"  {p['name']:<17} line {p['line']:<7} {when}".rstrip())
    else:
        out.append("Phases: none recognised (log level too low, or not a startup log)")
    if report.progress:
        pr = report.progress
        frac = f" {pr['fraction'] * 100:.0f}%" if pr.get("fraction") is not None else ""
        count = f" {pr['done']}/{pr['total']}" if pr.get("done") is not None and pr.get("total") else ""
        out.append(f"Last progress: {pr['kind']}{count}{frac} (line {pr['line']})")
    if report.outcome == "failed":
        lines = [e for e in report.evidence if e["what"] == "failure"]
        where = ", ".join(str(e["line"]) for e in lines[:8])
        out.append(f"Failure: {report.failure} (evidence lines {where})")
        for e in lines[:8]:
            out.append(f"  {e['line']:>7}: {e['text']}")
    if report.hint:
        out.append(("Hint: " if report.outcome == "failed" else "Note: ") + report.hint)
    if report.serving_failure:
        sf = report.serving_failure
        out.append(f"Serving failure after ready: {sf['category']} at line {sf['line']}: {sf['text']}")
        out.append(f"  Hint: {sf['hint']}")
    return "\n".join(out) + "\n"


__all__ = [
    "LineSplitter",
    "ReplayReport",
    "Replayer",
    "TimestampParser",
    "format_replay_text",
    "replay_lines",
    "replay_log",
    "split_redraws",
]
