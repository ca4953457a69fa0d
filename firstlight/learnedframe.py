"""A log's frame learned from its own lines: the prefix that recurs on most of a log's first lines, whatever its
exact shape, peeled from every line that fits it.

``firstlight.framing`` peels the framings it knows by name (docker, CRI, compose, journald, syslog, JSON records);
a log also reaches people through a k9s log pane (``│ `` before every line), a process tag nobody specified
(``[38957] ``), a platform's logger around an engine's output (LocalAI's ``1:59PM DBG GRPC(model-127.0.0.1:3657):
stderr ``), a viewer's clock in a shape of its own. :class:`FrameLearner` reads the first lines of a source (up to
``WINDOW`` of them, from the first) and learns the frame from them: each line's head is cut into tokens (a run of
digits is one class, a word is kept as it is, whitespace is one class, any other character is itself), and the
longest token sequence that starts at least ``MIN_LINES`` lines and a ``SHARE`` of the lines read is the frame.
From then on it is peeled from every line that fits it (a regular expression built from the tokens, matched
against a bounded prefix: linear, as ``firstlight.logtext`` requires of per-line work); a line that does not fit
is read as it is. The lines read before the frame is learned are read as they are: a live source and a replay
read the same lines the same way, one line at a time.

What is a frame and what is the engine's own line:

* a frame ends with a whitespace after a closing mark (``|``, ``│``, ``]``, ``)``, ``>``, ``]:``, ``):``) or after
  a time of day (``21:35:19``, ``21:35:19.123Z``, ``1:59PM``): a run of identical messages
  (``llama_model_loader: - kv  0: ``) is not one;
* a line whose head the engine profiles already read (``firstlight.engines.lines.clean_line``'s prefixes: vLLM's
  ``INFO 05-07 ...``, SGLang's ``[... TP0] ``, a Ray process tag, glog, python logging) teaches no frame: the
  profiles need that head, and the ``understood`` test given to the learner says which heads those are;
* a CLI spinner's braille glyph before a line (``⠸ ``) is dropped (:func:`drop_spinner`), with or without a frame;
* after the frame, a ``stdout``/``stderr`` word (a platform relaying a child's streams) is peeled with it and is
  the line's stream.

What a peeled frame keeps: its date and time where it has one (``2025-02-06 21:35:19``, ``2025-02-06T21:35:19Z``)
as the line's time, and its text without that time as the line's source (the tag, pod or rank it names).

A leaf beside ``firstlight.framing``: it imports only ``firstlight.framing``'s time parser.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from firstlight.framing import parse_rfc3339

FRAME_HEAD = 256  # the prefix of a line a frame is looked for in
MAX_TOKENS = 48  # a frame's longest token sequence
WINDOW = 32  # the first lines (not blank) a frame is learned from
MIN_LINES = 3  # a frame recurs on at least this many of them
SHARE = 0.75  # ... and on at least this share of the lines read so far

_TOKEN = re.compile(r"\d+|[^\W\d_]+|\s+|.", re.S)
_CLOSE = frozenset("|│┃])>")
_SPACE, _DIGITS = " ", "0"
# a time of day: "21:35:19", "21:35:19.123", "1:59" before a meridiem word
_TIME_TAIL = ((_DIGITS, ":", _DIGITS, ":", _DIGITS), (_DIGITS, ":", _DIGITS, ":", _DIGITS, ".", _DIGITS))
_ZONE_WORDS = frozenset({"Z", "AM", "PM", "UTC", "GMT"})
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?")
_TIME_TEXT = re.compile(r"(?<![\w:.-])(?:\d{4}-\d\d-\d\d[T ])?\d{1,2}:\d\d(?::\d\d)?(?:[.,]\d{1,9})?"
                        r"(?:Z|[AP]M|[+-]\d\d:?\d\d)?(?![\w:])")
_STREAM = re.compile(r"(stdout|stderr)(?:\s+|$)")
_SPINNER = re.compile("[\u2800-\u28ff]+ ")  # a CLI spinner's braille glyph left before a line by its redraw


def drop_spinner(text: str) -> str:
    """A line without the spinner glyph a CLI's redraw left before it (``⠸ llm_load_vocab: ...``)."""
    m = _SPINNER.match(text)
    return text[m.end():] if m is not None else text


@dataclass(frozen=True)
class Peeled:
    """A line with its learned frame peeled off."""

    text: str
    ts: float | None = None  # the frame's date and time, where it has one (POSIX seconds)
    source: str | None = None  # the frame's text without its time: the tag, pod or rank it names
    stream: str | None = None  # stdout | stderr, where a word after the frame says


