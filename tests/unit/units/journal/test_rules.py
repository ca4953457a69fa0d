"""units/journal.py's rules at their edges: how an entry of ``journalctl -o json`` is read, how systemd's message
about a main process's end reads as an exit code, which invocation is picked, and what journalctl is asked.
Entries are the JSON text journalctl writes; the invocations come from real journal files (systemd-journal-remote
writes them, journalctl reads them back) where the rule is about one.

The in-process tests of this subject; the others: ``tests/e2e/units/test_journal_rules.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from firstlight.timeline import LogLine, ProcessSample, SourceNote
from firstlight.units.journal.entries import (
    MSG_PROCESS_EXIT,
    MSG_UNIT_OUT_OF_MEMORY,
    OMITTED,
    JournalEntry,
    JournalError,
    exit_code_of,
    field_text,
    field_values,
    manager_observations,
    message_text,
    oom_trace_of,
    parse_entry,
)
from firstlight.units.journal.follow import JournalFollower, JournalSource
from firstlight.units.journal.invocations import Invocation, list_invocations, pick_invocation
from firstlight.units.journal.journalctl import journalctl_argv, read_entries
from tests.support.common import wait_for
from tests.support.journal_rules import T0, UNIT, _follow, entry


def exit_entry(code: str, status: str, with_id: bool = True) -> JournalEntry:
    msg = f"{UNIT}: Main process exited, code={code}, status={status}"
    extra = {"MESSAGE_ID": MSG_PROCESS_EXIT, "EXIT_CODE": code, "EXIT_STATUS": status} if with_id else {}
    return entry(MESSAGE=msg, UNIT=UNIT, INVOCATION_ID="a" * 32, _SYSTEMD_UNIT="init.scope", **extra)


# -- JSON quirks -------------------------------------------------------------------------------------------------
def test_byte_arrays_are_only_lists_of_byte_values():
    assert field_values([104, 105]) == ["hi"]
    assert field_values([0, 255]) == ["\x00\ufffd"]
    assert field_values([True, 105]) == ["True", "105"]  # a bool is no byte
    assert field_values([104, 256]) == ["104", "256"]  # 256 is no byte
    assert field_values([-1, 104]) == ["-1", "104"]
    assert field_values([]) == []
    assert field_values(["a", [104, 105], None]) == ["a", "hi", None]
    assert field_values(12) == ["12"] and field_values(None) == [None]


def test_a_field_is_its_first_value_and_a_message_its_values_as_lines():
    assert field_text(["x", "y"]) == "x"
    assert message_text(["one", None, [116, 119, 111]]) == "one\ntwo"
    assert message_text([None, None]) is None and message_text(None) is None
    assert message_text("") == ""


@pytest.mark.parametrize("raw", ["", "12a", "-5", "1.5", "\u0661\u0662\u0663", "1" * 21])
def test_an_entry_needs_a_plain_decimal_timestamp_of_at_most_20_digits(raw: str):
    assert parse_entry({"__REALTIME_TIMESTAMP": raw, "MESSAGE": "m"}) is None


def test_a_20_digit_timestamp_is_read_in_microseconds():
    e = parse_entry({"__REALTIME_TIMESTAMP": "9" * 20, "MESSAGE": "m"})
    assert e is not None and e.t == int("9" * 20) / 1e6
    e = parse_entry({"__REALTIME_TIMESTAMP": ["1790000000500000", "1"], "MESSAGE": "m"})
    assert e is not None and e.t == 1_790_000_000.5


def test_an_entry_keeps_its_ids_and_the_fields_it_interprets():
    e = entry(MESSAGE="m", _SYSTEMD_UNIT="init.scope", _SYSTEMD_INVOCATION_ID="\x1b[31mabc", UNIT=UNIT,
              USER_UNIT="u.service", INVOCATION_ID="inv\x1b[0m", __CURSOR="s=1", MESSAGE_ID="id", EXIT_CODE="exited",
              EXIT_STATUS="3", UNIT_RESULT="oom-kill", N_RESTARTS="2", _PID="1", PRIORITY="6", OTHER="x",
              CODE_FILE=None)
    assert (e.unit, e.about_unit, e.cursor) == ("init.scope", UNIT, "s=1")
    assert e.invocation == "abc" and e.about_invocation == "inv"  # escapes in printed ids are neutralised
    assert e.fields == {"MESSAGE_ID": "id", "EXIT_CODE": "exited", "EXIT_STATUS": "3", "UNIT_RESULT": "oom-kill",
                        "N_RESTARTS": "2", "_PID": "1", "PRIORITY": "6"}
    assert entry(MESSAGE="m", USER_UNIT="u.service", USER_INVOCATION_ID="ui").about_unit == "u.service"
    assert entry(MESSAGE="m", USER_INVOCATION_ID="ui").about_invocation == "ui"
    assert entry(MESSAGE="m", COREDUMP_UNIT="c.service").about_unit == "c.service"
    assert entry(MESSAGE="m", EXIT_STATUS=None).fields == {}  # an omitted value is not kept


def test_an_entrys_lines():
    assert entry(MESSAGE="a\nb\n\n").lines() == ["a", "b"]
    assert entry(MESSAGE="\x1b[32mgreen\x1b[0m").lines() == ["green"]
    assert entry(MESSAGE="").lines() == [""]
    assert entry(MESSAGE="\n").lines() == [""]
    assert entry(MESSAGE=None).lines() == [OMITTED]


def test_which_invocation_an_entry_is_for():
    engine = entry(MESSAGE="m", _SYSTEMD_UNIT=UNIT, _SYSTEMD_INVOCATION_ID="i1")
    assert engine.is_engine(UNIT) and not engine.is_manager(UNIT) and engine.invocation_for(UNIT) == "i1"
    old_systemd = entry(MESSAGE="m", _SYSTEMD_UNIT=UNIT)
    assert old_systemd.invocation_for(UNIT) == ""
    manager = entry(MESSAGE="m", _SYSTEMD_UNIT="init.scope", UNIT=UNIT, INVOCATION_ID="i2")
    assert manager.is_manager(UNIT) and not manager.is_engine(UNIT) and manager.invocation_for(UNIT) == "i2"
    self_about = entry(MESSAGE="m", _SYSTEMD_UNIT=UNIT, UNIT=UNIT)  # the unit's own process naming itself
    assert not self_about.is_manager(UNIT)
    assert entry(MESSAGE="m", _SYSTEMD_UNIT="other.service").invocation_for(UNIT) is None
    assert entry(MESSAGE="m", UNIT=UNIT).invocation_for(UNIT) is None  # systemd's, without an id


# -- systemd's word on how the main process ended -----------------------------------------------------------------
EXITS = [
    ("exited", "0/SUCCESS", 0), ("exited", "3", 3), ("killed", "9/KILL", -9), ("killed", "9", -9),
    ("dumped", "11/SEGV", -11), ("killed", "KILL", -9), ("dumped", "SIGSEGV", -11), ("killed", "term", -15),
    ("exited", "FAILURE", None), ("killed", "NOSUCHSIG", None), ("exited", "1" * 21, None),
    ("exited", "1" * 20, int("1" * 20)),
]


@pytest.mark.parametrize("code, status, want", EXITS)
def test_a_main_process_exit_reads_as_a_popen_return_code(code: str, status: str, want: int | None):
    """A signal is minus its number (killed by 9 is not exit code 9); a status that cannot be read is None."""
    assert exit_code_of(exit_entry(code, status)) == (True, want)


@pytest.mark.parametrize("code, status, want", [x for x in EXITS if x[1][0].isdigit()])
def test_the_exit_text_alone_reads_the_same(code: str, status: str, want: int | None):
    """Without MESSAGE_ID (an older systemd, a dump without it), the message's text says the same."""
    assert exit_code_of(exit_entry(code, status, with_id=False)) == (True, want)


