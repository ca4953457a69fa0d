"""Framing of log lines: what a container runtime, Kubernetes, journald, syslog or a log shipper wraps around an
engine's own line, read and peeled off.

:func:`peel` takes one raw line and returns the inner line with what the framing said (:class:`Framed`): its time
(a POSIX time, or None), its stream (stdout/stderr, or None), whether it is a partial record (CRI ``P``, a Docker
``json-file`` record whose text has no newline) and the framing's name. Each line is read on its own (a file may
mix framings; a framing may wrap another, ``docker compose logs -t`` or ``kubectl logs --prefix --timestamps``);
a line with no known framing comes back unchanged.

:class:`Deframer` is the stateful reader over :func:`peel`: it joins partial records (per stream) up to the
complete one, and assembles journalctl's ``export`` records (``KEY=value`` lines, a blank line between entries)
into their ``MESSAGE``. ``firstlight.logtext.LineSplitter`` runs it on every line, before the carriage-return
redraws of the inner line are split, so that every source (live pipes and files, replay, units, reports) sees the
same peeled lines.

A leaf: it imports nothing of firstlight. Every pattern is linear and applied to a bounded prefix of the line
(``FRAME_PREFIX``), as ``firstlight.logtext`` requires of per-line work; a JSON record is parsed whole (linear)
only when it starts like one and is at most ``MAX_JSON_CHARS`` long.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from firstlight.bounded import number, whole

FRAME_PREFIX = 2048  # the prefix of a line the framing patterns look at
MAX_JSON_CHARS = 1 << 20  # a JSON record longer than this is left as it is (never parsed)
MAX_JOIN_CHARS = 1 << 20  # partial records joined beyond this are handed on as they are (memory stays bounded)
MAX_EPOCH = 1e21  # a time field's largest value: nanoseconds since the epoch reach 1e19 only in the year 2286
_MAX_US_DIGITS = 19  # __REALTIME_TIMESTAMP: microseconds in a 64-bit field
MAX_LAYERS = 3  # framings peeled off one line, outermost first (compose + timestamps, prefix + timestamps)

# Framing names
COMPOSE = "compose"  # docker compose up / docker compose logs: "name  | line", "name-1  | line"
DOCKER_JSON = "docker-json"  # Docker's json-file driver: {"log":"...\n","stream":"stdout","time":"..."}
CRI = "cri"  # containerd / CRI-O files under /var/log/pods, podman's k8s-file: "<RFC3339Nano> stdout F line"
KUBECTL_PREFIX = "kubectl-prefix"  # kubectl logs --prefix: "[pod/NAME/CONTAINER] line"
TIMESTAMPS = "timestamps"  # kubectl logs --timestamps, docker/podman logs -t: "<RFC3339Nano> line"; a CI's
# log view brackets it: "[2025-03-10T15:07:20Z] line" (an engine's own "[2025-03-10 15:07:20]" has no T: kept)
JOURNAL_SHORT = "journal-short"  # journalctl -o short (and a traditional syslog file): "May 07 02:13:52 host id[1]: "
JOURNAL_SHORT_PRECISE = "journal-short-precise"  # "May 07 02:13:52.123456 host id[1]: "
JOURNAL_SHORT_ISO = "journal-short-iso"  # "2024-05-07T02:13:52+0000 host id[1]: " (also short-iso-precise)
JOURNAL_JSON = "journal-json"  # journalctl -o json: {"__REALTIME_TIMESTAMP":"...","MESSAGE":...}
JOURNAL_EXPORT = "journal-export"  # journalctl -o export: KEY=value lines, a blank line between entries
SYSLOG_3164 = "syslog-3164"  # "<13>May  7 02:13:52 host tag[1]: line"
SYSLOG_5424 = "syslog-5424"  # "<165>1 2024-05-07T02:13:52.003Z host app 123 - - line"
SHIPPER_JSON = "shipper-json"  # fluent-bit, Vector, Promtail, Logstash: JSON with a log, message or line field

FRAMINGS: tuple[str, ...] = (COMPOSE, DOCKER_JSON, CRI, KUBECTL_PREFIX, TIMESTAMPS, JOURNAL_SHORT,
                             JOURNAL_SHORT_PRECISE, JOURNAL_SHORT_ISO, JOURNAL_JSON, JOURNAL_EXPORT, SYSLOG_3164,
                             SYSLOG_5424, SHIPPER_JSON)


@dataclass(frozen=True)
class Framed:
    """One line with its framing peeled off (``framing`` None: the line had none, ``text`` is the line)."""

    text: str
    ts: float | None = None  # the framing's time of the line (POSIX seconds)
    stream: str | None = None  # stdout | stderr, where the framing says
    partial: bool = False  # a partial record: its text continues in the next record of the same stream
    framing: str | None = None  # the outermost framing's name (see FRAMINGS)
    lines: int = 1  # raw lines this line stands for (joined partial records, an export record)


# --- timestamps ------------------------------------------------------------------------------------------

_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)"
_ISO_PARTS = re.compile(
    r"(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)[T ](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d{1,9}))?"
    r"(?P<tz>Z|[+-]\d\d:?\d\d)?$"
)
_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}


def format_rfc3339(t: float) -> str:
    """A POSIX time as RFC 3339 in UTC, to the microsecond (what a float of a POSIX time holds exactly)."""
    us = round(t * 1e6)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(us // 10**6)) + f".{us % 10**6:06d}Z"


def parse_rfc3339(text: str) -> float | None:
    """An RFC 3339 / ISO 8601 time (nanoseconds, ``Z`` or an offset; naive read as UTC) as a POSIX time."""
    m = _ISO_PARTS.match(text.strip()[:48])
    if m is None:
        return None
    g = m.groupdict()
    try:
        t = float(calendar.timegm((int(g["Y"]), int(g["M"]), int(g["D"]), int(g["h"]), int(g["m"]), int(g["s"]))))
    except (ValueError, OverflowError):
        return None
    if g["f"]:
        t += float("0." + g["f"])
    tz = g["tz"]
    if tz and tz != "Z":
        digits = tz[1:].replace(":", "")
        t -= (1 if tz[0] == "+" else -1) * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)
    return t


def _yearless(mon: str, day: str, hms: str, frac: str | None) -> float | None:
    """A syslog/journal short time (no year, local time read as UTC): this year's, or last year's when this
    year's would lie more than a day ahead."""
    month = _MONTHS.get(mon)
    if month is None:
        return None
    h, mi, s = (int(x) for x in hms.split(":"))
    now = time.time()
    year = time.gmtime(now).tm_year
    try:
        t = calendar.timegm((year, month, int(day), h, mi, s))  # timegm reads the first six fields only
        if t > now + 86400:
            t = calendar.timegm((year - 1, month, int(day), h, mi, s))
    except (ValueError, OverflowError):
        return None
    return t + (float("0" + frac) if frac else 0.0)


