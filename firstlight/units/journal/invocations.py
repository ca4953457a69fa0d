"""A unit's starts in its journal (each ``_SYSTEMD_INVOCATION_ID``), for replay: which ones there are, the one
asked for, and its lines."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from firstlight.deaths import describe_exit
from firstlight.logtext import strip_ansi
from firstlight.timeline import ProcessSample

from .entries import NO_INVOCATION, JournalEntry, JournalError, exit_code_of, oom_trace_of
from .journalctl import read_entries


@dataclass
class Invocation:
    id: str
    first_t: float
    last_t: float
    lines: int = 0  # engine entries
    exit_code: int | None = None  # from systemd's "Main process exited" message, if any
    exited: bool = False
    exit_t: float | None = None  # when (read with the lines, for replay)
    oom: list[str] = field(default_factory=list)  # systemd's OOM-kill messages about it

    def ending(self) -> ProcessSample | None:
        """The main process's end as an observation, once the lines were read (replay)."""
        if not self.exited or self.exit_t is None:
            return None
        return ProcessSample(self.exit_t, alive=False, exit_code=self.exit_code, oom=tuple(self.oom))

    def describe(self) -> str:
        shown = strip_ansi(self.id) if self.id else "(no invocation id)"  # server-written: made safe to show
        how = "" if not self.exited else f", main process {describe_exit(self.exit_code)}"
        began = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.first_t))
        return f"invocation {shown}: {self.lines} lines from {began} UTC{how}"


def list_invocations(entries: Iterable[JournalEntry], unit: str) -> list[Invocation]:
    """The unit's invocations in the order they began; systemd's messages without an id count for the
    latest one."""
    found: dict[str, Invocation] = {}
    last: Invocation | None = None
    for e in entries:
        inv_id = e.invocation_for(unit)
        if inv_id is None and not e.is_manager(unit):
            continue
        inv = found.get(inv_id) if inv_id is not None else last
        if inv is None:
            if inv_id is None:
                continue
            inv = found[inv_id] = Invocation(inv_id, e.t, e.t)
        last = inv
        inv.last_t = max(inv.last_t, e.t)
        if e.is_engine(unit):
            inv.lines += 1
        else:
            is_exit, code = exit_code_of(e)
            if is_exit:
                inv.exited, inv.exit_code = True, code
    return list(found.values())


def pick_invocation(invocations: list[Invocation], wanted: str | None, unit: str) -> Invocation:
    """The last invocation, or the one asked for (its id, or an unambiguous prefix of 8+ characters)."""
    if not invocations:
        raise JournalError(f"no entries of {unit} in the journal")
    if wanted is None:
        started = [i for i in invocations if i.lines] or invocations
        return started[-1]
    wanted = wanted.strip().lower().replace("-", "")
    hits = [i for i in invocations if i.id == wanted or (len(wanted) >= 8 and i.id.startswith(wanted))]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(i.id or "(none)" for i in invocations[-5:])
    if not hits:
        raise JournalError(f"no invocation {wanted} of {unit} in the journal (last ones: {known})")
    raise JournalError(f"invocation prefix {wanted} is ambiguous for {unit} ({known})")


_LIST_FIELDS = ("_SYSTEMD_UNIT", "_SYSTEMD_INVOCATION_ID", "UNIT", "INVOCATION_ID", "USER_UNIT",
                "USER_INVOCATION_ID", "MESSAGE_ID", "EXIT_CODE", "EXIT_STATUS")


def journal_lines(journal_file: Path, unit: str, invocation: str | None = None,
                  journalctl: str = "journalctl") -> tuple[Invocation, list[Invocation], Iterator[tuple[float, str]]]:
    """For replay: the chosen invocation (the last one by default), all of them, and that invocation's engine
    lines as (journal time, text) pairs, streamed. Two passes over the journal (the ids first, with only the
    fields that name them), so a long journal is never held in memory."""
    invocations = list_invocations(read_entries(journal_file, unit, output_fields=_LIST_FIELDS,
                                                journalctl=journalctl), unit)
    chosen = pick_invocation(invocations, invocation, unit)

    def pairs() -> Iterator[tuple[float, str]]:
        """The lines; systemd's messages about the invocation (its exit, an OOM kill) go to ``chosen``."""
        for e in read_entries(journal_file, unit, since=chosen.first_t, journalctl=journalctl):
            if e.is_engine(unit) and (e.invocation or NO_INVOCATION) == chosen.id:
                for line in e.lines():
                    yield e.t, line
            elif e.is_manager(unit) and e.about_invocation == chosen.id:
                is_exit, code = exit_code_of(e)
                if is_exit and chosen.exit_t is None:
                    chosen.exited, chosen.exit_code, chosen.exit_t = True, code, e.t
                trace = oom_trace_of(e)
                if trace is not None and trace not in chosen.oom:
                    chosen.oom.append(trace)

    return chosen, invocations, pairs()