def test_the_message_ids_fields_decide_over_the_text():
    e = entry(MESSAGE=f"{UNIT}: Main process exited, code=exited, status=1/FAILURE", MESSAGE_ID=MSG_PROCESS_EXIT,
              EXIT_CODE="killed", EXIT_STATUS=" 9 ")
    assert exit_code_of(e) == (True, -9)


def test_the_message_id_counts_only_for_the_main_process():
    e = entry(MESSAGE=f"{UNIT}: Control process exited, code=exited, status=2", MESSAGE_ID=MSG_PROCESS_EXIT,
              EXIT_CODE="exited", EXIT_STATUS="2")
    assert exit_code_of(e) == (False, None)


def test_a_message_without_an_exit_is_none():
    assert exit_code_of(entry(MESSAGE=f"Started {UNIT}.")) == (False, None)
    assert exit_code_of(entry(MESSAGE=None)) == (False, None)
    assert exit_code_of(entry(MESSAGE="Main process exited, code=exited, status=x")) == (False, None)


def test_an_exit_becomes_a_note_and_a_process_sample():
    obs = manager_observations(exit_entry("killed", "9/KILL"))
    assert [type(o) for o in obs] == [SourceNote, ProcessSample]
    note, gone = obs
    assert isinstance(note, SourceNote) and note.source == "systemd" and note.t == T0
    assert note.message == f"{UNIT}: Main process exited, code=killed, status=9/KILL"
    assert isinstance(gone, ProcessSample) and not gone.alive and gone.exit_code == -9 and gone.t == T0
    assert manager_observations(entry(MESSAGE="  ")) == []
    assert [type(o) for o in manager_observations(entry(MESSAGE=f" Started {UNIT}. "))] == [SourceNote]
    assert manager_observations(entry(MESSAGE=f" Started {UNIT}. "))[0].message == f"Started {UNIT}."  # type: ignore[union-attr]