def _epoch(value: Any) -> float | None:
    """A shipper's time field: RFC 3339 text, or a number of seconds (milli-, micro-, nanoseconds when large)."""
    v = number(value, 0.0, MAX_EPOCH)  # 1e400, a 400-digit number, "²", NaN: no time (never a loop, never a raise)
    if v is None:
        return parse_rfc3339(value) if isinstance(value, str) else None
    while v > 1e11:  # ms, us, ns since the epoch
        v /= 1000.0
    return v if v > 0 else None


# --- the line framings -----------------------------------------------------------------------------------

_LEVEL = r"(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)"
_CRI = re.compile(rf"(?P<ts>{_RFC3339}) (?P<stream>stdout|stderr) (?P<tag>[FP])(?: |$)")
_TS_ONLY = re.compile(rf"(?P<ts>{_RFC3339}) ")
_TS_BRACKETED = re.compile(rf"\[(?P<ts>{_RFC3339})\] ")
_FIXED_NANOS = re.compile(r"[^.]*\.\d{9}\D")  # kubelet's and Docker's --timestamps: always nine digits
# A timestamp then a level and a target ("2024-...Z  INFO text_generation_launcher: ...") is the engine's own line
# (TGI's Rust tracing, six digits), not a --timestamps framing around one (vLLM's "INFO 05-07 ..." has a date).
_OWN_TRACING = re.compile(rf" ?{_LEVEL} (?!\d\d-\d\d )")
_COMPOSE = re.compile(r"(?P<name>[\w][\w.-]{0,63})\s{1,64}\| ?")
_KUBECTL_PREFIX = re.compile(r"\[pod/[a-z0-9][a-z0-9.-]{0,252}/[a-z0-9][a-z0-9-]{0,62}\] ")
# "host tag[pid]: "; journalctl leaves the host out of an entry without _HOSTNAME (a journal built elsewhere)
_HOST_TAG = (r"(?:(?P<host>[A-Za-z0-9][\w.-]{0,254}) )?(?P<tag>[^\s:\[]{1,255})(?:\[(?P<pid>\d{1,10})\])?"
             r"(?:: |:$)")
