"""What every engine's line loses before its profile reads it: ANSI colours, carriage-return redraws, and the
prefixes that wrappers and loggers put in front of the message (a container runtime's, journald's, a process tag,
timestamps and log levels of the engines firstlight knows), so that a profile's ``^`` anchors to the message."""

from __future__ import annotations

from firstlight.logtext import ANSI_RE as _ANSI_RE
from firstlight.logtext import KNOWN_PREFIX_RE as _PREFIX_RE
from firstlight.logtext import classify_prefix, has_ansi


def clean_line(line: str) -> str:
    """ANSI-free, right-trimmed line with timestamp/level/TP/worker prefixes removed.

    Carriage-return redraws are *not* handled here (see ``replay.split_redraws``); a ``\\r`` left in the
    line keeps only the text after the last non-empty one. Only a bounded prefix of a line is kept, so that
    no pattern applied to the result does unbounded work.
    """
    line = classify_prefix(line)
    if has_ansi(line):
        line = _ANSI_RE.sub("", line)
    line = line.rstrip("\r\n")
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    for _ in range(4):
        m = _PREFIX_RE.match(line)
        if m is None or m.end() == 0:
            break
        line = line[m.end() :]
    return line.rstrip()


__all__ = ["clean_line"]
