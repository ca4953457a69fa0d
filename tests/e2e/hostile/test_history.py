"""The run history under hostile conditions (issue 15, low items): a damaged row, a file that is not a database,
a read-only history, a locked one. Real files, a real SQLite lock, the real CLI.

The process-starting tests of this subject; the others: ``tests/unit/history/test_damaged_store.py``.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from firstlight.history import History
from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, pids_in_group, run_firstlight, sim_cmd, wait_for
from tests.support.hostile_history import _two_runs


def test_a_damaged_row_is_skipped_with_a_warning(tmp_path: Path):
    path = tmp_path / "h.sqlite3"
    _two_runs(path)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE runs SET summary = '{not json', created_at = 'yesterday' WHERE id = 1")
    r = run_firstlight("history", "--history", str(path), "--json")
    assert r.rc == 0, r.stderr
    assert [run["id"] for run in json.loads(r.stdout)["runs"]] == [2]
    assert "row 1" in r.stderr and "skipped" in r.stderr and "Traceback" not in r.stderr


def test_a_file_that_is_not_a_database_is_never_moved(tmp_path: Path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my precious notes\n")
    r = run_firstlight("history", "--history", str(notes))
    assert r.rc == 1 and "not a SQLite database" in r.stderr
    with pytest.raises(Exception, match="not a SQLite database"):
        History(notes)  # a writer refuses it too
    assert notes.read_text() == "my precious notes\n"
    assert list(tmp_path.iterdir()) == [notes]  # nothing moved aside, nothing created


def test_explain_of_a_missing_history_says_there_is_no_such_file_and_creates_none(tmp_path: Path):
    path = tmp_path / "missing.sqlite3"
    r = run_firstlight("explain", "--run", "3", "--history", str(path))
    assert r.rc == 64, r.stderr
    assert "no such file" in r.stderr and "not a SQLite database" not in r.stderr, r.stderr
    assert not path.exists()


@pytest.mark.parametrize("read_version", [1, 2], ids=["legacy", "wal"])
def test_a_listing_never_moves_a_damaged_database(tmp_path: Path, read_version: int):
    # random bytes after the SQLite header (fixed, so every run tests the same file); byte 19 is the header's
    # read version: 2 says WAL, which made even a read-only open leave a -wal and a -shm beside the file
    path = tmp_path / "h.sqlite3"
    body = bytearray(random.Random(206).randbytes(8192))
    body[19 - 16] = read_version
    damaged = b"SQLite format 3\x00" + bytes(body)
    path.write_bytes(damaged)
    r = run_firstlight("history", "--history", str(path))
    assert r.rc == 1 and "damaged" in r.stderr
    assert path.read_bytes() == damaged and list(tmp_path.iterdir()) == [path]


# Inside a private mount namespace: the directory bind-mounted read-only over itself, the directory shown to be
# unwritable (touch fails: exit 99 otherwise), then the CLI. Root ignores permission bits, not a read-only mount.
_READ_ONLY_MOUNT = ('mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && '
                    '! touch "$0/probe" 2>/dev/null || exit 99; exec "$@"')


def test_a_read_only_history_can_be_listed(tmp_path: Path):
    path = tmp_path / "h.sqlite3"
    _two_runs(path)
    cli = firstlight_cmd("history", "--history", str(path), "--json")
    if os.geteuid() == 0:  # CI runs as root: a read-only bind mount
        p = subprocess.run(["unshare", "--mount", "sh", "-c", _READ_ONLY_MOUNT, str(tmp_path), *cli],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert p.returncode != 99, "the bind mount did not make the directory read-only"
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    else:  # a user: permission bits
        path.chmod(stat.S_IRUSR)
        tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            r = run_firstlight("history", "--history", str(path), "--json")
        finally:
            tmp_path.chmod(stat.S_IRWXU)
        rc, stdout, stderr = r.rc, r.stdout, r.stderr
    assert rc == 0, stderr
    assert len(json.loads(stdout)["runs"]) == 2
    assert sorted(q.name for q in tmp_path.iterdir()) == ["h.sqlite3"]  # nothing written beside it


def test_a_locked_history_does_not_hold_up_stopping_the_server(tmp_path: Path, weights: Path):
    """Another process holds the history's write lock for the whole run: the run is not recorded (one
    warning) and the server is stopped without waiting out the 30 s busy timeout."""
    path = tmp_path / "h.sqlite3"
    _two_runs(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        port = free_port()
        fl = subprocess.Popen(firstlight_cmd("up", "--json", "--stop-when-ready", "--history", str(path),
                                             "--poll-min", "0.05", "--", *sim_cmd("normal", port, "--model-path",
                                             str(weights), "--load-seconds", "0.5")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # Well under the 30 s a write would wait for the lock: the lock is still held meanwhile.
            wait_for(lambda: fl.poll() is not None, 25, "firstlight to stop the server and exit")
            out, err = fl.communicate()
        finally:
            if fl.poll() is None:
                fl.kill()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert fl.returncode == 0, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["server_stopped"].startswith("stopped") and not pids_in_group(summary["pid"])
    assert any("locked" in n for n in summary["notes"]), summary["notes"]  # not recorded, and it says why
