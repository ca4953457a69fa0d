"""What ``explain`` reads (issue 32): ``explain FILE`` and ``--history FILE`` open regular files only: a FIFO
would block in open(), /dev/zero would grow until MemoryError, a sparse file of gigabytes would take as long.
Each is one line and a documented exit code, quickly; a damaged or hostile anatomy in a history row is one line,
or shown with its controls neutralised. Real FIFOs, devices and sparse files, the real CLI."""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import threading
from pathlib import Path

import pytest

from firstlight.history import DeploymentKey, History, HistoryError
from tests.support.common import run_firstlight

KEY = DeploymentKey.create("vllm", "m", ["vllm", "serve", "m"])
DEADLINE = 60  # a blocked open() would run into it; a refusal takes about a second


def _one_line_error(stderr: str) -> None:
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


def _limit_memory() -> None:  # /dev/zero read whole must not take the machine with it
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_explain_of_a_fifo_is_refused_not_waited_on(tmp_path: Path):
    fifo = tmp_path / "start.jsonl"
    os.mkfifo(fifo)
    r = run_firstlight("explain", str(fifo), timeout=DEADLINE)
    assert r.rc == 64, r.stderr
    assert "is a FIFO, not a regular file" in r.stderr
    _one_line_error(r.stderr)


def test_explain_of_dev_zero_is_refused_before_reading(tmp_path: Path):
    r = run_firstlight("explain", "/dev/zero", timeout=DEADLINE, preexec_fn=_limit_memory)
    assert r.rc == 64, r.stderr
    assert "is a character device, not a regular file" in r.stderr
    _one_line_error(r.stderr)


def test_explain_of_a_file_over_the_cap_is_refused(tmp_path: Path):
    big = tmp_path / "huge.log"
    with open(big, "wb") as f:
        f.truncate((1 << 30) + 1)  # sparse: no disk used
    r = run_firstlight("explain", str(big), timeout=DEADLINE)
    assert r.rc == 64, r.stderr
    assert "explain reads at most 1 GiB" in r.stderr
    _one_line_error(r.stderr)


@pytest.mark.parametrize("args", [("history", "--history"), ("explain", "--last", "--history")])
def test_a_history_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path, args: tuple[str, ...]):
    fifo = tmp_path / "h.sqlite3"
    os.mkfifo(fifo)
    r = run_firstlight(*args, str(fifo), timeout=DEADLINE)
    assert r.rc == (1 if args[0] == "history" else 64), r.stderr
    assert "is a FIFO, not a regular file" in r.stderr
    _one_line_error(r.stderr)


def test_a_writer_refuses_a_history_that_is_a_fifo(tmp_path: Path):
    fifo = tmp_path / "h.sqlite3"
    os.mkfifo(fifo)
    got: list[BaseException] = []

    def open_it() -> None:
        try:
            History(fifo).close()
        except BaseException as e:
            got.append(e)

    t = threading.Thread(target=open_it, daemon=True)
    t.start()
    t.join(DEADLINE)
    if t.is_alive():  # unblock the open for the thread, then fail
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
        pytest.fail("History() blocked on a FIFO")
    assert len(got) == 1 and isinstance(got[0], HistoryError) and "a FIFO" in str(got[0])


ANATOMY = {"total_s": 12.0, "phases": [{"name": "weights_loading", "seconds": 12.0, "bound": "disk",
                                        "evidence": [{"value": "read 1.0 GB"}]}]}


def test_a_summary_after_half_a_gigabyte_without_a_newline_is_read_in_bounded_memory(tmp_path: Path):
    path = tmp_path / "run.jsonl"
    with open(path, "wb") as f:
        f.truncate(512 << 20)  # sparse: 512 MiB of NUL bytes, no line one may hold whole
        f.seek(0, os.SEEK_END)
        f.write(b"\n" + json.dumps({"event": "summary", "verdict": "ready", "anatomy": ANATOMY}).encode() + b"\n")
    r = run_firstlight("explain", str(path), timeout=DEADLINE * 3, preexec_fn=_limit_memory)
    assert r.rc == 0, r.stderr
    assert "weights_loading" in r.stderr and "read 1.0 GB" in r.stderr


def _history_with_anatomy(tmp_path: Path, anatomy: object) -> Path:
    """A history whose one run holds ``anatomy``, written into the row as a hand edit would."""
    path = tmp_path / "h.sqlite3"
    with History(path) as h:
        h.record_run("up", {"verdict": "ready", "cold_start_s": 12.0}, KEY)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE runs SET summary = ? WHERE id = 1",
                    (json.dumps({"verdict": "ready", "anatomy": anatomy}),))
    return path


@pytest.mark.parametrize("anatomy", [
    {**ANATOMY, "total_s": "twelve"},
    {**ANATOMY, "phases": [{"name": "weights_loading"}]},
    {**ANATOMY, "phases": "weights_loading"},
    {**ANATOMY, "cuts": [{"cut": "x", "saving_s": [1], "how": "y"}]},
])
def test_explain_of_a_damaged_history_row_is_one_line_and_exit_1(tmp_path: Path, anatomy: object):
    path = _history_with_anatomy(tmp_path, anatomy)
    r = run_firstlight("explain", "--run", "1", "--history", str(path), timeout=DEADLINE)
    assert r.rc == 1, r.stderr
    assert "the anatomy in it is damaged" in r.stderr
    _one_line_error(r.stderr)


def test_explain_of_a_row_with_escapes_shows_them_neutralised(tmp_path: Path):
    evil = "\x1b]0;owned\x07\x1b[2J\u202etxt.exe\nforged: line"
    anatomy = {**ANATOMY, "phases": [{**ANATOMY["phases"][0], "name": evil, "evidence": [{"value": evil}]}],
               "cuts": [{"cut": evil, "saving_s": None, "how": evil}]}
    path = _history_with_anatomy(tmp_path, anatomy)
    r = run_firstlight("explain", "--run", "1", "--history", str(path), "--json", timeout=DEADLINE)
    assert r.rc == 0, r.stderr
    for raw in (r.stderr, r.stdout):
        assert "\x1b" not in raw and "\x07" not in raw and "\u202e" not in raw, ascii(raw)
    assert not any(line.startswith("forged") for line in r.stderr.splitlines()), r.stderr
    assert "\ufffd" in r.stderr and "txt.exe" in r.stderr
    assert json.loads(r.stdout)["phases"][0]["name"] == evil  # the data, escaped by JSON, intact
