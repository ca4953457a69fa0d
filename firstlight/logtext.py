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
from typing import BinaryIO, NamedTuple

from firstlight import framing
from firstlight.learnedframe import FrameLearner, drop_spinner

MAX_LINE_BYTES = 1 << 20
CLASSIFY_CHARS = 8192  # the prefix of a line that patterns look at
READ_CHUNK = 1 << 20

ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final byte (colours, erase line, cursor moves)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC ... BEL / ST (hyperlinks, titles)
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
    r"|\^\[\[[0-9;]*[A-Za-z]"  # a CSI in caret notation ("^[[0;36m", as ``cat -v`` shows it; not "^[[:space:]]")
    r"|\^M$"  # ... and a carriage return before the newline, the same way (corpus: h-vllm-gaudi-oss-warmup-graphs-...)
)


def has_ansi(text: str) -> bool:
    """Whether a line holds an escape ``ANSI_RE`` removes (the ESC byte, or a CSI's caret notation)."""
    return "\x1b" in text or "^[[" in text or text.endswith("^M")


# The prefixes ``firstlight.engines.lines.clean_line`` removes (repeatedly, up to 4 times) before classification.
# Each alternative is one layer: container/journald wrappers, process tags, timestamps and log levels of the
# engines we know.
KNOWN_PREFIX_RE = re.compile(
    r"^(?:"
    r"[\w.-]+-\d+\s+\|\s?"  # docker compose: "vllm-1  | "
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: "  # journald/syslog
    r"|\((?:[\w.-]+)(?: [\w]+=[^)]*)?\)\s"  # vLLM/Ray process tag: "(EngineCore_DP0 pid=17374) " (one space: the
    # indentation after it is the line's own, a traceback's frame and source lines)
    r"|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|TRACE) (?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r" (?:\[[^\]]*\] |[\w.-]+:\d+\] )?"  # vLLM: "INFO 05-07 02:13:52 [core.py:396] " (a year where configured)
    r"|\[[\w./-]+\.py:\d+\] "  # a Python logger's "[file.py:N] " left where a wrapper re-stamped the line
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\] [IWEDT] "  # llama-box "[2025-07-21 06:52:38.758083] I "
    r"|\[(?:(?:\d{4}-)?\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z]{2,3}\d+)*\] "  # SGLang "[... TP0] "
    r"|\[(?:gpu_id|rank|tp_rank)=\d+\] "  # old SGLang "[gpu_id=0] "
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+"
    r"(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR)\s+"  # TGI / tracing ISO
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)? - [\w.\-]+ - [A-Z]+ - "  # python logging (LMDeploy)
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)? (?:TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) "
    # a wrapper's own stamp and level before the line it relays (Lemonade: "2026-05-08 11:44:30.892 [Info] ")
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)? \[(?:Trace|Debug|Info|Warning|Warn|Error|Critical)\] "
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w./-]+:\d+\] "  # glog (torch C++ warnings)
    r"|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+"  # uvicorn "INFO:     "
    r"|\d+\.\d\d\.\d{3}\.\d{3} [IWEDT] "  # llama.cpp --log-timestamps/--log-prefix
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\] \[(?:trace|debug|info|warning|error|critical)\] "  # spdlog (WasmEdge)
    r"|\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] "  # TensorRT-LLM "[11/20/2024-10:11:12] "
    r"|\[TRT-LLM\](?: \[[A-Z]\])? "
    # TorchServe's log4j stamp on its worker's relayed output (corpus: h-vllm-torchserve-llama31-8b-tp2-gpu-blocks)
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3} \[(?:TRACE|DEBUG|INFO|WARN|ERROR) ?\] W-\d+-[\w.-]+-std(?:out|err) "
    r"MODEL_LOG - ?"
    r")"
)


