"""Timestamps at the start of a server's log lines, read as POSIX times: for replay (a log's own clock) and for
live log sources that tell a file's past lines from its new ones. A leaf: it knows line formats, nothing else."""

from __future__ import annotations

import calendar
import re
import time

from firstlight.logtext import classify_prefix

# A line that may begin with a timestamp starts with one of these (the others are never parsed).
TS_START = frozenset("[0123456789(IWEFt")

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


def format_ts(ts: float | None) -> str:
    if ts is None:
        return ""
    if ts < 10 * 86400:  # time of day without a date, or llama.cpp's elapsed time
        return time.strftime("%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


__all__ = ["TS_START", "TimestampParser", "format_ts"]
