"""Entries as ``journalctl -o json`` writes them: its JSON quirks, one entry read, and what systemd's own
messages about the unit say (a main process's exit, an OOM kill)."""

from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass, field
from typing import Any

from firstlight.errors import FirstlightError
from firstlight.logtext import strip_ansi
from firstlight.timeline import Observation, ProcessSample, SourceNote

OMITTED = "[journal: a MESSAGE over 4 KiB, omitted by journalctl -o json without --all]"
NO_INVOCATION = ""  # entries of a systemd too old to stamp _SYSTEMD_INVOCATION_ID (< 232)

# systemd's catalog ids (sd-messages.h) of the manager's messages about a unit that we interpret
MSG_PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15"
MSG_UNIT_FAILURE_RESULT = "d9b373ed55a64feb8242e02dbe79a49c"
MSG_UNIT_OUT_OF_MEMORY = "fe6faa94e7774663a0da52717891d8ef"  # "... killed by the OOM killer."
_EXIT_TEXT = re.compile(r"Main process exited, code=(?P<code>\w+), status=(?P<status>\d+)")
_SIGNALS = {s.name: int(s) for s in signal.Signals}
_MAX_DIGITS = 20  # __REALTIME_TIMESTAMP and EXIT_STATUS are 64-bit at most
KEPT_FIELDS = ("MESSAGE_ID", "EXIT_CODE", "EXIT_STATUS", "UNIT_RESULT", "N_RESTARTS", "_PID", "PRIORITY")


class JournalError(FirstlightError):
    """journalctl is missing, or could not read the journal: one line for the user."""


# --- the JSON quirks -------------------------------------------------------------------------------------


def _is_bytes(v: list[Any]) -> bool:
    return bool(v) and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 256 for x in v)


def field_values(value: Any, repeated: bool = False) -> list[str | None]:
    """Every value of one field: ``None`` for one omitted (over 4 KiB), bytes decoded as UTF-8 with
    replacement (never fatal), a repeated field's values in order. journalctl nests one level at most: a list
    inside a repeated field's list is no value (never a recursion as deep as the record is nested)."""
    if value is None:
        return [None]
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        if _is_bytes(value):
            return [bytes(value).decode("utf-8", "replace")]
        if repeated:
            return [None]
        out: list[str | None] = []
        for v in value:
            out.extend(field_values(v, True))
        return out
    return [str(value)]


def field_text(value: Any) -> str | None:
    """The first value of a field (identifiers, numbers: a repeat is the same value again)."""
    return field_values(value)[0]


def message_text(value: Any) -> str | None:
    """MESSAGE as one text (a repeated MESSAGE's values are joined as lines); ``None`` when omitted."""
    parts = [v for v in field_values(value) if v is not None]
    if not parts:
        return None
    return "\n".join(parts)


@dataclass(frozen=True)
class JournalEntry:
    t: float  # __REALTIME_TIMESTAMP, seconds
    message: str | None  # None: journalctl left it out (over 4 KiB)
    unit: str | None = None  # _SYSTEMD_UNIT: the unit whose process wrote the entry
    invocation: str | None = None  # _SYSTEMD_INVOCATION_ID
    about_unit: str | None = None  # UNIT / USER_UNIT / COREDUMP_UNIT: systemd writing about a unit
    about_invocation: str | None = None  # INVOCATION_ID / USER_INVOCATION_ID of that message
    cursor: str | None = None
    fields: dict[str, str] = field(default_factory=dict)  # KEPT_FIELDS present in the entry

    def is_engine(self, unit: str) -> bool:
        """Written by the unit's own processes (stdout/stderr, syslog): the engine's log."""
        return self.unit == unit

    def is_manager(self, unit: str) -> bool:
        """systemd's own message about the unit (started, exited, failed, restart scheduled)."""
        return self.about_unit == unit and self.unit != unit

    def invocation_for(self, unit: str) -> str | None:
        """The invocation this entry belongs to for ``unit``; None when it is not about ``unit``."""
        if self.is_engine(unit):
            return self.invocation or NO_INVOCATION
        if self.is_manager(unit):
            return self.about_invocation  # may be None: attributed to the latest invocation
        return None

    def lines(self) -> list[str]:
        """The message as log lines (a multi-line message is several lines; ANSI escapes removed)."""
        text = OMITTED if self.message is None else self.message
        text = text.rstrip("\n")
        return [strip_ansi(line) for line in text.split("\n")] if text else [""]


