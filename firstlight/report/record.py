"""Recorded runs: reading a ``--record`` file, a run's JSON summary, and the compact timeline kept in history.

A record is JSON Lines of observations (``firstlight.timeline``). One written by a process that was killed
may end in half a line, and a hand-edited one may hold anything: such lines are counted and skipped, never
fatal, so that whatever was recorded can still be drawn.

The history keeps each run's timeline too, so that ``firstlight report --run ID`` can draw a past start; it
is downsampled to a size cap (``pack_timeline``): everything the judge needs for phases and levels is kept
(the start, notes, log lines other than HTTP access lines, probe results where they change), and process and
GPU samples are thinned evenly until the whole fits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import heapq
import json
import math
import types
import typing
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from firstlight.errors import FirstlightError
from firstlight.files import bounded_lines
from firstlight.logtext import is_access_line
from firstlight.timeline import GpuSample, Level, LogLine, Observation, Probe, ProcessSample, SourceNote, from_dict

TIMELINE_CAP_BYTES = 1 << 20  # uncompressed JSON Lines per run in the history (gzip makes it ~10x smaller)
INFLATED_CAP_BYTES = 16 * TIMELINE_CAP_BYTES  # what a stored timeline may inflate to when read back
KEPT_CAP_BYTES = 8 << 20  # the private copy of a run's observations, beyond which log lines are only tailed
KEPT_TAIL_LINES = 2000  # the last log lines kept beyond that (what it said before the verdict)
LINE_CAP_BYTES = 16 << 20  # a record or summary line longer than this is skipped (read in bounded memory)
SUMMARY_CAP_BYTES = 16 << 20  # a summary file is parsed as one JSON object only up to this size


class RecordError(FirstlightError):
    """The file cannot be read, or holds no observation at all."""


@dataclass
class Recorded:
    observations: list[Observation]
    skipped: int  # lines that were not observations (bad JSON, unknown kind, truncated)


MAX_NUMBER = 1e15  # beyond any time (epoch seconds), count or byte size a run records; 1e308 is hostile input


def _typed(value: Any, hint: Any) -> bool:
    """``value`` is of the annotated type (the scalar fields, tuples of records, optionals), every number
    finite and within MAX_NUMBER: a record's lines come from anywhere (numbers as strings, NaN, lists for
    objects) and must not reach the drawing."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_typed(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is Level:
        return isinstance(value, Level)
    if hint in (int, float):
        ok = isinstance(value, int if hint is int else (int, float)) and not isinstance(value, bool)
        return ok and math.isfinite(value) and abs(value) <= MAX_NUMBER
    if hint is str:
        return isinstance(value, str)
    if origin is tuple:
        return isinstance(value, tuple) and all(_typed(v, args[0]) for v in value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return isinstance(value, hint) and _fields_typed(value)
    return True  # an annotation this check does not know: as before


_HINTS: dict[type, dict[str, Any]] = {}


def _fields_typed(obj: Any) -> bool:
    cls = type(obj)
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return all(_typed(getattr(obj, f.name), hints[f.name]) for f in dataclasses.fields(obj))


def parse_lines(lines: Iterable[str]) -> Recorded:
    out: list[Observation] = []
    skipped = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            obs = from_dict(json.loads(line))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            skipped += 1
            continue
        if _fields_typed(obs):
            out.append(obs)
        else:
            skipped += 1
    # Kept in the order they were fed to the judge, not sorted by time: a sample is stamped when it began, so a
    # process exit can carry an earlier time than the fatal lines the session read before it; sorted, the replay
    # saw the exit first and said "other" where the run said "oom".
    return Recorded(out, skipped)


def bounded(lines: Iterable[str], cap: int = KEPT_CAP_BYTES, tail: int = KEPT_TAIL_LINES) -> Iterator[str]:
    """The lines of a record, streamed, bounded as :class:`RecordTee` bounds a run's copy: past ``cap`` bytes
    its log lines are only tailed (the last ``tail``), with a note of those left out (a record of 1,000,000
    lines took 533 MB to draw). What follows the cap comes out in the order it was fed (the judge replays it
    in that order): the other observations after the cap are held, and merged with the tail by position."""
    seen = 0
    ring: deque[tuple[int, str]] = deque(maxlen=tail)
    held: list[tuple[int, str]] = []
    left_out = 0
    for n, line in enumerate(lines):
        if seen > cap:
            if line.startswith('{"kind": "log"'):
                if len(ring) == ring.maxlen:
                    left_out += 1
                ring.append((n, line))
            else:
                held.append((n, line))
            continue
        seen += len(line)
        yield line
    tail_lines = list(ring)
    if left_out and tail_lines:
        with contextlib.suppress(ValueError, AttributeError):
            t = float(json.loads(tail_lines[0][1]).get("t", 0.0))
            note = json.dumps(SourceNote(t, "log", f"{left_out} log lines of the record were left out of the "
                                                   "drawing (the last ones are drawn)").to_dict())
            tail_lines.insert(0, (tail_lines[0][0], note))  # just before the first line drawn
    for _, line in heapq.merge(held, tail_lines, key=lambda e: e[0]):
        yield line


def read_record(path: Path) -> Recorded:
    try:
        with open(path, "rb") as f:
            rec = parse_lines(bounded(b.decode("utf-8", "replace") for b in bounded_lines(f, LINE_CAP_BYTES)))
    except OSError as e:
        raise RecordError(f"cannot read {path}: {e.strerror}") from None
    if not rec.observations:
        raise RecordError(f"{path} holds no recorded observations (expected the JSON Lines of --record)")
    return rec


def read_summary(path: Path) -> dict[str, Any]:
    """A run's summary: a JSON object, or the JSON Lines of ``--json`` (the last ``summary`` event). Streamed:
    the whole file is parsed as one object only when it is at most ``SUMMARY_CAP_BYTES``."""
    kept: list[bytes] = []  # the file while it is small enough to be one object
    size = 0
    found: dict[str, Any] | None = None
    try:
        with open(path, "rb") as f:
            for line in bounded_lines(f, LINE_CAP_BYTES):
                size += len(line)
                if size <= SUMMARY_CAP_BYTES:
                    kept.append(line)
                if b'"summary"' not in line:
                    continue
                try:
                    obj = json.loads(line.decode("utf-8", "replace"))
                except (ValueError, RecursionError):
                    continue
                if isinstance(obj, dict) and obj.get("event") == "summary":
                    found = obj
    except OSError as e:
        raise RecordError(f"cannot read {path}: {e.strerror}") from None
    if size <= SUMMARY_CAP_BYTES:
        try:
            obj = json.loads(b"".join(kept).decode("utf-8", "replace"))
            if isinstance(obj, dict) and "verdict" in obj:
                return obj
        except (ValueError, RecursionError):
            pass
    if found is None:
        raise RecordError(f"{path} holds no run summary (a JSON object, or --json output ending in a summary)")
    return found


class RecordTee:
    """A ``--record`` stream that writes the user's record and a private copy (kept for the report and the
    history). The private copy failing (a full /tmp) only drops that copy; the user's record failing (a full
    disk, a file-size limit) is one warning through ``warn`` and stops that record only: the private copy goes
    on, so the report and the history still have the whole run. It never raises.

    The private copy is bounded as it is written: past ``cap`` bytes, log lines (what a flood is made of) are
    no longer written but kept in a ring of the last ``tail`` ones; the other observations after the cap are
    held beside them, and :meth:`finish` writes both merged in the order they were fed (the report replays the
    copy in that order: a flood's last lines, its traceback among them, before the exit that followed them).
    A 25 s log flood made a 72 MB copy that took 11-20 s to read back."""

    def __init__(self, user: IO[str] | None, private: IO[str], cap: int = KEPT_CAP_BYTES,
                 tail: int = KEPT_TAIL_LINES, warn: Callable[[str], None] | None = None) -> None:
        self.user = user
        self.warn = warn or (lambda m: None)
        self.private: IO[str] | None = private
        self.cap = cap
        self.kept_bytes = 0
        self.tail: deque[tuple[int, str]] = deque(maxlen=tail)
        self.held: list[tuple[int, str]] = []  # other observations after the cap, written at finish
        self.fed = 0
        self.left_out = 0  # log lines neither in the copy nor in the tail

    def write(self, text: str) -> int:
        if self.private is not None:
            self.fed += 1
            if self.kept_bytes > self.cap:
                if text.startswith('{"kind": "log"'):
                    if len(self.tail) == self.tail.maxlen:
                        self.left_out += 1
                    self.tail.append((self.fed, text))
                else:
                    self.held.append((self.fed, text))
            else:
                self._keep(text)
        if self.user is not None:
            try:
                self.user.write(text)
            except (OSError, ValueError) as e:
                self._user_failed(e)
        return len(text)

    def _user_failed(self, e: Exception) -> None:
        user, self.user = self.user, None
        with contextlib.suppress(OSError, ValueError):  # what is still buffered cannot be written either
            if user is not None:
                user.close()
        reason = getattr(e, "strerror", None) or str(e)
        name = getattr(user, "name", "the record file")
        self.warn(f"warning: --record {name}: cannot write ({reason}); recording stopped, the run goes on")

    def _keep(self, text: str) -> None:
        if self.private is None:
            return
        try:
            self.private.write(text)
            self.kept_bytes += len(text)
        except (OSError, ValueError):
            self.private = None

    def finish(self) -> None:
        """What came after the cap, in the order it was fed: the held observations, the last log lines and,
        just before them, a note of how many were left out."""
        tail = list(self.tail)
        if self.left_out and tail:
            first_t = json.loads(tail[0][1]).get("t", 0.0)
            note = SourceNote(first_t, "log", f"{self.left_out} log lines of a flood were left out of this run's "
                              "report and history (its --record file has them all)")
            tail.insert(0, (tail[0][0], note.to_line()))
        for _, text in heapq.merge(self.held, tail, key=lambda e: e[0]):
            self._keep(text)
        self.tail.clear()
        self.held = []
        self.left_out = 0

    def flush(self) -> None:
        if self.user is not None:
            try:
                self.user.flush()
            except (OSError, ValueError) as e:
                self._user_failed(e)

    def close(self) -> None:
        """The user's record only: the private copy is its owner's (:class:`RunArtifacts`) to read and close."""
        self.flush()
        if self.user is not None:
            with contextlib.suppress(OSError, ValueError):
                self.user.close()
            self.user = None


# -- the compact timeline of the history --------------------------------------------------------------------

def _essential(observations: Sequence[Observation]) -> tuple[list[Observation], list[int]]:
    """What to keep whatever the size (the judge's phases and levels depend on it), and the indices of the
    samples that may be thinned."""
    keep: list[Observation] = []
    thinnable: list[int] = []
    last_probe: dict[int, bool] = {}
    last_procs = -1
    for o in observations:
        if isinstance(o, Probe):
            if last_probe.get(int(o.level)) == o.ok and o.level is not Level.GENERATION:
                continue
            last_probe[int(o.level)] = o.ok
        elif isinstance(o, LogLine) and is_access_line(o.text):
            continue
        elif isinstance(o, ProcessSample):
            n = len(o.procs)
            if o.alive and not o.died and n == last_procs:
                thinnable.append(len(keep))
            last_procs = n
        elif isinstance(o, GpuSample):
            thinnable.append(len(keep))
        keep.append(o)
    return keep, thinnable


def downsample(observations: Sequence[Observation], cap_bytes: int = TIMELINE_CAP_BYTES) -> list[Observation]:
    """At most about ``cap_bytes`` of JSON Lines: thin the samples (every 2nd, 4th, ...), then the log lines
    (the first and the last ones stay: how it began, and what it said before the verdict)."""
    keep, thinnable = _essential(observations)
    sizes = [len(o.to_line()) for o in keep]
    stride = 1
    drop: set[int] = set()
    while sum(s for i, s in enumerate(sizes) if i not in drop) > cap_bytes and stride < len(keep):
        stride *= 2
        drop = {idx for n, idx in enumerate(thinnable) if n % stride}
    out = [o for i, o in enumerate(keep) if i not in drop]
    total = sum(len(o.to_line()) for o in out)
    if total > cap_bytes:
        logs = [i for i, o in enumerate(out) if isinstance(o, LogLine)]
        size = {i: len(out[i].to_line()) for i in logs}
        budget = max(0, cap_bytes - (total - sum(size.values())))
        kept = set(_fill(logs, size, budget // 4)) | set(_fill(logs[::-1], size, budget - budget // 4))
        out = [o for i, o in enumerate(out) if i not in size or i in kept]
    return out


def _fill(indices: list[int], size: dict[int, int], budget: int) -> list[int]:
    """The leading indices whose sizes fit in ``budget``."""
    out = []
    for i in indices:
        budget -= size[i]
        if budget < 0:
            break
        out.append(i)
    return out


def pack_timeline(observations: Sequence[Observation], cap_bytes: int = TIMELINE_CAP_BYTES) -> bytes:
    """Downsampled JSON Lines, gzip-compressed: what the history stores for one run."""
    return gzip.compress("".join(o.to_line() for o in downsample(observations, cap_bytes)).encode(), mtime=0)


def unpack_timeline(data: bytes, limit: int = INFLATED_CAP_BYTES) -> list[Observation]:
    """The stored timeline; a RecordError when it is damaged or inflates beyond ``limit`` (what firstlight
    stores is about TIMELINE_CAP_BYTES: a row that inflates to 400 MB was not written by it)."""
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    try:
        raw = inflater.decompress(data, limit + 1)
    except zlib.error as e:
        raise RecordError(f"the stored timeline is damaged ({e})") from None
    if len(raw) > limit:
        raise RecordError(f"the stored timeline inflates beyond {limit >> 20} MiB: not one firstlight wrote")
    if not inflater.eof:
        raise RecordError("the stored timeline is damaged (truncated)")
    return parse_lines(raw.decode("utf-8", "replace").splitlines()).observations
