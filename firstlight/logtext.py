"""Text of logs: ANSI escapes, carriage-return redraws, and bytes split into lines in bounded memory.

Shared by the live log sources (``samplers.logs``) and the post-mortem replay (``firstlight.logreplay``), so both
see exactly the same lines.

One log line must never freeze firstlight: every per-line pattern is linear and is applied to a bounded
prefix of the line (``CLASSIFY_CHARS``); what decides a line's meaning is at its start (prefixes,
messages), and evidence is clipped far shorter anyway.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator

MAX_LINE_BYTES = 1 << 20
CLASSIFY_CHARS = 8192  # the prefix of a line that patterns look at
READ_CHUNK = 1 << 20

ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final byte (colours, erase line, cursor moves)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC ... BEL / ST (hyperlinks, titles)
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
)


# Access-log lines answer somebody's request (ours, while we poll): they say the HTTP server lives, not that
# the start progresses. Two linear searches over a bounded prefix (one regex with ``.*?`` between the method
# and the status was quadratic in the line length).
ACCESS_PREFIX = 2048
_ACCESS_REQUEST = re.compile(r"\b(?:GET|POST|HEAD|OPTIONS|PUT) /")
_ACCESS_STATUS = re.compile(r"\b[1-5]\d\d\b")


def is_access_line(text: str) -> bool:
    """An HTTP access-log line (uvicorn's, llama.cpp's): a reply to a request, not startup progress."""
    head = text[:ACCESS_PREFIX]
    m = _ACCESS_REQUEST.search(head)
    return m is not None and _ACCESS_STATUS.search(head, m.end()) is not None


# What must not reach a terminal or a page raw: NUL and the other C0/C1 controls (tab, newline and carriage
# return excepted: redraws are split on it) and the bidi controls that reorder text (U+202E shows "exe.txt" for
# "txt.exe"). Replaced by U+FFFD, so that the evidence still shows something was there.
UNSAFE_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


_UNSAFE_ON_ONE_LINE_RE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def one_line(text: str) -> str:
    """Text from outside (a path, a stored field) shown as one line: every control character (newline, tab and
    ESC included) and every bidi control becomes U+FFFD, so it can neither start a line nor reach the terminal."""
    return _UNSAFE_ON_ONE_LINE_RE.sub("\ufffd", text)


def strip_ansi(text: str) -> str:
    """Server text made safe to show: ANSI/OSC escapes removed, other controls and bidi controls neutralised."""
    if "\x1b" in text:
        text = ANSI_RE.sub("", text)
    return UNSAFE_RE.sub("\ufffd", text)


def _decode(raw: bytes | bytearray) -> str:
    return strip_ansi(bytes(raw).decode("utf-8", errors="replace"))


def split_redraws(text: str) -> tuple[list[str], str]:
    """Split a line with carriage returns into (redraws, final text): a terminal shows only the last
    non-empty segment; the earlier ones are progress redraws."""
    text = text.rstrip("\n")
    if text.endswith("\r"):
        text = text.rstrip("\r")
    if "\r" not in text:
        return [], text
    segments = [s for s in text.split("\r") if s.strip()]
    if not segments:
        return [], ""
    return segments[:-1], segments[-1]


class LineSplitter:
    """Incremental bytes -> text lines.

    Splits on ``\\n`` (``\\r\\n`` is a newline), treats a lone ``\\r`` as a redraw of the current line (the
    line keeps its last non-empty redraw; the earlier redraws are reported as non-final events so progress
    bars can be followed live), decodes invalid UTF-8 with ``errors="replace"`` and strips ANSI escapes. A
    line longer than ``max_line_bytes`` is cut into pieces so memory stays bounded.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_line_bytes
        self._last_redraw: str | None = None  # last non-empty redraw already emitted for the current line

    def feed(self, data: bytes) -> list[str]:
        """Complete lines contained in ``data`` (plus what was buffered)."""
        return [text for text, final in self.feed_events(data) if final]

    def flush(self) -> list[str]:
        return [text for text, final in self.flush_events() if final]

    def feed_events(self, data: bytes) -> list[tuple[str, bool]]:
        """``(text, final)`` events: ``final`` False for a progress redraw of a line not yet finished."""
        events: list[tuple[str, bool]] = []
        buf = self._buf
        buf += data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            self._complete(buf[start:nl], events)
            start = nl + 1
        if start:
            del buf[:start]
        # redraws of the unfinished line: every segment followed by a \r is complete
        cr = buf.rfind(b"\r")
        if cr == len(buf) - 1:  # may be the first half of \r\n: wait for the next byte
            cr = buf.rfind(b"\r", 0, cr)
        if cr >= 0:
            for seg in bytes(buf[:cr]).split(b"\r"):
                text = _decode(seg)
                if text.strip():
                    events.append((text, False))
                    self._last_redraw = text
            del buf[: cr + 1]
        while len(buf) > self._max:
            piece = bytes(buf[: self._max])
            del buf[: self._max]
            events.append((_decode(piece), True))
            self._last_redraw = None
        return events

    def flush_events(self) -> list[tuple[str, bool]]:
        events: list[tuple[str, bool]] = []
        if self._buf or self._last_redraw is not None:
            self._complete(bytes(self._buf), events)
            self._buf.clear()
        return events

    def _complete(self, raw: bytes | bytearray, events: list[tuple[str, bool]]) -> None:
        if raw.endswith(b"\r"):
            raw = raw.rstrip(b"\r")
        if b"\r" in raw:
            redraws, final = split_redraws(_decode(raw))
            for r in redraws:
                events.append((r, False))
            if not final and redraws:
                final = redraws[-1]
        else:
            final = _decode(raw)
        if not final.strip() and self._last_redraw is not None:
            final = self._last_redraw
        self._last_redraw = None
        events.append((final, True))


def classify_prefix(text: str) -> str:
    """The bounded prefix of a line that per-line patterns are applied to."""
    return text[:CLASSIFY_CHARS]


def read_line_events(path: str | os.PathLike[str], chunk: int = READ_CHUNK) -> Iterator[tuple[str, bool]]:
    """``(text, final)`` events of a file, streamed in bounded memory. Works on anything ``open`` can read:
    a regular file, a FIFO, ``/dev/stdin``, a ``<(zcat log.gz)`` process substitution (``/dev/fd/N``). Reads
    what is available (``read1``), so lines of a slow pipe come as they are written."""
    splitter = LineSplitter()
    with open(path, "rb") as fh:
        while True:
            data = fh.read1(chunk)
            if not data:
                break
            yield from splitter.feed_events(data)
    yield from splitter.flush_events()


def is_seekable_file(path: str | os.PathLike[str]) -> bool:
    """A regular file (it can be read twice, e.g. once to detect the engine); False for pipes and FIFOs."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