_SHORT = re.compile(
    r"(?P<mon>[A-Z][a-z]{2}) (?P<day>[ \d]?\d) (?P<hms>\d\d:\d\d:\d\d)(?P<frac>\.\d{1,9})? " + _HOST_TAG
)
# journalctl -o short under a non-English locale: the month as the locale abbreviates it ("авг 18", "Okt 02",
# "janv. 05") or numbered ("7月 21", "7월 21"); its time is read where the month is a number, else none
_SHORT_LOCAL = re.compile(
    r"(?:(?P<num>1[0-2]|0?[1-9])[月월]|[^\W\d_]{3,5}\.?) (?P<day>[ \d]?\d)[日일]? (?P<hms>\d\d:\d\d:\d\d)"
    r"(?P<frac>\.\d{1,9})? " + _HOST_TAG
)
# journalctl -o short-iso[-precise] and rsyslog's RFC 3339 files: seconds or microseconds, never nanoseconds
_SHORT_ISO = re.compile(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?(?:Z|[+-]\d\d:?\d\d)) " + _HOST_TAG)
_PRI = re.compile(r"<(?P<pri>\d{1,3})>")
_RFC5424 = re.compile(
    r"1 (?P<ts>-|\S{1,64}) (?P<host>\S{1,255}) (?P<app>\S{1,48}) (?P<proc>\S{1,128}) (?P<msgid>\S{1,32}) "
    r"(?P<sd>-|(?:\[(?:[^\]\\]|\\.){0,4096}\])+)(?: \ufeff?|$)"
)
_LEVEL_WORD = re.compile(rf"{_LEVEL}$")


def _named(m: re.Match[str]) -> bool:
    """A journal/syslog line names a host and a program, not a log level ("2024-...Z ERROR target: ...")."""
    return not _LEVEL_WORD.match(m["host"] or m["tag"])


def _json_record(line: str) -> Framed | None:
    """Docker json-file, journalctl -o json, or a shipper's JSON record; None when the line is none of them."""
    if len(line) > MAX_JSON_CHARS or not line.startswith("{") or not line.rstrip().endswith("}"):
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    if "MESSAGE" in obj and "__REALTIME_TIMESTAMP" in obj:
        text = _journal_value(obj.get("MESSAGE"))
        raw = _journal_value(obj.get("__REALTIME_TIMESTAMP"))
        us = whole(raw, _MAX_US_DIGITS)
        ts = us / 1e6 if us is not None else None
        return Framed(text if text is not None else "", ts, None, False, JOURNAL_JSON)
    if isinstance(obj.get("function"), str) and isinstance(obj.get("line"), int) and "level" in obj:
        # a record that names its source's function and line is the program's own JSON log (llama.cpp's server:
        # {"level":"INFO","function":"main","line":3064,"msg":"model loaded",...}): its keys are the engine's words
        return None
    for key in ("log", "message", "line", "msg"):
        value = obj.get(key)
        if isinstance(value, str):
            break
    else:
        return None
    stream = obj.get("stream")
    stream = stream if stream in ("stdout", "stderr") else None
    ts = None
    for tkey in ("time", "timestamp", "@timestamp", "ts", "date", "_time"):
        if tkey in obj:
            ts = _epoch(obj[tkey])
            if ts is not None:
                break
    docker = key == "log" and "time" in obj and stream is not None and set(obj) <= {"log", "stream", "time",
                                                                                      "attrs"}
    # Docker keeps the line's newline (a record without one continues in the next); fluent-bit keeps CRI's tag
    partial = not value.endswith("\n") if docker else obj.get("logtag") == "P"
    text = value[:-1] if value.endswith("\n") else value
    if text.endswith("\r"):
        text = text[:-1]
    return Framed(text, ts, stream, partial, DOCKER_JSON if docker else SHIPPER_JSON)


