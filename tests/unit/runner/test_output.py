"""stderr that never blocks the run (``firstlight.runner.output``), in process: a bounded buffer that a writer
thread empties into a pipe or an in-memory stream, writes dropped whole and counted while the reader stalls, the
one line that says so, a reader gone, and the file-like surface click and logging use. The stalled reader of a
real run: ``tests/e2e/runner/test_session.py`` and ``tests/e2e/hostile/``."""

from __future__ import annotations

import io
import os
import sys
import threading

import pytest

from firstlight.runner import output
from firstlight.runner.output import BoundedOutput, nonblocking_stderr
from tests.support.common import wait_for

CHECK_S = 60  # far above anything the rule needs: reached only when the defect is back


def test_writes_reach_an_in_memory_stream_in_order_through_the_writer_thread():
    raw = io.StringIO()
    out = BoundedOutput(raw)
    for i in range(5):
        assert out.write(f"line {i}\n") == len(f"line {i}\n")
    assert out.drain(CHECK_S)
    assert raw.getvalue() == "".join(f"line {i}\n" for i in range(5))
    assert out._thread.name == "firstlight-stderr" and out._thread.daemon
    with pytest.raises(io.UnsupportedOperation):
        out.fileno()
    assert out.encoding == "utf-8" and out.writable() and not out.isatty()


def test_writes_reach_a_pipe_as_bytes_in_its_encoding():
    r, w = os.pipe()
    raw = os.fdopen(w, "w", encoding="latin-1")
    out = BoundedOutput(raw)
    assert out.fileno() == w and out.encoding == "latin-1"
    out.write("café ✓\n")  # ✓ has no latin-1 byte: replaced, never an error
    assert out.drain(CHECK_S)
    raw.close()
    assert os.read(r, 100) == "café ?\n".encode("latin-1")
    os.close(r)


def test_only_text_is_written():
    out = BoundedOutput(io.StringIO())
    with pytest.raises(TypeError, match=r"^write\(\) argument must be str, not bytes$"):
        out.write(b"x")  # type: ignore[arg-type]


class Stalled(io.StringIO):
    """A reader that does not read until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def write(self, s: str) -> int:
        assert self.release.wait(CHECK_S)
        return super().write(s)


def test_a_write_over_the_limit_is_dropped_whole_and_counted_then_said_once():
    raw = Stalled()
    out = BoundedOutput(raw, limit=100)
    out.write("first\n")  # taken by the writer, which now waits on the reader
    wait_for(lambda: out._writing, CHECK_S, "the writer to take the first chunk")
    assert out.write("a" * 60 + "\n") == 61  # in the buffer: 61 of 100 bytes
    out.write("b" * 39)  # exactly the limit
    out.write("c\nd\n")  # over it: dropped whole, 2 lines
    out.write("e" * 10)  # one line at least
    assert (out.dropped_writes, out.dropped_lines, out.dropped_bytes) == (2, 3, 14)
    raw.release.set()
    assert out.drain(CHECK_S)
    note = "firstlight: 3 lines (14 bytes) of output were dropped so far: stderr was not being read\n"
    assert raw.getvalue() == "first\n" + note + "a" * 60 + "\n" + "b" * 39
    out.write("later\n")
    assert out.drain(CHECK_S) and raw.getvalue().endswith("b" * 39 + "later\n")  # said once


def test_say_dropped_says_it_at_the_end_without_more_output():
    raw = Stalled()
    out = BoundedOutput(raw, limit=10)
    out.write("x")
    wait_for(lambda: out._writing, CHECK_S, "the writer to take the first chunk")
    out.write("y" * 11)
    raw.release.set()
    assert out.drain(CHECK_S) and "dropped" not in raw.getvalue()
    out.say_dropped()
    assert out.drain(CHECK_S)
    assert raw.getvalue() == "x" + "firstlight: 1 lines (11 bytes) of output were dropped so far: stderr was not " \
                                  "being read\n"
    out.say_dropped()  # nothing new dropped: nothing more said
    assert out.drain(CHECK_S) and raw.getvalue().count("dropped") == 1


def test_a_reader_that_stalls_makes_drain_give_up_at_its_deadline():
    raw = Stalled()
    out = BoundedOutput(raw)
    out.write("x")
    assert not out.drain(0.2)
    raw.release.set()
    assert out.drain(CHECK_S)


def test_a_reader_gone_ends_the_output_quietly():
    r, w = os.pipe()
    os.close(r)
    raw = os.fdopen(w, "w")
    out = BoundedOutput(raw)
    out.write("nobody reads this\n")  # EPIPE (SIGPIPE is ignored by Python)
    assert out.drain(CHECK_S) and out._broken
    assert out.write("more\n") == 5 and out.dropped_writes == 0  # not counted: nobody will read it
    raw.close()


def test_nonblocking_stderr_replaces_and_restores_sys_stderr(monkeypatch: pytest.MonkeyPatch):
    raw = io.StringIO()
    monkeypatch.setattr(sys, "stderr", raw)
    with nonblocking_stderr(wait_s=CHECK_S) as out:
        assert sys.stderr is out and out.raw is raw
        print("inside", file=sys.stderr)
    assert sys.stderr is raw and raw.getvalue() == "inside\n"
    assert (output.LIMIT_BYTES, output.EXIT_WAIT_S) == (1 << 20, 2.0)



class NoSurface:
    """A raw stream with a write and a flush only: no encoding, no isatty, no descriptor."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


class TtyFails:
    def isatty(self) -> bool:
        raise OSError("the terminal went away")


def test_a_bare_raw_stream_is_utf8_no_tty_and_has_no_descriptor():
    raw = NoSurface()
    out = BoundedOutput(raw)  # type: ignore[arg-type]
    assert out.encoding == "utf-8" and out.isatty() is False
    with pytest.raises(io.UnsupportedOperation, match=r"^fileno$"):
        out.fileno()
    out.write("é")
    assert out.drain(60) and raw.text == "é"


def test_isatty_is_the_raw_streams_and_false_when_it_cannot_say():
    master, slave = os.openpty()
    tty = os.fdopen(slave, "w")
    try:
        assert BoundedOutput(tty).isatty() is True
        tty.close()
        assert BoundedOutput(tty).isatty() is False  # closed: ValueError
    finally:
        os.close(master)
    assert BoundedOutput(TtyFails()).isatty() is False  # type: ignore[arg-type]
    assert BoundedOutput(io.StringIO()).isatty() is False