def parse_entry(obj: Any) -> JournalEntry | None:
    """One ``journalctl -o json`` object; None when it is not an entry (no usable timestamp)."""
    if not isinstance(obj, dict):
        return None
    raw = field_text(obj.get("__REALTIME_TIMESTAMP")) or ""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_DIGITS:  # 400 digits: no time, no float
        return None
    t = int(raw) / 1e6

    def get(*names: str) -> str | None:
        for name in names:
            if name in obj:
                return field_text(obj[name])
        return None

    kept = {k: v for k in KEPT_FIELDS if k in obj and (v := field_text(obj[k])) is not None}
    def shown(*names: str) -> str | None:  # ids that are printed: bidi controls and NUL neutralised
        value = get(*names)
        return strip_ansi(value) if value is not None else None

    return JournalEntry(t, message_text(obj.get("MESSAGE")), get("_SYSTEMD_UNIT"), shown("_SYSTEMD_INVOCATION_ID"),
                        get("UNIT", "USER_UNIT", "COREDUMP_UNIT"), shown("INVOCATION_ID", "USER_INVOCATION_ID"),
                        get("__CURSOR"), kept)


def parse_line(line: bytes | str) -> JournalEntry | None:
    """One line of ``journalctl -o json`` output; None for a line that is not a JSON entry."""
    try:
        return parse_entry(json.loads(line))
    except (ValueError, RecursionError):
        return None


def exit_code_of(entry: JournalEntry) -> tuple[bool, int | None]:
    """(is a main-process exit, code): ``code=exited`` gives the status, ``killed``/``dumped`` minus the
    signal number (as a Popen return code reads)."""
    text = entry.message or ""
    if entry.fields.get("MESSAGE_ID") == MSG_PROCESS_EXIT and "Main process" in text:
        how, status = entry.fields.get("EXIT_CODE"), entry.fields.get("EXIT_STATUS")
    else:
        m = _EXIT_TEXT.search(text)
        if m is None:
            return False, None
        how, status = m["code"], m["status"]
    status = (status or "").strip().partition("/")[0]  # "11", "11/SEGV", or a name: "SEGV" (an exec env's)
    if len(status) > _MAX_DIGITS:
        return True, None  # an exit, its status unreadable (5,000 digits is no status)
    if status.isdigit():
        code = int(status)
    elif how != "exited" and _SIGNALS.get(f"SIG{status.upper().removeprefix('SIG')}") is not None:
        code = _SIGNALS[f"SIG{status.upper().removeprefix('SIG')}"]
    else:
        return True, None
    # killed/dumped: a signal, never a positive exit code (killed by 9 is not "exit code 9")
    return True, (code if how == "exited" else -code)


def oom_trace_of(entry: JournalEntry) -> str | None:
    """systemd's word that the kernel's OOM killer hit the unit, as evidence (not judged here)."""
    text = (entry.message or "").strip()
    if entry.fields.get("UNIT_RESULT") == "oom-kill":
        return f"systemd: {text or 'Failed with result'} (Result=oom-kill)"
    if entry.fields.get("MESSAGE_ID") == MSG_UNIT_OUT_OF_MEMORY or "killed by the OOM killer" in text:
        return f"systemd: {text or 'a process of this unit has been killed by the OOM killer'}"
    return None


def manager_observations(entry: JournalEntry) -> list[Observation]:
    """systemd's message about the unit as observations: a main-process exit is a ProcessSample (the
    process is gone, with its code), anything else a note."""
    text = (entry.message or "").strip()
    is_exit, code = exit_code_of(entry)
    out: list[Observation] = [SourceNote(entry.t, "systemd", text)] if text else []
    if is_exit:
        out.append(ProcessSample(entry.t, alive=False, exit_code=code))
    return out
