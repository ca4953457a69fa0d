"""Log sources under hostile conditions (issue 15): an append-mode log holding a previous run's failure, a FIFO,
a flood of 50 MB/s from a real process. Real files, a real FIFO, a real pipe.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_logs.py``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from firstlight.samplers.logs import FileFollower
from firstlight.timeline import Observation, SourceNote
from tests.support.common import wait_for
from tests.support.hostile_logs import _texts

OLD_RUN = (b"[2020-01-01 10:00:00] Load weight begin.\n"
           b"[2020-01-01 10:00:05] torch.OutOfMemoryError: CUDA out of memory\n")


def test_an_existing_log_is_followed_from_its_end(tmp_path: Path):
    log = tmp_path / "server.log"
    log.write_bytes(OLD_RUN)
    got: list[Observation] = []
    f = FileFollower(log, interval=0.02)
    f.start(got.append)
    try:
        f.sync(5)
        with open(log, "ab") as out:  # the restarted server appends
            out.write(b"[2020-01-01 11:00:00] Load weight begin.\n")
        wait_for(lambda: _texts(got), 5, "the appended line")
        f.sync(5)
    finally:
        f.stop()
    assert _texts(got) == ["[2020-01-01 11:00:00] Load weight begin."]
    assert any("--log-from-start" in o.message for o in got if isinstance(o, SourceNote))


def test_log_from_start_reads_an_existing_log_whole(tmp_path: Path):
    log = tmp_path / "server.log"
    log.write_bytes(OLD_RUN)
    got: list[Observation] = []
    f = FileFollower(log, interval=0.02, from_start=True)
    f.start(got.append)
    try:
        wait_for(lambda: len(_texts(got)) == 2, 5, "both old lines")
    finally:
        f.stop()


def test_with_the_process_start_time_the_runs_own_earlier_lines_are_read(tmp_path: Path):
    """An append-mode log: the previous run's lines are skipped, this run's lines written before firstlight
    attached are read, by the log's own timestamps."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now))
    log = tmp_path / "server.log"
    log.write_bytes(OLD_RUN + f"[{stamp}] Load weight begin.\n".encode())
    got: list[Observation] = []
    f = FileFollower(log, interval=0.02, since=now - 1)
    f.start(got.append)
    try:
        f.sync(5)
    finally:
        f.stop()
    assert _texts(got) == [f"[{stamp}] Load weight begin."]


def test_a_pipe_reader_that_raises_says_so_and_reads_on():
    """The pipe's delivery runs under the guard: an escape (here the echo's, on the first line) is a failed note,
    never a thread that dies silently (the server's pipe would then fill and stop it), and the lines after it come."""
    import os

    from firstlight.samplers.logs import PipeReader

    r, w = os.pipe()
    echoed: list[str] = []

    def echo(stream: str, text: str) -> None:
        echoed.append(text)
        if len(echoed) == 1:
            raise RuntimeError("a terminal that broke")

    got: list[Observation] = []
    with os.fdopen(r, "rb", buffering=0) as pipe:
        reader = PipeReader(pipe, "stdout", echo)
        reader.start(got.append)
        os.write(w, b"first\n")
        wait_for(lambda: any(isinstance(o, SourceNote) and o.failed for o in got), 5, "the failed note")
        os.write(w, b"second\n")
        os.close(w)
        reader.sync(5)
    (note,) = [o for o in got if isinstance(o, SourceNote)]
    assert note.source == "log" and note.message.startswith("stdout reader failed: RuntimeError: a terminal that "
                                                            "broke; started again in ")
    assert "second" in _texts(got) and echoed[-1] == "second" and not reader.thread.is_alive()


def test_a_last_line_without_its_newline_is_delivered_once_the_writer_ended(tmp_path: Path):
    """A server that dies mid-line ("Segmentation fault" and no newline) or mid-record (a CRI partial record):
    held while it may go on, delivered once the writer is known to be gone (``watch --log``'s settle)."""
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    got: list[Observation] = []
    f = FileFollower(log, interval=0.02)
    f.start(got.append)
    try:
        f.sync(5)
        with open(log, "ab") as out:
            out.write(b"INFO loading\n2024-05-07T02:13:52.123456789Z stderr P Segmentation fa")
        wait_for(lambda: _texts(got) == ["INFO loading"], 5, "the whole line")
        f.sync(5)
        assert _texts(got) == ["INFO loading"]  # the writer may still finish its record
        f.writer_ended()
        f.sync(5)
    finally:
        f.stop()
    assert _texts(got) == ["INFO loading", "Segmentation fa"]


def test_a_fifos_last_line_without_its_newline_is_delivered_once_the_writer_ended(tmp_path: Path):
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    got: list[Observation] = []
    f = FileFollower(fifo, interval=0.02)
    f.start(got.append)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer that stays (no end of file)
    try:
        os.write(fd, b"INFO loading\nSegmentation fault")
        wait_for(lambda: _texts(got) == ["INFO loading"], 5, "the whole line")
        f.writer_ended()
        wait_for(lambda: _texts(got) == ["INFO loading", "Segmentation fault"], 5, "the last line")
    finally:
        f.stop()
        os.close(fd)
