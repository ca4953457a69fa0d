"""The journal source against real journal files (built by systemd-journal-remote, read by journalctl):
each JSON quirk journalctl has, invocations, systemd's own messages, and following a file that grows.

The process-starting tests of this subject; the others: ``tests/unit/units/journal/test_journal.py``.
"""

from __future__ import annotations

import json
import queue
import subprocess
from pathlib import Path

import psutil
import pytest

from firstlight.timeline import LogLine, Observation, ProcessSample, SourceNote
from firstlight.units.journal.entries import OMITTED, JournalError, field_values, parse_line
from firstlight.units.journal.follow import JournalFollower, JournalSource
from firstlight.units.journal.invocations import journal_lines, list_invocations, pick_invocation
from firstlight.units.journal.journalctl import read_entries
from tests.support.common import wait_for
from tests.support.journal_export import UnitRun, export_entry, write_journal
from tests.support.units_journal import _collect

UNIT = "llm.service"


T0 = 1_790_000_000.0


def _journalctl_json(path: Path, *extra: str) -> list[str]:
    """What the real journalctl writes, default options (no --all): the text our parser must take."""
    p = subprocess.run(["journalctl", "--file", str(path), "-o", "json", "--no-pager", *extra],
                       capture_output=True, timeout=30, check=True)
    return p.stdout.decode().splitlines()


@pytest.fixture
def quirky(tmp_path: Path) -> Path:
    run = UnitRun(UNIT, T0)
    run.line("plain line")
    run.line("x" * 5000)  # over 4 KiB
    run.line(b"caf\xe9 au lait \xff")  # Latin-1, not UTF-8
    run.line("first\nsecond")  # a multi-line message (binary-safe field: it holds a newline)
    path = tmp_path / "quirks.journal"
    write_journal(path, bytes(run.out))
    # A repeated field, MESSAGE included, in one entry (the export format allows it; journald writes it so
    # for a field logged twice): journalctl gives an array, of byte arrays where a value is not UTF-8.
    write_journal(path, export_entry([
        ("__REALTIME_TIMESTAMP", int((T0 + 1) * 1e6)), ("__MONOTONIC_TIMESTAMP", 9_000_000),
        ("_BOOT_ID", "6e3a5a0f2c4e4d4b9b1d3c2a1f0e9d8c"), ("_SYSTEMD_UNIT", UNIT),
        ("_SYSTEMD_INVOCATION_ID", run.invocation), ("MESSAGE", "repeated one"), ("MESSAGE", b"repeated \xfe two"),
        ("CODE_FILE", "a.c"), ("CODE_FILE", "b.c")]))
    return path


def test_a_field_over_4_kib_comes_as_null_and_is_counted_as_a_line(quirky: Path):
    raw = _journalctl_json(quirky)
    assert json.loads(raw[1])["MESSAGE"] is None  # the real journalctl's quirk, as the parser meets it
    e = parse_line(raw[1])
    assert e is not None and e.message is None
    assert e.lines() == [OMITTED]
    # With --all (which the follower and replay pass) the text is whole.
    full = [e for e in read_entries(quirky, UNIT)][1]
    assert full.message == "x" * 5000


def test_a_non_utf8_value_comes_as_byte_numbers_and_decodes_with_replacement(quirky: Path):
    raw = _journalctl_json(quirky)
    assert isinstance(json.loads(raw[2])["MESSAGE"], list)
    assert all(isinstance(b, int) for b in json.loads(raw[2])["MESSAGE"])
    e = parse_line(raw[2])
    assert e is not None and e.lines() == ["caf\ufffd au lait \ufffd"]


def test_a_multi_line_message_is_several_lines_with_one_time(quirky: Path):
    e = parse_line(_journalctl_json(quirky)[3])
    assert e is not None and e.lines() == ["first", "second"]
    assert e.t == pytest.approx(T0 + 0.03)


def test_a_repeated_field_comes_as_an_array_of_its_values(quirky: Path):
    raw = _journalctl_json(quirky)[4]
    obj = json.loads(raw)
    assert obj["CODE_FILE"] == ["a.c", "b.c"]
    assert isinstance(obj["MESSAGE"], list) and isinstance(obj["MESSAGE"][1], list)  # bytes inside the array
    e = parse_line(raw)
    assert e is not None and e.lines() == ["repeated one", "repeated \ufffd two"]
    assert e.t == pytest.approx(T0 + 1)
    assert field_values(obj["CODE_FILE"]) == ["a.c", "b.c"]


def test_line_times_are_the_journals_realtime_timestamps(quirky: Path):
    times = [e.t for e in read_entries(quirky, UNIT)]
    assert times == pytest.approx([T0, T0 + 0.01, T0 + 0.02, T0 + 0.03, T0 + 1])


def _two_invocations(tmp_path: Path) -> tuple[Path, UnitRun, UnitRun]:
    first = UnitRun(UNIT, T0, pid=100)
    first.started()
    first.lines(["loading", "error: failed to load model"])
    first.main_exited(1, restart=1)
    second = UnitRun(UNIT, T0 + 10, pid=200)
    second.started()
    second.lines(["loading", "server is listening"])
    other = UnitRun("other.service", T0 + 5, pid=300)
    other.line("not ours")
    path = tmp_path / "two.journal"
    write_journal(path, bytes(first.out + other.out + second.out))
    return path, first, second