def test_systemds_word_on_an_oom_kill():
    assert oom_trace_of(entry(MESSAGE=" llm.service: Failed with result 'oom-kill'. ", UNIT_RESULT="oom-kill")) == (
        "systemd: llm.service: Failed with result 'oom-kill'. (Result=oom-kill)")
    assert oom_trace_of(entry(MESSAGE="", UNIT_RESULT="oom-kill")) == "systemd: Failed with result (Result=oom-kill)"
    assert oom_trace_of(entry(MESSAGE="x", MESSAGE_ID=MSG_UNIT_OUT_OF_MEMORY)) == "systemd: x"
    assert oom_trace_of(entry(MESSAGE=None, MESSAGE_ID=MSG_UNIT_OUT_OF_MEMORY)) == (
        "systemd: a process of this unit has been killed by the OOM killer")
    text = "llm.service: A process of this unit has been killed by the OOM killer."
    assert oom_trace_of(entry(MESSAGE=text)) == f"systemd: {text}"
    assert oom_trace_of(entry(MESSAGE="Failed with result 'exit-code'.", UNIT_RESULT="exit-code")) is None


# -- what journalctl is asked -------------------------------------------------------------------------------------
def test_journalctl_is_asked_for_the_unit_as_json_with_every_field_whole(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    assert journalctl_argv(UNIT) == ["journalctl", f"--unit={UNIT}", "-o", "json", "--all", "--no-pager", "-q"]
    monkeypatch.chdir(tmp_path)
    argv = journalctl_argv(UNIT, Path("x.journal"), follow=True, since=T0 + 0.25, output_fields=["A", "B"],
                           journalctl="/usr/bin/journalctl")
    assert argv == ["/usr/bin/journalctl", "--file", str(tmp_path / "x.journal"), f"--unit={UNIT}", "-o", "json",
                    "--all", "--no-pager", "-q", "-f", "--no-tail", "--since", "@1790000000.250000",
                    "--output-fields", "A,B"]


def test_a_cursor_wins_over_since():
    argv = journalctl_argv(UNIT, since=T0, after_cursor="s=abc")
    assert argv[-2:] == ["--after-cursor", "s=abc"] and "--since" not in argv
    assert journalctl_argv(UNIT, since=T0, after_cursor="")[-2:] == ["--since", "@1790000000.000000"]


# -- invocations ------------------------------------------------------------------------------------------------------
def inv(id_: str, lines: int = 1) -> Invocation:
    return Invocation(id_, T0, T0, lines=lines)


def test_an_invocation_is_picked_by_its_id_or_a_prefix_of_8_or_more():
    invs = [inv("0123456789abcdef0123456789abcdef"), inv("0123456799abcdef0123456789abcdef"), inv("fedcba98")]
    assert pick_invocation(invs, "01234567-89AB-CDEF-0123-456789abcdef", UNIT) is invs[0]
    assert pick_invocation(invs, " 012345678 ", UNIT) is invs[0]
    assert pick_invocation(invs, "fedcba98", UNIT) is invs[2]
    with pytest.raises(JournalError) as e:
        pick_invocation(invs, "01234567", UNIT)
    assert str(e.value) == (f"invocation prefix 01234567 is ambiguous for {UNIT} (0123456789abcdef0123456789abcdef, "
                            "0123456799abcdef0123456789abcdef, fedcba98)")
    with pytest.raises(JournalError, match="no invocation fedcba9 of"):
        pick_invocation(invs, "fedcba9", UNIT)  # 7 characters: no prefix


def test_an_unknown_invocation_lists_the_last_five():
    invs = [inv(f"{i:032x}") for i in range(7)] + [inv("")]
    with pytest.raises(JournalError) as e:
        pick_invocation(invs, "ffffffffff", UNIT)
    known = ", ".join([f"{i:032x}" for i in range(3, 7)] + ["(none)"])
    assert str(e.value) == f"no invocation ffffffffff of {UNIT} in the journal (last ones: {known})"


def test_without_lines_anywhere_the_last_invocation_is_picked():
    invs = [inv("a" * 32, 0), inv("b" * 32, 0)]
    assert pick_invocation(invs, None, UNIT) is invs[1]
    invs = [inv("a" * 32, 2), inv("b" * 32, 0), inv("c" * 32, 1), inv("d" * 32, 0)]
    assert pick_invocation(invs, None, UNIT) is invs[2]


def test_an_invocation_describes_itself():
    i = Invocation("ab\x1b[31mcd", T0, T0 + 5, lines=3)
    assert i.describe() == "invocation abcd: 3 lines from 2026-09-21 14:13:20 UTC"
    assert i.ending() is None
    i.exited, i.exit_code = True, -9
    assert i.ending() is None  # not yet read with the lines
    i.exit_t, i.oom = T0 + 5, ["systemd: oom"]
    assert i.describe() == ("invocation abcd: 3 lines from 2026-09-21 14:13:20 UTC, main process died of SIGKILL "
                            "(signal 9)")
    end = i.ending()
    assert end == ProcessSample(T0 + 5, alive=False, exit_code=-9, oom=("systemd: oom",))
    assert Invocation("", T0, T0).describe().startswith("invocation (no invocation id): 0 lines")


def test_a_json_dump_keeps_only_the_units_entries_since_the_time_asked(tmp_path: Path):
    dump = tmp_path / "dump.json"
    rows = [{"__REALTIME_TIMESTAMP": str(int((T0 + i) * 1e6)), "MESSAGE": f"m{i}", "_SYSTEMD_UNIT": unit,
             "_SYSTEMD_INVOCATION_ID": "i" * 32} for i, unit in enumerate([UNIT, "other.service", UNIT, UNIT])]
    dump.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    assert [e.message for e in read_entries(dump, UNIT)] == ["m0", "m2", "m3"]
    assert [e.message for e in read_entries(dump, UNIT, since=T0 + 2)] == ["m2", "m3"]


def test_no_entry_of_the_unit_is_an_error(tmp_path: Path):
    with pytest.raises(JournalError) as e:
        pick_invocation([], None, UNIT)
    assert str(e.value) == f"no entries of {UNIT} in the journal"


# -- invocations from entries ---------------------------------------------------------------------------------
def engine_line(inv_id: str, t: float, text: str = "line") -> JournalEntry:
    return entry(__REALTIME_TIMESTAMP=str(int(t * 1e6)), MESSAGE=text, _SYSTEMD_UNIT=UNIT,
                 _SYSTEMD_INVOCATION_ID=inv_id)


def manager_exit(t: float, inv_id: str | None = None, unit: str = UNIT) -> JournalEntry:
    fields = {"__REALTIME_TIMESTAMP": str(int(t * 1e6)), "_SYSTEMD_UNIT": "init.scope", "UNIT": unit,
              "MESSAGE": f"{unit}: Main process exited, code=exited, status=4/NOPERMISSION"}
    if inv_id is not None:
        fields["INVOCATION_ID"] = inv_id
    return entry(**fields)


def test_systemds_messages_without_an_id_count_for_the_latest_invocation():
    invs = list_invocations([
        manager_exit(T0 - 1),  # before any invocation: nobody's
        engine_line("a" * 32, T0),
        engine_line("b" * 32, T0 + 1),
        manager_exit(T0 + 2),  # no id: the latest, b
        engine_line("a" * 32, T0 + 3),  # a late line of a: a is not the latest for that
    ], UNIT)
    assert [(i.id, i.lines, i.exited, i.exit_code) for i in invs] == [("a" * 32, 2, False, None),
                                                                      ("b" * 32, 1, True, 4)]
    assert invs[1].last_t == T0 + 2 and invs[0].last_t == T0 + 3


def test_entries_of_other_units_are_no_invocations_part():
    invs = list_invocations([engine_line("a" * 32, T0), manager_exit(T0 + 1, unit="other.service"),
                             entry(MESSAGE="x", _SYSTEMD_UNIT="other.service", _SYSTEMD_INVOCATION_ID="c" * 32),
                             engine_line("b" * 32, T0 + 2)], UNIT)
    assert [(i.id, i.exited, i.last_t) for i in invs] == [("a" * 32, False, T0), ("b" * 32, False, T0 + 2)]


def test_the_last_invocation_with_lines_is_picked_among_many():
    invs = [inv("a" * 32, 1), inv("b" * 32, 1), inv("c" * 32, 1), inv("d" * 32, 0)]
    assert pick_invocation(invs, None, UNIT) is invs[2]


# -- the follower's bookkeeping -------------------------------------------------------------------------------
def test_an_unknown_invocation_has_no_first_time_and_unsubscribing_is_harmless():
    follower = JournalFollower(UNIT)
    assert follower.first_time("z" * 32) is None
    got: list[JournalEntry] = []
    follower.unsubscribe("z" * 32, got.append)  # never subscribed: nothing to do
    follower.subscribe("a" * 32, got.append)
    follower.unsubscribe("a" * 32, lambda e: None)  # another callback: this one stays
    follower._dispatch(engine_line("a" * 32, T0, "one"))
    follower.unsubscribe("a" * 32, got.append)
    follower._dispatch(engine_line("a" * 32, T0 + 1, "two"))
    assert [e.message for e in got] == ["one"]
    assert follower.first_time("a" * 32) is not None


def test_a_stopped_source_no_longer_listens():
    follower = JournalFollower(UNIT)
    src = JournalSource(follower, "a" * 32)
    src._sink = lambda o: None
    follower.subscribe("a" * 32, src._on_entry)
    src.stop()
    assert follower._invocations["a" * 32].subscribers == []


def test_an_unstarted_follower_has_no_invocation_to_wait_for():
    follower = JournalFollower(UNIT)
    assert follower.wait_invocation(None, 0.2) is None  # its reader never ran: no waiting for ever
    assert not follower.wait_caught_up(0.01)


def test_the_invocation_after_the_one_asked_is_the_next_not_the_latest():
    follower = JournalFollower(UNIT)
    follower.caught_up.set()
    for i, inv_id in enumerate(["a" * 32, "b" * 32, "c" * 32]):
        follower._dispatch(engine_line(inv_id, T0 + i))
    assert follower.wait_invocation("a" * 32, 5) == "b" * 32
    assert follower.wait_invocation(None, 5) == "c" * 32
    assert follower.invocations() == ["a" * 32, "b" * 32, "c" * 32]


def manager_note(t: float, inv_id: str | None, text: str = "Stopping.") -> JournalEntry:
    fields = {"__REALTIME_TIMESTAMP": str(int(t * 1e6)), "_SYSTEMD_UNIT": "init.scope", "UNIT": UNIT,
              "MESSAGE": f"{UNIT}: {text}"}
    if inv_id is not None:
        fields["INVOCATION_ID"] = inv_id
    return entry(**fields)


def test_the_follower_gives_systemds_messages_without_an_id_to_the_latest_invocation():
    follower = JournalFollower(UNIT)
    got: dict[str, list[str | None]] = {}
    follower._dispatch(manager_note(T0, None, "before any"))  # nobody's yet: dropped
    for i, inv_id in enumerate(["a" * 32, "b" * 32, "c" * 32]):
        got[inv_id] = []
        follower.subscribe(inv_id, lambda e, k=inv_id: got[k].append(e.message))
        follower._dispatch(engine_line(inv_id, T0 + i, f"line {i}"))
    follower._dispatch(manager_note(T0 + 5, None, "no id"))
    follower._dispatch(entry(MESSAGE="another unit's", _SYSTEMD_UNIT="other.service"))
    follower._dispatch(entry(MESSAGE="another unit's, no id", UNIT="other.service", _SYSTEMD_UNIT="init.scope"))
    assert got == {"a" * 32: ["line 0"], "b" * 32: ["line 1"], "c" * 32: ["line 2", f"{UNIT}: no id"]}
    assert follower.invocations() == ["a" * 32, "b" * 32, "c" * 32]


def test_the_follower_reads_the_exit_code_systemd_logged_for_an_invocation():
    follower = JournalFollower(UNIT)
    follower._dispatch(engine_line("a" * 32, T0))
    assert follower.exit_code("a" * 32) is None  # not seen yet
    follower._dispatch(manager_note(T0 + 1, "a" * 32, "Stopping."))
    assert follower.exit_code("a" * 32) is None  # a message, no exit
    follower._dispatch(manager_note(T0 + 2, "a" * 32, "Main process exited, code=killed, status=9/KILL"))
    follower._dispatch(manager_note(T0 + 3, "a" * 32, "Failed with result 'signal'."))
    assert follower.exit_code("a" * 32) == -9
    assert follower.exit_code("z" * 32) is None
    # the unit's own process writing the words is no exit of the manager's
    follower._dispatch(engine_line("b" * 32, T0 + 4, "Main process exited, code=exited, status=3/NOTIMPLEMENTED"))
    assert follower.exit_code("b" * 32) is None


def test_quiet_for_returns_once_nothing_arrived_for_that_long():
    import time

    follower = JournalFollower(UNIT)
    follower.caught_up.set()
    follower.quiet_for(0.2, 30)  # nothing ever arrived
    follower._dispatch(engine_line("a" * 32, T0))
    follower.quiet_for(0.2, 30)
    assert time.monotonic() - follower._last_arrival >= 0.2
    src = JournalSource(follower, "a" * 32)
    src.sync(30)
    assert time.monotonic() - follower._last_arrival >= 0.25


# -- one attempt's view of the journal (JournalSource), entry by entry through the follower ----------------------
def _source(echo: Any = None) -> tuple[JournalFollower, JournalSource, list[Any]]:
    """A source of invocation a…a started on a follower whose journalctl never ran (entries are handed to it as
    the follower's reader hands them); what it sends, in order."""
    follower = JournalFollower(UNIT)
    seen: list[Any] = []
    src = JournalSource(follower, "a" * 32, echo=echo)
    src.start(seen.append)
    assert src._watcher is not None and src._watcher.name == "firstlight-journal-next" and src._watcher.daemon
    return follower, src, seen


def test_a_message_journalctl_left_out_is_said_once_and_still_counted_as_a_line():
    follower, src, seen = _source()
    follower._dispatch(engine_line("a" * 32, T0, "before"))
    follower._dispatch(entry(MESSAGE=None, _SYSTEMD_UNIT=UNIT, _SYSTEMD_INVOCATION_ID="a" * 32,
                             __REALTIME_TIMESTAMP=str(int((T0 + 1) * 1e6))))
    follower._dispatch(entry(MESSAGE=None, _SYSTEMD_UNIT=UNIT, _SYSTEMD_INVOCATION_ID="a" * 32,
                             __REALTIME_TIMESTAMP=str(int((T0 + 2) * 1e6))))
    src.stop()
    assert seen == [
        LogLine(T0, "before", "journal", 1),
        SourceNote(T0 + 1, "journal", "journalctl left out a message over 4 KiB (null in its JSON); its line is "
                                      "counted, its text is lost"),
        LogLine(T0 + 1, OMITTED, "journal", 2),
        LogLine(T0 + 2, OMITTED, "journal", 3),
    ]


def test_a_line_redrawn_with_carriage_returns_is_its_redraws_then_its_final_text_echoed():
    echoed: list[tuple[str, str]] = []
    follower, src, seen = _source(echo=lambda source, text: echoed.append((source, text)))
    follower._dispatch(engine_line("a" * 32, T0, "Loading 10%\rLoading 50%\rLoading 100%"))
    follower._dispatch(engine_line("a" * 32, T0 + 1, "plain"))
    src.stop()
    assert seen == [LogLine(T0, "Loading 10%", "journal", 1, final=False),
                    LogLine(T0, "Loading 50%", "journal", 1, final=False),
                    LogLine(T0, "Loading 100%", "journal", 1),
                    LogLine(T0 + 1, "plain", "journal", 2)]
    assert echoed == [("journal", "Loading 100%"), ("journal", "plain")]


def test_systemds_exit_is_sent_once_with_every_oom_kill_message_before_it():
    follower, src, seen = _source()
    follower._dispatch(engine_line("a" * 32, T0, "loading"))
    oom = entry(__REALTIME_TIMESTAMP=str(int((T0 + 1) * 1e6)), MESSAGE=f"{UNIT}: A process of this unit has been "
                "killed by the OOM killer.", MESSAGE_ID=MSG_UNIT_OUT_OF_MEMORY, UNIT=UNIT, INVOCATION_ID="a" * 32,
                _SYSTEMD_UNIT="init.scope")
    follower._dispatch(oom)
    follower._dispatch(oom)  # said twice (journald can repeat it): kept once
    follower._dispatch(manager_note(T0 + 2, "a" * 32, "Main process exited, code=killed, status=9/KILL"))
    follower._dispatch(manager_note(T0 + 3, "a" * 32, "Main process exited, code=killed, status=9/KILL"))
    src.stop()
    exits = [o for o in seen if isinstance(o, ProcessSample)]
    trace = oom_trace_of(oom)
    assert trace is not None
    assert len(exits) == 1 and exits[0].exit_code == -9 and exits[0].oom == (trace,)


def test_nothing_is_sent_once_the_source_is_stopped():
    follower, src, seen = _source()
    follower._dispatch(engine_line("a" * 32, T0, "one"))
    src.stop()
    src._on_entry(engine_line("a" * 32, T0 + 1, "late"))  # an entry already being handed out as it stopped
    assert [o.text for o in seen if isinstance(o, LogLine)] == ["one"]


def test_the_followers_notes_and_error_are_told_to_the_watch_once_each_at_its_clock():
    follower = JournalFollower(UNIT, clock=lambda: 42.0)
    follower._note("journalctl skipped a line of 2 MB")
    follower.error = "journalctl: cannot read the journal"
    seen: list[Any] = []
    src = JournalSource(follower, "a" * 32)
    src.start(seen.append)
    assert src._watcher is not None
    src._watcher.join(30)  # the follower is not running: told, then done
    assert not src._watcher.is_alive()
    assert seen == [SourceNote(42.0, "journal", "journalctl skipped a line of 2 MB"),
                    SourceNote(42.0, "journal", "journalctl: cannot read the journal")]


def test_a_json_dump_cannot_be_followed(tmp_path: Path):
    dump = tmp_path / "u.json"
    dump.write_text("{}\n")
    follower = _follow(shutil.which("journalctl") or "journalctl", dump)
    assert follower.error == f"{dump} is not a journal file (a journalctl -o json dump can be replayed, not followed)"


def test_the_follower_keeps_its_last_16_notes():
    follower = JournalFollower(UNIT)
    for i in range(20):
        follower._note(f"note {i}")
    assert list(follower.notes) == [f"note {i}" for i in range(4, 20)]
    assert follower.error is None


def test_what_escapes_the_journal_reader_is_a_failed_note_for_the_watch_and_it_reads_on(monkeypatch: Any):
    """The journal's reader runs under the guard of every thread: an exception nobody foresaw is a note marked
    failed, handed to the watch, and the reader starts again (from the entry after the last it handed out)."""
    from firstlight.units.journal import follow

    monkeypatch.setattr(follow, "find_journalctl", lambda exe: exe)
    monkeypatch.setattr(follow, "AGAIN_S", 0.01)
    follower = JournalFollower(UNIT, clock=lambda: 42.0)
    passes: list[bool] = []

    def one_bad_pass(journalctl: str, follow: bool) -> bool:
        passes.append(follow)
        if len(passes) == 1:
            raise IndexError("an entry nobody foresaw")
        return False  # caught up, and nothing to follow: the reader ends

    monkeypatch.setattr(follower, "_pass", one_bad_pass)
    seen: list[Any] = []
    src = JournalSource(follower, "a" * 32)
    follower.start()
    src.start(seen.append)
    wait_for(lambda: not follower.running, 30, "the reader to end after starting again")
    assert src._watcher is not None
    src._watcher.join(30)
    assert passes == [False, False] and follower.error is None
    assert seen == [SourceNote(42.0, "journal", "journal reader failed: IndexError: an entry nobody foresaw; "
                                                "started again in 0.01s", failed=True)]
