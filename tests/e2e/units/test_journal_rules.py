"""units/journal.py's rules at their edges: how an entry of ``journalctl -o json`` is read, how systemd's message
about a main process's end reads as an exit code, which invocation is picked, and what journalctl is asked.
Entries are the JSON text journalctl writes; the invocations come from real journal files (systemd-journal-remote
writes them, journalctl reads them back) where the rule is about one.

The process-starting tests of this subject; the others: ``tests/unit/units/journal/test_rules.py``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from firstlight.units.journal.entries import MSG_PROCESS_EXIT, MSG_UNIT_OUT_OF_MEMORY, JournalError
from firstlight.units.journal.follow import JournalFollower
from firstlight.units.journal.invocations import journal_lines, list_invocations
from firstlight.units.journal.journalctl import MAX_ENTRY_BYTES, bounded_lines, read_entries
from tests.support.common import wait_for
from tests.support.journal_export import MSG_FAILURE_RESULT, UnitRun, write_journal
from tests.support.journal_rules import T0, UNIT, _follow


# -- lines of a pipe, bounded ---------------------------------------------------------------------------------------
def _pipe(data: bytes) -> io.BufferedReader:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a writer that may block on a full pipe
        os.close(r)
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
        os._exit(0)
    os.close(w)
    f = os.fdopen(r, "rb")
    f.pid = pid  # type: ignore[attr-defined]
    return f


def _read_all(data: bytes) -> tuple[list[bytes], list[int]]:
    longs: list[int] = []
    f = _pipe(data)
    try:
        lines = list(bounded_lines(f, longs.append))
    finally:
        f.close()
        os.waitpid(f.pid, 0)  # type: ignore[attr-defined]
    return lines, longs


def test_lines_of_a_pipe_up_to_the_bound_are_kept_a_longer_one_is_skipped_and_counted():
    exact = b"a" * MAX_ENTRY_BYTES
    lines, longs = _read_all(b"one\n" + exact + b"\ntwo\n" + b"b" * (3 * MAX_ENTRY_BYTES) + b"\nthree\nlast")
    assert [len(x) for x in lines] == [3, MAX_ENTRY_BYTES, 3, 5]
    assert lines[0] == b"one" and lines[2] == b"two" and lines[3] == b"three"  # the unterminated tail is dropped
    assert longs == [3 * MAX_ENTRY_BYTES]


def test_a_pipe_of_short_lines_is_read_whole():
    lines, longs = _read_all(b"".join(b"%d\n" % i for i in range(50_000)))
    assert lines == [b"%d" % i for i in range(50_000)] and longs == []


def _killed_then_restarted(tmp_path: Path) -> tuple[Path, UnitRun, UnitRun]:
    first = UnitRun(UNIT, T0, pid=100)
    first.started()
    first.lines(["loading", "allocating"])
    first.manager(f"{UNIT}: A process of this unit has been killed by the OOM killer.", MSG_UNIT_OUT_OF_MEMORY)
    first.manager(f"{UNIT}: Main process exited, code=killed, status=9/KILL", MSG_PROCESS_EXIT,
                  EXIT_CODE="killed", EXIT_STATUS=9)
    first.manager(f"{UNIT}: Main process exited, code=exited, status=0/SUCCESS", MSG_PROCESS_EXIT,
                  EXIT_CODE="exited", EXIT_STATUS=0)  # a second word on it: the first one stands
    first.manager(f"{UNIT}: Failed with result 'oom-kill'.", MSG_FAILURE_RESULT, UNIT_RESULT="oom-kill")
    first.manager(f"{UNIT}: A process of this unit has been killed by the OOM killer.", MSG_UNIT_OUT_OF_MEMORY)
    second = UnitRun(UNIT, T0 + 10, pid=200)
    second.started()
    second.line("loading")
    path = tmp_path / "oom.journal"
    write_journal(path, bytes(first.out + second.out))
    return path, first, second


def test_a_killed_invocation_reads_as_its_signal_with_systemds_oom_words(tmp_path: Path):
    path, first, second = _killed_then_restarted(tmp_path)
    invs = list_invocations(read_entries(path, UNIT), UNIT)
    assert [(i.id, i.lines, i.exited) for i in invs] == [(first.invocation, 2, True), (second.invocation, 1, False)]
    assert invs[0].exit_code == 0  # the listing keeps the last word; the lines' pass keeps the first
    assert invs[0].first_t == pytest.approx(T0) and invs[0].last_t == pytest.approx(T0 + 0.06)
    chosen, _, pairs = journal_lines(path, UNIT, first.invocation)
    assert [text for _, text in pairs] == ["loading", "allocating"]
    assert chosen.exited and chosen.exit_code == -9 and chosen.exit_t == pytest.approx(T0 + 0.04)
    assert chosen.oom == [f"systemd: {UNIT}: A process of this unit has been killed by the OOM killer.",
                          f"systemd: {UNIT}: Failed with result 'oom-kill'. (Result=oom-kill)"]
    end = chosen.ending()
    assert end is not None and end.exit_code == -9 and len(end.oom) == 2


def test_the_lines_pass_reads_only_the_chosen_invocations_lines(tmp_path: Path):
    path, _first, second = _killed_then_restarted(tmp_path)
    chosen, _, pairs = journal_lines(path, UNIT)
    assert chosen.id == second.invocation
    got = list(pairs)
    assert got == [(pytest.approx(T0 + 10.01), "loading")]
    assert not chosen.exited and chosen.oom == []


# -- journalctl as a process: its error, its arguments, its end ---------------------------------------------------
def fake_journalctl(tmp_path: Path, body: str) -> str:
    """An executable standing in for journalctl (a real process, with the real one's interface)."""
    exe = tmp_path / "journalctl"
    exe.write_text(f"#!{sys.executable}\nimport os, sys, time\n{body}\n")
    exe.chmod(0o755)
    return str(exe)


def test_journalctls_last_line_of_stderr_is_the_error(tmp_path: Path):
    bad = tmp_path / "bad.journal"
    bad.write_bytes(b"LPKSHHRH" + b"\0" * 64)
    with pytest.raises(JournalError) as e:
        list(read_entries(bad, UNIT))
    assert str(e.value) == "journalctl could not read the journal: Failed to open files: No data available"


def test_journalctls_error_is_read_whole_up_to_its_last_4_kib_and_never_fails_to_decode(tmp_path: Path):
    exe = fake_journalctl(tmp_path, "sys.stderr.buffer.write(b'x' * 5000 + b'\\nfirst\\n  bad \\xff byte  \\n\\n')\n"
                                    "sys.exit(1)")
    with pytest.raises(JournalError) as e:
        list(read_entries(None, UNIT, journalctl=exe))
    assert str(e.value) == "journalctl could not read the journal:   bad \ufffd byte"  # its last line


def test_a_silent_journalctl_failure_says_its_exit_status(tmp_path: Path):
    exe = fake_journalctl(tmp_path, "sys.exit(3)")
    with pytest.raises(JournalError) as e:
        list(read_entries(None, UNIT, journalctl=exe))
    assert str(e.value) == "journalctl could not read the journal: exit 3"


def test_a_journalctl_still_writing_when_the_reader_stops_is_ended(tmp_path: Path):
    """The reader takes one entry and stops: journalctl (here one that would write for two minutes) is ended."""
    line = json.dumps({"__REALTIME_TIMESTAMP": "1790000000000000", "MESSAGE": "m", "_SYSTEMD_UNIT": UNIT})
    exe = fake_journalctl(tmp_path, f"open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\n"
                                    f"print({line!r}, flush=True)\ntime.sleep(120)")
    entries = read_entries(None, UNIT, journalctl=exe)
    assert next(entries).message == "m"
    entries.close()
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: it is gone, not left behind


def test_journalctl_is_asked_for_the_time_and_fields_the_caller_wants(tmp_path: Path):
    path, _, second = _killed_then_restarted(tmp_path)
    assert {e.invocation or e.about_invocation for e in read_entries(path, UNIT, since=T0 + 10)} == {
        second.invocation}
    entries = list(read_entries(path, UNIT, output_fields=("_SYSTEMD_UNIT", "_SYSTEMD_INVOCATION_ID")))
    assert entries and all(e.message is None for e in entries)  # MESSAGE not asked for


def test_both_passes_over_the_journal_run_the_journalctl_given(tmp_path: Path):
    path, _, second = _killed_then_restarted(tmp_path)
    log = tmp_path / "calls"
    exe = fake_journalctl(tmp_path, f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                                    f"os.execv({shutil.which('journalctl')!r}, ['journalctl', *sys.argv[1:]])")
    chosen, _, pairs = journal_lines(path, UNIT, journalctl=exe)
    assert [text for _, text in pairs] == ["loading"] and chosen.id == second.invocation
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "--output-fields" in calls[0] and "--since" in calls[1]


def test_no_entry_of_the_unit_in_a_journal_names_the_unit(tmp_path: Path):
    path, _, _ = _killed_then_restarted(tmp_path)
    with pytest.raises(JournalError) as e:
        journal_lines(path, "nothing.service")
    assert str(e.value) == "no entries of nothing.service in the journal"


def test_systemds_words_on_another_invocation_are_not_this_ones(tmp_path: Path):
    first = UnitRun(UNIT, T0, pid=100)
    first.line("loading")
    second = UnitRun(UNIT, T0 + 10, pid=200)
    second.line("loading again")
    second.manager(f"{UNIT}: A process of this unit has been killed by the OOM killer (second).",
                   MSG_UNIT_OUT_OF_MEMORY)
    path = tmp_path / "two.journal"
    write_journal(path, bytes(first.out + second.out))
    chosen, _, pairs = journal_lines(path, UNIT, first.invocation)
    assert [text for _, text in pairs] == ["loading"]
    assert chosen.oom == [] and not chosen.exited


def test_waiting_for_the_next_invocation_sees_one_that_begins_while_waiting(tmp_path: Path):
    first = UnitRun(UNIT, T0, pid=100)
    first.line("loading")
    path = tmp_path / "grows.journal"
    write_journal(path, bytes(first.out))
    follower = JournalFollower(UNIT, path)
    follower.start()
    try:
        assert follower.wait_invocation(None, 30) == first.invocation
        assert follower.wait_invocation(first.invocation, 0.5) is None  # none yet: the wait ends at its bound
        got: list[str | None] = []
        waiter = threading.Thread(target=lambda: got.append(follower.wait_invocation(first.invocation, 60)))
        waiter.start()
        second = UnitRun(UNIT, T0 + 10, pid=200)
        second.line("restarted")
        write_journal(path, bytes(second.out))
        waiter.join(90)
        assert got == [second.invocation]
    finally:
        follower.stop()


def test_the_follower_starts_at_its_since_and_runs_the_journalctl_given(tmp_path: Path):
    path, _, second = _killed_then_restarted(tmp_path)
    log = tmp_path / "calls"
    exe = fake_journalctl(tmp_path, f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                                    f"os.execv({shutil.which('journalctl')!r}, ['journalctl', *sys.argv[1:]])")
    follower = JournalFollower(UNIT, path, since=T0 + 10, journalctl=exe)
    follower.start()
    try:
        assert follower.wait_invocation(None, 30) == second.invocation
        assert follower.invocations() == [second.invocation]  # the first began before `since`
        wait_for(lambda: len(log.read_text().splitlines()) >= 2, 30, "the follow pass")
    finally:
        follower.stop()
    calls = log.read_text().splitlines()
    assert "--since @1790000010.000000" in calls[0] and "-f" not in calls[0].split()
    assert "-f" in calls[1].split() and "--after-cursor" in calls[1] and "--since" not in calls[1]


def test_entries_over_the_bound_are_noted_once_and_the_rest_still_read(tmp_path: Path):
    line = json.dumps({"__REALTIME_TIMESTAMP": str(int(T0 * 1e6)), "MESSAGE": "after the long ones",
                       "_SYSTEMD_UNIT": UNIT, "_SYSTEMD_INVOCATION_ID": "a" * 32})
    long = 2 * MAX_ENTRY_BYTES
    exe = fake_journalctl(tmp_path, "if '-f' in sys.argv: sys.exit(7)\nout = sys.stdout.buffer\n"
                                    f"out.write(b'x' * {long} + b'\\n')\nout.write(b'y' * {long + 5} + b'\\n')\n"
                                    f"out.write({line!r}.encode() + b'\\n')\nout.flush()")
    follower = _follow(exe)
    assert list(follower.notes) == [f"a journal entry of {long} bytes was skipped (over 16 MiB)"]
    assert follower.invocations() == ["a" * 32]
    assert follower.error == "journalctl stopped: exit 7"  # the follow pass failed, with nothing on stderr


def test_journalctl_runs_in_its_own_session_and_its_last_line_of_stderr_is_the_error(tmp_path: Path):
    seen = tmp_path / "seen"
    exe = fake_journalctl(tmp_path, f"open({str(seen)!r}, 'w').write(str(os.getsid(0) == os.getpid()))\n"
                                    "sys.stderr.write('a first line\\nFailed to iterate: it broke\\n')\nsys.exit(1)")
    follower = _follow(exe)
    assert follower.error == "journalctl stopped: Failed to iterate: it broke"
    assert seen.read_text() == "True"  # its own session: a terminal's Ctrl-C is not sent to it
