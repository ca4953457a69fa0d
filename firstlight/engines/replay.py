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
import dataclasses
import itertools
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from firstlight.anatomy import anatomy
from firstlight.config import JudgeConfig
from firstlight.interpret import LineInterpreter
from firstlight.judge import Judge
from firstlight.logtext import (
    LineSplitter,
    classify_prefix,
    is_seekable_file,
    read_line_events,
    split_redraws,
    strip_ansi,
)
from firstlight.timeline import LogLine, ProcessSample
from firstlight.vocab import FAILED, READY

from . import detect_from_lines, get_profile, new_detector
from .profile import EngineProfile

DETECT_LINES = 2000
DETECT_MAX_LINES = 50_000
MAX_PHASE_RECORDS = 500
READ_CHUNK = 1 << 20
_TS_START = frozenset("[0123456789(IWEFt")

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
    anatomy: dict[str, Any] | None = None  # firstlight.anatomy over the same judge (log lines only: no idle)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- the driver -----------------------------------------------------------------------------------------


class Replayer:
    """Replay of one start: feeds its lines, with the log's own timestamps as the clock where it has them, into
    the same judge (and so the same line interpretation) that ``firstlight up``/``watch`` use live.

    The log ending is what a process exit is live: it settles a pending root cause, and a log that stops inside
    an uncaught traceback is a failure. Without probes, the engine's own ready line stands in for the
    generation that READY needs live.
    """

    def __init__(self, profile: EngineProfile) -> None:
        self.profile = profile
        self._ts = TimestampParser()
        self._ts_candidates: deque[str] = deque(maxlen=16)  # recent lines that may carry a timestamp
        self._t: float | None = None  # the log's clock: the latest timestamp seen
        self._tick = 0.0  # tie-breaker, so lines keep their order at one timestamp
        self.judge = Judge(JudgeConfig(timeout=float("inf"), ready_from_log=True), profile, 0.0)
        self._started = False
        self._stamps: dict[int, float | None] = {}  # line -> its own time, for the report's phases
        self.lines = 0

    @property
    def interpreter(self) -> LineInterpreter:
        return self.judge.lines

    def feed(self, text: str, final: bool = True, t: float | None = None) -> None:
        """Feed one decoded, ANSI-free line (``final`` False for a progress redraw). ``t``: the line's time when
        the source knows it (a journal entry's own timestamp); else it is read from the line."""
        if final:
            self.lines += 1
            if text[:1] in _TS_START:
                self._ts_candidates.append(text)
        ts = t if t is not None else (self._timestamp(text) if final else None)
        if ts is not None:
            self._t = ts
        if not self._started:
            self._started = True
            self.judge = Judge(self.judge.rules, self.profile, self._clock())
        if final:
            self._stamps[self.lines] = ts
            if len(self._stamps) > 4 * MAX_PHASE_RECORDS:
                self._stamps = {k: v for k, v in self._stamps.items() if k in self._phase_lines()}
        t = self._clock()
        events = self.judge.feed(LogLine(t, text, "file", self.lines if final else self.lines + 1, final))
        if events or self.judge.fatal is not None:
            self.judge.assess(t)

    def process_ended(self, sample: ProcessSample) -> None:
        """How the process ended, where the source knows it (a journal's exit message): judged like live."""
        t = max(sample.t, self._clock())
        self.judge.feed(dataclasses.replace(sample, t=t))
        self.judge.assess(t)

    def _clock(self) -> float:
        self._tick += 1e-6
        return (self._t or 0.0) + self._tick

    def _phase_lines(self) -> set[int]:
        return {s.line for s in self.judge.phases if s.line is not None}

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

    def report(self) -> ReplayReport:
        t = self._clock()
        self.judge.end_of_log(t)
        a = self.judge.assess(t)
        lines = self.interpreter
        outcome = {READY: "ready", FAILED: "failed"}.get(a.verdict, "incomplete")
        evidence: list[dict[str, Any]] = [{"line": n, "text": text, "what": "phase"}
                                          for n, text in lines.phase_evidence]
        evidence += [{"line": h.line, "text": h.text, "what": "failure"} for h in lines.failure_evidence]
        failure, hint, serving = "none", a.hint, None
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
        else:
            hint = STALL_HINTS.get(a.phase)
        evidence.sort(key=lambda e: e["line"])
        if outcome == "failed" and self.judge.exited is not None:  # how the process ended (a journal says)
            evidence += [{"line": None, "text": e.value, "what": e.signal} for e in a.evidence
                         if e.signal in ("process", "memory")]
        phases = [{"name": s.name, "line": s.line, "timestamp": self._stamps.get(s.line) if s.line else None}
                  for s in self.judge.phases if s.line is not None]
        if len(phases) > MAX_PHASE_RECORDS:
            phases = phases[: MAX_PHASE_RECORDS - 1] + phases[-1:]
        progress = None
        if lines.progress is not None:
            p = lines.progress
            progress = {"kind": p.kind, "done": p.done, "total": p.total, "fraction": p.fraction,
                        "line": lines.progress_at}
        return ReplayReport(
            engine=self.profile.name,
            outcome=outcome,
            phase=a.phase,
            failure=failure,
            hint=hint,
            evidence=evidence,
            phases=phases,
            serving_failure=serving,
            anatomy=anatomy(self.judge.phases_dicts(), self.judge.signals, t, reached=a.phase),
            lines=self.lines,
            progress=progress,
            ready_line=lines.ready_line.line if lines.ready_line else None,
            listening_line=lines.listening_line,
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


def replay_timed(entries: Iterable[tuple[float | None, str]], engine: str | None = None,
                 ending: Callable[[], ProcessSample | None] | None = None) -> ReplayReport:
    """Replay lines that come with their own times (a journal's entries): the time is the clock, as a log's
    timestamps are. Streams (bounded memory); the engine is detected from the first lines when not given.
    ``ending``: asked once the lines are read, how the process ended (systemd's exit message), if known."""
    it = iter(entries)
    head = list(itertools.islice(it, DETECT_LINES)) if engine is None else []
    if engine is None:
        engine = detect_from_lines(text for _, text in head) or "generic"
    replayer = Replayer(get_profile(engine))
    for t, text in itertools.chain(head, it):
        for part, final in _events_from_lines([text]):
            replayer.feed(part, final, t if final else None)
    ended = ending() if ending is not None else None
    if ended is not None:
        replayer.process_ended(ended)
    return replayer.report()


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
        out.append(f"Failure: {report.failure}" + (f" (evidence lines {where})" if lines else ""))
        for e in lines[:8]:
            out.append(f"  {e['line']:>7}: {e['text']}")
        for e in report.evidence:  # how the process ended, where the source said (a journal's exit message)
            if e["line"] is None:
                out.append(f"  {e['what']:>7}: {e['text']}")
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