def test_invocations_in_order_and_the_last_one_is_picked(tmp_path: Path):
    path, first, second = _two_invocations(tmp_path)
    invs = list_invocations(read_entries(path, UNIT), UNIT)
    assert [i.id for i in invs] == [first.invocation, second.invocation]
    assert invs[0].exited and invs[0].exit_code == 1 and invs[0].lines == 2
    assert not invs[1].exited
    chosen, _, pairs = journal_lines(path, UNIT)
    assert chosen.id == second.invocation
    assert [text for _, text in pairs] == ["loading", "server is listening"]
    chosen, _, pairs = journal_lines(path, UNIT, first.invocation[:12])
    assert [text for _, text in pairs] == ["loading", "error: failed to load model"]
    with pytest.raises(JournalError, match="no invocation"):
        pick_invocation(invs, "0" * 32, UNIT)
    with pytest.raises(JournalError, match="no entries"):
        journal_lines(path, "nothing.service")


def test_a_json_dump_reads_like_the_journal(tmp_path: Path):
    path, _, second = _two_invocations(tmp_path)
    dump = tmp_path / "dump.json"
    dump.write_text("\n".join(_journalctl_json(path)) + "\n")
    chosen, invs, pairs = journal_lines(dump, UNIT)
    assert chosen.id == second.invocation and len(invs) == 2
    assert [t for t, _ in pairs] == pytest.approx([T0 + 10.01, T0 + 10.02])


def test_an_unreadable_journal_is_one_clear_error(tmp_path: Path):
    bad = tmp_path / "bad.journal"
    bad.write_bytes(b"LPKSHHRH" + b"\0" * 64)
    with pytest.raises(JournalError, match="journalctl could not read"):
        list(read_entries(bad, UNIT))


def test_follower_sees_a_journal_that_grows_and_stops_journalctl(tmp_path: Path):
    path, _, second = _two_invocations(tmp_path)
    # journalctl processes this one did not start (another test's, in a runner that runs the suite twice in one
    # process, as mutmut does) are not this follower's
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    follower = JournalFollower(UNIT, path)
    follower.start()
    try:
        assert follower.wait_invocation(None, 30) == second.invocation  # the latest when caught up
        q: queue.Queue[Observation] = queue.Queue()
        seen: list[Observation] = []
        src = JournalSource(follower, second.invocation)
        src.start(q.put)
        wait_for(lambda: seen.extend(_collect(q)) or len([o for o in seen if isinstance(o, LogLine)]) >= 2, 30,
                 "the lines already in the journal")
        # A second systemd-journal-remote run appends: the line of the same invocation, then a restart.
        more = UnitRun(UNIT, T0 + 20, invocation=second.invocation, pid=200)
        more.line("main: model loaded")
        third = UnitRun(UNIT, T0 + 30, pid=400)
        third.line("starting again")
        write_journal(path, bytes(more.out + third.out))
        wait_for(lambda: seen.extend(_collect(q)) or any(isinstance(o, ProcessSample) for o in seen), 30,
                 "the next invocation, which ends this one")
        lines = [o for o in seen if isinstance(o, LogLine)]
        assert [o.text for o in lines] == ["loading", "server is listening", "main: model loaded"]
        assert [o.t for o in lines] == pytest.approx([T0 + 10.01, T0 + 10.02, T0 + 20])
        assert [o.lineno for o in lines] == [1, 2, 3]
        exit_ = next(o for o in seen if isinstance(o, ProcessSample))
        assert not exit_.alive and exit_.t == pytest.approx(T0 + 30)
        assert follower.wait_invocation(second.invocation, 5) == third.invocation
        src.stop()
        journalctl = [p for p in psutil.Process().children(recursive=True)
                      if p.name() == "journalctl" and p.pid not in before]
        assert journalctl, "journalctl -f should be running"
    finally:
        follower.stop()
    assert not follower.running
    assert all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in journalctl)


def test_systemds_exit_message_ends_the_attempt_with_its_code(tmp_path: Path):
    path, first, _ = _two_invocations(tmp_path)
    follower = JournalFollower(UNIT, path)
    follower.start()
    try:
        q: queue.Queue[Observation] = queue.Queue()
        JournalSource(follower, first.invocation).start(q.put)
        seen: list[Observation] = []
        wait_for(lambda: seen.extend(_collect(q)) or any(isinstance(o, ProcessSample) for o in seen), 30,
                 "the exit")
        exits = [o for o in seen if isinstance(o, ProcessSample)]
        assert len(exits) == 1 and exits[0].exit_code == 1 and not exits[0].alive
        notes = [o.message for o in seen if isinstance(o, SourceNote) and o.source == "systemd"]
        assert any("Main process exited, code=exited, status=1/FAILURE" in n for n in notes)
        assert [o.text for o in seen if isinstance(o, LogLine)] == ["loading", "error: failed to load model"]
    finally:
        follower.stop()


# -- units/journal.py: the invocation replayed by default is the last one that printed a line -----------------
def test_an_invocation_without_lines_is_not_picked_over_the_last_one_that_has_some(tmp_path: Path):
    from firstlight.units.journal.invocations import journal_lines, list_invocations
    from firstlight.units.journal.journalctl import read_entries
    from tests.support.journal_export import UnitRun, write_journal

    unit, t0 = "llm.service", 1_790_000_000.0
    spoke = UnitRun(unit, t0, pid=100)
    spoke.started()
    spoke.lines(["loading", "error: failed to load model"])
    spoke.main_exited(1, restart=1)
    silent = UnitRun(unit, t0 + 10, pid=200)  # the restart: systemd started it, it printed nothing yet
    silent.started()
    path = tmp_path / "restart.journal"
    write_journal(path, bytes(spoke.out + silent.out))
    invs = list_invocations(read_entries(path, unit), unit)
    assert [(i.id, i.lines) for i in invs] == [(spoke.invocation, 2), (silent.invocation, 0)]
    chosen, _, pairs = journal_lines(path, unit)
    assert chosen.id == spoke.invocation
    assert [text for _, text in pairs] == ["loading", "error: failed to load model"]