def understood(line: str) -> bool:
    """Whether the engine profiles read the line's head (``KNOWN_PREFIX_RE``): such a head is the engine's own,
    never a frame to learn (``firstlight.learnedframe``)."""
    head = line[:1024]
    if has_ansi(head):
        head = ANSI_RE.sub("", head)
    m = KNOWN_PREFIX_RE.match(head)
    return m is not None and m.end() > 0


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
    if has_ansi(text):
        text = ANSI_RE.sub("", text)
    return UNSAFE_RE.sub("\ufffd", text)


def _decode(raw: bytes | bytearray) -> str:
    return strip_ansi(bytes(raw).decode("utf-8", errors="replace"))


# a tqdm bar ("| 0/23 [00:00<?, ?it/s]") with the next line glued to it where its carriage return was lost in a
# paste (corpus: d-sglang-deepseek-2node-a100-capture-jit-stuck)
# ... or an indicatif bar (a Rust server's hub fetch: "] 596 B/596 B 3.50 KiB/s (0s)Error: ..."; corpus: h-generic-
# mistralrs-gguf-config-null-usize)
_GLUED_BAR = re.compile(r"\| *\d+/\d+ \[\d+:\d\d(?::\d\d)?<[^\]]{0,40}\](?=\S)"
                        r"|\] [\d.]+ ?[KMGT]?i?B/[\d.]+ ?[KMGT]?i?B [\d.]+ ?[KMGT]?i?B/s \(\d+[smh]\)(?=\S)")


def split_redraws(text: str) -> tuple[list[str], str]:
    """Split a line with carriage returns into (redraws, final text): a terminal shows only the last
    non-empty segment; the earlier ones are progress redraws. A progress bar the next line is glued to is a
    redraw too."""
    text = text.rstrip("\n")
    if text.endswith("\r"):
        text = text.rstrip("\r")
    redraws: list[str] = []
    if "\r" in text:
        segments = [s for s in text.split("\r") if s.strip()]
        if not segments:
            return [], ""
        redraws, text = segments[:-1], segments[-1]
    if "<" in text or "/s (" in text:
        m = _GLUED_BAR.search(text, 0, 4096)
        if m is not None:
            redraws.append(text[:m.end()])
            text = text[m.end():]
    return redraws, text


class LineEvent(NamedTuple):
    """One line (or a progress redraw of one) as it enters interpretation: its framing peeled off."""

    text: str
    final: bool  # False: a progress redraw of a line not yet finished
    ts: float | None = None  # the framing's time of the line (``firstlight.framing``), where it has one
    lines: int = 1  # raw lines it stands for (joined partial records, a journal export record); 0 for a redraw
    framing: str | None = None
    stream: str | None = None  # stdout | stderr, where the framing says
    source: str | None = None  # the learned frame's tag, pod or rank (``firstlight.learnedframe``), where it has one


LEARNED = "learned"  # LineEvent.framing of a line whose frame was learned from the log (``firstlight.learnedframe``)

# Framings whose inner text was decoded from an escaped form (JSON, journal export): escapes are stripped again.
_DECODED = frozenset({framing.DOCKER_JSON, framing.SHIPPER_JSON, framing.JOURNAL_JSON, framing.JOURNAL_EXPORT})


