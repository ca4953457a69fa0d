"""A reporter whose reader went away and a record file on a full disk do not end the run (issue 15, item 1)."""

from __future__ import annotations

import os
import re
import signal
import threading

from firstlight.report.console import ConsoleReporter
from firstlight.report.jsonl import JsonLinesReporter
from firstlight.runner.guard import RecordFile, guard_reporter, install_stop_handlers
from tests.support.common import REPO


def test_a_closed_pipe_silences_only_its_reporter():
    r, w = os.pipe()
    os.close(r)  # the reader (`head -n 3`) is gone
    broken = os.fdopen(w, "w")
    out_r, out_w = os.pipe()
    good = os.fdopen(out_w, "w")
    reporters = guard_reporter(ConsoleReporter(stream=broken, live=False))
    reporters = guard_reporter(type(reporters)(*reporters.reporters, JsonLinesReporter(stream=good)))
    for i in range(50):  # enough to overflow any buffer
        reporters.message(f"line {i} " + "x" * 200)
    reporters.message("the verdict still gets out")
    assert os.readlink(f"/proc/self/fd/{w}") == os.devnull  # the broken stream silenced: its final flush passes
    reporters.close()
    console, jsonl = reporters.reporters
    assert console.lost is not None and "BrokenPipe" in console.lost  # type: ignore[attr-defined]
    assert jsonl.lost is None  # type: ignore[attr-defined]
    good.close()
    with os.fdopen(out_r) as f:
        assert "the verdict still gets out" in f.read()


def test_a_record_on_a_full_disk_is_one_warning():
    warnings: list[str] = []
    rec = RecordFile(open("/dev/full", "w"), warnings.append)  # noqa: SIM115 - RecordFile closes it
    for _ in range(1000):
        rec.write('{"kind": "log", "text": "' + "x" * 100 + '"}\n')
    rec.flush()
    rec.close()
    assert len(warnings) == 1 and "--record" in warnings[0] and "No space" in warnings[0]


# -- at their edges ----------------------------------------------------------------------------------------------
class Failing:
    """A record stream whose ``fail`` operations raise ``error``; it records what was done to it."""

    def __init__(self, error: Exception, fail: set[str], name: str | None = "/data/run.jsonl") -> None:
        self.error, self.fail, self.done = error, fail, []  # type: ignore[var-annotated]
        if name is not None:
            self.name = name

    def _do(self, what: str) -> None:
        self.done.append(what)
        if what in self.fail:
            raise self.error

    def write(self, text: str) -> None:
        self._do("write")

    def flush(self) -> None:
        self._do("flush")

    def close(self) -> None:
        self._do("close")


def test_a_record_that_fails_says_why_once_and_stops_writing():
    import errno as _errno

    from firstlight.runner.guard import RecordFile

    warned: list[str] = []
    f = Failing(OSError(_errno.ENOSPC, "No space left on device"), {"flush"})
    rec = RecordFile(f, warned.append)  # type: ignore[arg-type]
    rec.write("a\n")
    rec.flush()
    rec.write("b\n")
    rec.flush()
    rec.close()
    assert f.done == ["write", "flush", "close"]  # closed once at the failure, never written again
    assert warned == ["warning: --record /data/run.jsonl: cannot write (No space left on device); recording "
                      "stopped, the run goes on"]


def test_a_failure_without_an_os_reason_is_said_in_its_words_and_a_failing_close_is_no_crash():
    from firstlight.runner.guard import RecordFile

    warned: list[str] = []
    f = Failing(ValueError("I/O operation on closed file."), {"write", "close"}, name=None)
    rec = RecordFile(f, warned.append)  # type: ignore[arg-type]
    rec.write("a\n")
    assert warned == ["warning: --record the record file: cannot write (I/O operation on closed file.); "
                      "recording stopped, the run goes on"]
    assert rec.f is None and f.done == ["write", "close"]
    warned.clear()
    g = Failing(OSError(5, "Input/output error"), {"close"})
    rec = RecordFile(g, warned.append)  # type: ignore[arg-type]
    rec.close()  # the failing close is the failure: said once
    assert rec.f is None and len(warned) == 1 and "(Input/output error)" in warned[0]
    rec.close()
    rec.flush()
    assert g.done == ["close", "close"] and len(warned) == 1