def _journal_value(value: Any, repeated: bool = False) -> str | None:
    """A journal JSON field: text, bytes as an array of numbers, a repeated field's values as lines, or null.
    journalctl nests one level at most (a repeated field's values): anything deeper is no value, never a
    recursion as deep as the record is nested."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if value and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 256 for x in value):
            return bytes(value).decode("utf-8", "replace")
        if repeated:
            return None
        parts = [_journal_value(v, True) for v in value]
        return "\n".join(p for p in parts if p is not None)
    return None


def _peel_once(line: str) -> Framed | None:
    """The outermost framing of one line, or None."""
    head = line[:FRAME_PREFIX]
    c = head[:1]
    if c == "{":
        return _json_record(line)
    if c.isdigit():
        m = _CRI.match(head)
        if m is not None:
            return Framed(line[m.end():], parse_rfc3339(m["ts"]), m["stream"], m["tag"] == "P", CRI)
        m = _SHORT_ISO.match(head)
        if m is not None and _named(m):
            return Framed(line[m.end():], parse_rfc3339(m["ts"]), None, False, JOURNAL_SHORT_ISO)
        m = _TS_ONLY.match(head)
        if m is not None and (_FIXED_NANOS.match(m["ts"]) or not _OWN_TRACING.match(head, m.end())):
            return Framed(line[m.end():], parse_rfc3339(m["ts"]), None, False, TIMESTAMPS)
    if c == "[":
        m = _KUBECTL_PREFIX.match(head)
        if m is not None:
            return Framed(line[m.end():], None, None, False, KUBECTL_PREFIX)
        m = _TS_BRACKETED.match(head)
        if m is not None:
            return Framed(line[m.end():], parse_rfc3339(m["ts"]), None, False, TIMESTAMPS)
        return None
    if c == "<":
        p = _PRI.match(head)
        if p is None:
            return None
        stream = "stderr" if int(p["pri"]) % 8 <= 3 else None  # severity err or worse
        m = _RFC5424.match(head, p.end())
        if m is not None:
            return Framed(line[m.end():], parse_rfc3339(m["ts"]), stream, False, SYSLOG_5424)  # "-": no time
        m = _SHORT.match(head, p.end())
        if m is not None and _named(m):
            return Framed(line[m.end():], _yearless(m["mon"], m["day"], m["hms"], m["frac"]), stream, False,
                          SYSLOG_3164)
        return None
    if c.isupper():
        m = _SHORT.match(head)
        if m is not None and _named(m):
            name = JOURNAL_SHORT_PRECISE if m["frac"] else JOURNAL_SHORT
            return Framed(line[m.end():], _yearless(m["mon"], m["day"], m["hms"], m["frac"]), None, False, name)
    if c.isalnum():
        m = _SHORT_LOCAL.match(head)
        if m is not None and _named(m):
            mon = calendar.month_abbr[int(m["num"])] if m["num"] else None
            ts = _yearless(mon, m["day"], m["hms"], m["frac"]) if mon else None
            name = JOURNAL_SHORT_PRECISE if m["frac"] else JOURNAL_SHORT
            return Framed(line[m.end():], ts, None, False, name)
    if c.isalnum() or c == "_":
        m = _COMPOSE.match(head)
        if m is not None and not _LEVEL_WORD.match(m["name"]):
            return Framed(line[m.end():], None, None, False, COMPOSE)
    return None


def peel(line: str) -> Framed:
    """One raw line (no newline) -> its inner line and what its framing said; unchanged when it has none.
    Nested framings are peeled too (up to ``MAX_LAYERS``): the time, stream and partial flag are the first a
    layer gives, the name is the outermost."""
    outer: Framed | None = None
    ts: float | None = None
    stream: str | None = None
    partial = False
    text = line
    for _ in range(MAX_LAYERS):
        f = _peel_once(text)
        if f is None:
            break
        outer = outer or f
        ts = ts if ts is not None else f.ts
        stream = stream or f.stream
        partial = partial or f.partial
        text = f.text
    if outer is None:
        return Framed(line)
    return Framed(text, ts, stream, partial, outer.framing)


# --- the reader ------------------------------------------------------------------------------------------

_EXPORT_START = re.compile(r"__(?:CURSOR|REALTIME_TIMESTAMP)=")
_EXPORT_FIELD = re.compile(r"[A-Za-z0-9_]{1,64}=")
EXPORT_BINARY_KEY = re.compile(r"[A-Z0-9_]{1,64}$")  # a field name alone: its value follows as sized bytes


@dataclass
class _Pending:
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    lines: int = 0
    first: Framed | None = None


class Deframer:
    """Stateful peeling of a stream of raw lines: partial records joined per stream (up to the complete
    record), journalctl ``export`` records assembled into their MESSAGE. Feed each raw line to :meth:`line`;
    what it returns is complete; :meth:`flush` at the end gives what was still held."""

    def __init__(self) -> None:
        self._partial: dict[str | None, _Pending] = {}
        self._export: dict[str, str] | None = None  # the export record being read: its fields
        self._export_lines = 0
        self._carry = 0  # raw lines read that gave no line (an export record without MESSAGE)
        self._binary_text: str | None = None  # text input: the field whose sized value the next line holds

    @property
    def in_export(self) -> bool:
        """Inside a journal export record (a field name alone is then followed by its value as sized bytes)."""
        return self._export is not None

    def line(self, raw: str) -> list[Framed]:
        out = self._line(raw)
        if out and self._carry:
            first = out[0]
            out[0] = Framed(first.text, first.ts, first.stream, first.partial, first.framing,
                            first.lines + self._carry)
            self._carry = 0
        return out

    def _line(self, raw: str) -> list[Framed]:
        if self._export is not None:
            if self._binary_text is not None:  # text input: 8 bytes of size (one character each, mostly), value
                key, self._binary_text = self._binary_text, None
                self._export_field(key, raw[8:])
                return []
            if raw == "":
                return self._end_export(blank=True)
            m = _EXPORT_FIELD.match(raw)
            if m is not None:
                self._export_field(raw[: m.end() - 1], raw[m.end():])
                return []
            if EXPORT_BINARY_KEY.match(raw):  # read from text (the byte reader reads the sized value itself)
                self._export_lines += 1
                self._binary_text = raw
                return []
            out = self._end_export(blank=False)  # a line that is no field ends the record: it is not one of its lines
            return out + self._line(raw)
        if _EXPORT_START.match(raw):
            self._export, self._export_lines = {}, 0
            return self._line(raw)
        f = peel(raw)
        if f.framing is None:
            return [f]
        pend = self._partial.get(f.stream)
        if f.partial:
            if pend is None:
                pend = self._partial[f.stream] = _Pending(first=f)
            pend.parts.append(f.text)
            pend.chars += len(f.text)
            pend.lines += 1
            if pend.chars < MAX_JOIN_CHARS:
                return []
            return [self._join(f.stream)]
        if pend is None:
            return [f]
        pend.parts.append(f.text)
        pend.lines += 1
        return [self._join(f.stream)]

    def export_value(self, key: str, value: str) -> None:
        """A binary export field, read as sized bytes by the byte reader: its name line and value."""
        self._export_field(key, value)
        self._export_lines += value.count("\n") + 1  # its size and bytes, newlines included

    def flush(self) -> list[Framed]:
        out = self._end_export(blank=False) if self._export is not None else []
        for stream in list(self._partial):
            out.append(self._join(stream))
        return out

    def _join(self, stream: str | None) -> Framed:
        pend = self._partial.pop(stream)
        first = pend.first
        assert first is not None
        return Framed("".join(pend.parts), first.ts, first.stream, False, first.framing, pend.lines)

    def _export_field(self, key: str, value: str) -> None:
        assert self._export is not None
        self._export_lines += 1
        if key in ("MESSAGE", "__REALTIME_TIMESTAMP") and len(value) <= MAX_JOIN_CHARS:
            self._export[key] = value

    def _end_export(self, blank: bool) -> list[Framed]:
        """The record read so far as its MESSAGE's line; ``blank``: ended by its blank line (one of its lines)."""
        rec, lines = self._export or {}, self._export_lines + int(blank)
        self._export, self._binary_text = None, None  # the next record's start counts its lines from 0
        if "MESSAGE" not in rec:
            self._carry += lines
            return []
        raw = rec.get("__REALTIME_TIMESTAMP", "")
        us = whole(raw, _MAX_US_DIGITS)
        ts = us / 1e6 if us is not None else None
        return [Framed(rec["MESSAGE"], ts, None, False, JOURNAL_EXPORT, lines)]


__all__ = ["FRAMINGS", "Deframer", "Framed", "parse_rfc3339", "peel"]