class LineSplitter:
    """Incremental bytes -> text lines, the ONE place where a log's lines are cut and their framing is peeled.

    Splits on ``\\n`` (``\\r\\n`` is a newline), treats a lone ``\\r`` as a redraw of the current line (the
    line keeps its last non-empty redraw; the earlier redraws are reported as non-final events so progress
    bars can be followed live), decodes invalid UTF-8 with ``errors="replace"`` and strips ANSI escapes. A
    line longer than ``max_line_bytes`` is cut into pieces so memory stays bounded.

    Each line's framing (a container runtime's, Kubernetes', journald's, a log shipper's: ``firstlight.framing``)
    is peeled off before its redraws are split, so that the engine profiles see the engine's own line: partial
    records are joined, a journal export record becomes its MESSAGE (its binary fields are read as sized bytes),
    and the framing's time comes with the line (:class:`LineEvent`). ``feed_text`` takes lines already decoded.
    Beside the known framings, a frame learned from the source's own first lines (``firstlight.learnedframe``)
    is peeled from every line that fits it, after the known ones, the same way for every source.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_line_bytes
        self._last_redraw: str | None = None  # last non-empty redraw already emitted for the current line
        self._deframer = framing.Deframer()
        self._line_frame: framing.Framed | None = None  # the framing of the current line, once its head is read
        self._binary_key: str | None = None  # journal export: the field whose sized value comes next
        self._learner = FrameLearner(understood)

    def feed(self, data: bytes) -> list[str]:
        """Complete lines contained in ``data`` (plus what was buffered)."""
        return [e.text for e in self.feed_lines(data) if e.final]

    def flush(self) -> list[str]:
        return [e.text for e in self.flush_lines() if e.final]

    def feed_events(self, data: bytes) -> list[tuple[str, bool]]:
        """``(text, final)`` events: ``final`` False for a progress redraw of a line not yet finished."""
        return [(e.text, e.final) for e in self.feed_lines(data)]

    def flush_events(self) -> list[tuple[str, bool]]:
        return [(e.text, e.final) for e in self.flush_lines()]

    def feed_lines(self, data: bytes) -> list[LineEvent]:
        """The :class:`LineEvent` s that ``data`` (plus what was buffered) completes."""
        events: list[LineEvent] = []
        buf = self._buf
        buf += data
        start = 0
        while True:
            if self._binary_key is not None:
                if len(buf) - start < 8:
                    break
                size = int.from_bytes(buf[start:start + 8], "little")
                if size > self._max:  # not a sized value after all: read on as lines
                    self._binary_key = None
                    continue
                if len(buf) - start < 8 + size + 1:
                    break
                value = _decode(buf[start + 8:start + 8 + size])
                start += 8 + size + (buf[start + 8 + size:start + 9 + size] == b"\n")
                self._deframer.export_value(self._binary_key, value)
                self._binary_key = None
                continue
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            self._complete(buf[start:nl], events)
            start = nl + 1
        if start:
            del buf[:start]
        if self._binary_key is not None:
            return events  # a sized value is awaited (its size is at most the cut already)
        # redraws of the unfinished line: every segment followed by a \r is complete (an export record's text
        # lines have none; they are cut like any line: memory stays bounded inside a record too)
        cr = -1 if self._deframer.in_export else buf.rfind(b"\r")
        if cr == len(buf) - 1:  # may be the first half of \r\n: wait for the next byte
            cr = buf.rfind(b"\r", 0, cr)
        if cr >= 0:
            for seg in bytes(buf[:cr]).split(b"\r"):
                text = self._head(_decode(seg))
                if text.strip():
                    events.append(self._event(text, False))
                    self._last_redraw = text
            del buf[: cr + 1]
        while len(buf) > self._max:
            piece = bytes(buf[: self._max])
            del buf[: self._max]
            events.append(self._event(self._head(_decode(piece)), True))
            self._last_redraw = None
        return events

    def flush_lines(self) -> list[LineEvent]:
        events: list[LineEvent] = []
        self._binary_key = None
        if self._buf or self._last_redraw is not None:
            self._complete(bytes(self._buf), events)
            self._buf.clear()
        for f in self._deframer.flush():
            self._emit(f, events)
        return events

    def feed_text(self, line: str) -> list[LineEvent]:
        """One line already decoded (an iterable of lines, a journal's MESSAGE): peeled and split like bytes."""
        events: list[LineEvent] = []
        text = strip_ansi(line).rstrip("\n")
        for f in self._deframer.line(text.rstrip("\r")):
            self._emit(f, events)
        return events

    def flush_text(self) -> list[LineEvent]:
        events: list[LineEvent] = []
        for f in self._deframer.flush():
            self._emit(f, events)
        return events

    def _head(self, text: str) -> str:
        """A piece of the current line read before its end (a redraw, a cut): the first one tells its framing."""
        if self._line_frame is None:
            self._line_frame = framing.peel(text)
            text = self._line_frame.text
            if self._line_frame.framing in _DECODED:
                text = strip_ansi(text)
        return text

    def _event(self, text: str, final: bool) -> LineEvent:
        f = self._line_frame
        if f is None:
            f = framing.Framed(text)
        return self._peeled(text, final, f, 1 if final else 0)

    def _peeled(self, text: str, final: bool, f: framing.Framed, lines: int) -> LineEvent:
        """One line or redraw as an event: the learned frame peeled where it fits (the known framing's time and
        stream first); a spinner's glyph left before it dropped."""
        text = drop_spinner(text)
        p = self._learner.peel(text)
        if p is None:
            return LineEvent(text, final, f.ts, lines, f.framing, f.stream)
        return LineEvent(p.text, final, f.ts if f.ts is not None else p.ts, lines, f.framing or LEARNED,
                         f.stream or p.stream, p.source)

    def _complete(self, raw: bytes | bytearray, events: list[LineEvent]) -> None:
        if raw.endswith(b"\r"):
            raw = raw.rstrip(b"\r")
        text = _decode(raw)
        head, self._line_frame = self._line_frame, None
        if head is not None:  # its head was read already (a redraw, a cut): the rest is the engine's text
            frames = [framing.Framed(text, head.ts, head.stream, False, head.framing)]
        elif self._deframer.in_export and framing.EXPORT_BINARY_KEY.match(text):
            self._binary_key = text
            return
        else:
            frames = self._deframer.line(text)
        for f in frames:
            self._emit(f, events)

    def _emit(self, f: framing.Framed, events: list[LineEvent]) -> None:
        """One peeled line: its redraws split (a line of several lines, a journal MESSAGE, is several lines)."""
        text = strip_ansi(f.text) if f.framing in _DECODED else f.text
        lines = f.lines
        for piece in text.split("\n") if "\n" in text else (text,):
            if "\r" in piece or "<" in piece or "/s (" in piece:
                redraws, final = split_redraws(piece)
                for r in redraws:
                    events.append(self._peeled(r, False, f, 0))
                if not final and redraws:
                    final = redraws[-1]
            else:
                final = piece
            if not final.strip() and self._last_redraw is not None:
                final = self._last_redraw
            self._last_redraw = None
            self._learner.observe(drop_spinner(final))
            events.append(self._peeled(final, True, f, lines))
            lines = 1


def classify_prefix(text: str) -> str:
    """The bounded prefix of a line that per-line patterns are applied to."""
    return text[:CLASSIFY_CHARS]


def read_line_events(path: str | os.PathLike[str], chunk: int = READ_CHUNK) -> Iterator[tuple[str, bool]]:
    """``(text, final)`` events of a file (see :func:`read_lines`)."""
    for e in read_lines(path, chunk):
        yield e.text, e.final


def read_lines(path: str | os.PathLike[str], chunk: int = READ_CHUNK) -> Iterator[LineEvent]:
    """The :class:`LineEvent` s of a file, streamed in bounded memory. Works on anything ``open`` can read:
    a regular file, a FIFO, ``/dev/stdin``, a ``<(zcat log.gz)`` process substitution (``/dev/fd/N``). Reads
    what is available (``read1``), so lines of a slow pipe come as they are written."""
    with open(path, "rb") as fh:
        yield from read_stream_lines(fh, chunk)


def read_stream_lines(fh: BinaryIO, chunk: int = READ_CHUNK) -> Iterator[LineEvent]:
    """The :class:`LineEvent` s of an open binary stream (standard input), in bounded memory."""
    splitter = LineSplitter()
    read = getattr(fh, "read1", fh.read)
    while True:
        data = read(chunk)
        if not data:
            break
        yield from splitter.feed_lines(data)
    yield from splitter.flush_lines()


def is_seekable_file(path: str | os.PathLike[str]) -> bool:
    """A regular file (it can be read twice, e.g. once to detect the engine); False for pipes and FIFOs."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