def test_a_clean_close_closes_once():
    from firstlight.runner.guard import RecordFile

    f = Failing(OSError(), set())
    rec = RecordFile(f, lambda s: None)  # type: ignore[arg-type]
    rec.close()
    rec.close()
    assert f.done == ["close"]


def test_silence_points_the_streams_descriptor_at_dev_null():
    import io
    import os

    from firstlight.runner.guard import silence

    r, w = os.pipe()
    os.close(r)  # the reader went away
    stream = os.fdopen(w, "w")
    silence(stream)
    stream.write("x" * 100000)
    stream.flush()  # no BrokenPipeError: /dev/null takes it
    assert os.readlink(f"/proc/self/fd/{w}") == os.devnull
    stream.close()
    silence(io.StringIO())  # no descriptor: nothing to do, no error


def test_the_stop_handlers_take_every_signal_that_ends_a_run_and_are_given_back() -> None:
    seen: list[int] = []
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}
    restore = install_stop_handlers(lambda signum, frame: seen.append(signum))
    try:
        for s in before:
            os.kill(os.getpid(), s)  # delivered at once to this (the main) thread: handled before kill returns
        assert seen == list(before)
    finally:
        restore()
    assert {s: signal.getsignal(s) for s in before} == before


def test_stop_handlers_from_a_thread_that_cannot_take_signals_are_no_error() -> None:
    done: list[bool] = []

    def in_thread() -> None:
        install_stop_handlers(lambda signum, frame: None)()  # installs nothing, restores nothing
        done.append(True)

    t = threading.Thread(target=in_thread)
    t.start()
    t.join(60)
    assert done == [True]


class RefusedDescriptor:
    """A stream whose descriptor the OS refuses (EBADF)."""

    def fileno(self) -> int:
        return -1


def test_silence_is_no_error_on_a_closed_stream_or_a_descriptor_the_os_refuses():
    from firstlight.runner.guard import silence

    r, w = os.pipe()
    os.close(r)
    closed = os.fdopen(w, "w")
    closed.close()
    silence(closed)  # ValueError: I/O operation on closed file
    silence(RefusedDescriptor())  # OSError: EBADF


def test_stop_handlers_given_back_from_another_thread_are_no_error_and_stay_until_given_back_on_main() -> None:
    def handler(signum: int, frame: object) -> None:
        pass

    before = signal.getsignal(signal.SIGTERM)
    restore = install_stop_handlers(handler)
    errors: list[BaseException] = []

    def give_back() -> None:
        try:
            restore()  # a thread cannot set handlers: ValueError, swallowed
        except BaseException as e:  # the test's point: nothing escapes
            errors.append(e)

    try:
        t = threading.Thread(target=give_back)
        t.start()
        t.join(60)
        assert not t.is_alive() and errors == [] and signal.getsignal(signal.SIGTERM) is handler
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) == before


def test_one_stop_signals_tuple_and_one_installer_for_the_whole_package():
    """The session, the sidecar's loop, a unit's attempts and the checks before launch take their signals through
    install_stop_handlers; the watchdog process (it ignores them) and the simulator (a server) are not runs."""
    package = REPO / "firstlight"
    installs, tuples = [], []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        text = path.read_text(encoding="utf-8")
        exempt = rel in ("runner/guard.py", "runner/watchdog.py") or rel.startswith("sim/")
        if "signal.signal(" in text and not exempt:
            installs.append(rel)
        if re.search(r"^STOP_SIGNALS\b.*=", text, re.MULTILINE):
            tuples.append(rel)
    assert installs == [] and tuples == ["runner/launcher.py"], (installs, tuples)