def _shape(text: str) -> tuple[list[str], list[int]]:
    """The head's tokens as classes (digits, whitespace) or themselves, and the end offset of each."""
    shape: list[str] = []
    ends: list[int] = []
    for m in _TOKEN.finditer(text, 0, FRAME_HEAD):
        tok = m.group()
        shape.append(_DIGITS if tok.isdigit() else _SPACE if tok.isspace() else tok)
        ends.append(m.end())
        if len(shape) >= MAX_TOKENS:
            break
    return shape, ends


def _prose(shape: list[str], i: int) -> bool:
    """Token ``i`` is a word of a message: a word between whitespace (or the line's start) and whitespace, not a
    short capitalised tag (``DBG``, ``INFO``, ``PM``)."""
    tok = shape[i]
    if not tok[0].isalpha() or (tok.isupper() and len(tok) <= 5):
        return False
    return (i == 0 or shape[i - 1] == _SPACE) and i + 1 < len(shape) and shape[i + 1] == _SPACE


def _frame_ends(shape: list[str]) -> list[int]:
    """Token counts at which a frame may end: a whitespace after a closing mark or a time of day; never after a
    message's word (``Loading safetensors checkpoint shards: 12% Completed | ``), and only where the frame holds
    a number (a time, a pid, an address) or a box border."""
    out = []
    numbered = False
    for i in range(1, len(shape)):
        if _prose(shape, i - 1):
            break
        numbered = numbered or shape[i - 1] == _DIGITS or shape[i - 1] in ("│", "┃")
        if shape[i] != _SPACE or not numbered:
            continue
        before = shape[:i]
        last = before[-1]
        if last in _CLOSE or (last == ":" and len(before) > 1 and before[-2] in ("]", ")")):
            out.append(i + 1)
            continue
        if last in _ZONE_WORDS:
            before = before[:-1]
        elif len(before) > 4 and before[-4] in ("+", "-") and before[-2] == ":":  # an offset: +00:00
            before = before[:-4]
        elif len(before) > 2 and before[-2] in ("+", "-"):  # +0000
            before = before[:-2]
        if any(tuple(before[-len(t):]) == t for t in _TIME_TAIL) or (
                last in ("AM", "PM") and tuple(before[-3:]) == (_DIGITS, ":", _DIGITS)):
            out.append(i + 1)
    return out


def _pattern(shape: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("".join(r"\d+" if t == _DIGITS else r"\s+" if t == _SPACE else re.escape(t) for t in shape))


class FrameLearner:
    """Learns one source's frame from its first lines (:meth:`observe`), then peels it (:meth:`peel`).

    ``understood(line)``: whether the engine profiles already read the line's head (such a line teaches no frame).
    Bounded: at most ``WINDOW`` lines are kept while learning, none after."""

    def __init__(self, understood: Callable[[str], bool] | None = None) -> None:
        self._understood = understood
        self._lines = 0  # lines read while learning (not blank)
        self._counts: Counter[tuple[str, ...]] = Counter()
        self._frame: re.Pattern[str] | None = None
        self._done = False

    @property
    def frame(self) -> str | None:
        """The learned frame's pattern, or None."""
        return self._frame.pattern if self._frame is not None else None

    def observe(self, text: str) -> None:
        """One finished line, read in order; learning stops once a frame is learned or the window is read."""
        if self._done or not text.strip():
            return
        self._lines += 1
        if self._understood is None or not self._understood(text):
            shape, ends = _shape(text)
            for n in _frame_ends(shape):
                self._counts[tuple(shape[:n])] += 1
                if self._understood is not None and self._understood(text[ends[n - 1]:]):
                    break  # the profiles read what follows: the frame ends here
        need = max(MIN_LINES, SHARE * self._lines)
        best = max((s for s, c in self._counts.items() if c >= need), key=len, default=None)
        if best is not None:
            self._frame, self._done = _pattern(best), True
            self._counts.clear()
        elif self._lines >= WINDOW:
            self._done = True
            self._counts.clear()

    def peel(self, text: str) -> Peeled | None:
        """The line without its frame, or None where no frame is learned or the line does not fit it."""
        if self._frame is None:
            return None
        m = self._frame.match(text, 0, FRAME_HEAD)
        if m is None:
            return None
        rest = text[m.end():]
        stream = None
        s = _STREAM.match(rest)
        if s is not None:
            stream, rest = s.group(1), rest[s.end():]
        head = m.group()
        d = _DATETIME.search(head)
        ts = parse_rfc3339(d.group()) if d is not None else None
        source = " ".join(_TIME_TEXT.sub(" ", head).split()).strip("|│┃: ") or None
        return Peeled(rest, ts, source, stream)


__all__ = ["FrameLearner", "Peeled", "drop_spinner"]
