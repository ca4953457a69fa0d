"""The backstop (``firstlight.runner.watchdog``) in process: what it reads on its pipe, whom it signals, in which
order and when, with the process calls recorded instead of made (its clock too, so the grace is exact without
waiting). The real backstop, started beside a real server and left behind by a SIGKILLed firstlight:
``tests/e2e/runner/test_backstop.py``."""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from firstlight.runner import watchdog

NO_PID = 2 ** 22 + 12345  # above Linux's pid_max limit: never a process


class Calls:
    """os.kill / os.killpg as the backstop makes them; ``gone`` says which targets are no longer there."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[tuple[str, int, int]] = []
        self.gone: set[int] = set()  # -pgid for a group, pid for a process
        self.refuse: set[int] = set()  # targets whose signal fails (EPERM)
        monkeypatch.setattr(watchdog.os, "kill", self.kill)
        monkeypatch.setattr(watchdog.os, "killpg", self.killpg)

    def kill(self, pid: int, sig: int) -> None:
        self._call("kill", pid, sig, pid)

    def killpg(self, pgid: int, sig: int) -> None:
        self._call("killpg", pgid, sig, -pgid)

    def _call(self, what: str, n: int, sig: int, target: int) -> None:
        if target in self.gone:
            raise ProcessLookupError(n)
        if sig:
            self.made.append((what, n, sig))
        if target in self.refuse:
            raise PermissionError(n)


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now, self.sleeps = 1000.0, 0
        self.at_sleep: list[Any] = []
        monkeypatch.setattr(watchdog.time, "monotonic", lambda: self.now)
        monkeypatch.setattr(watchdog.time, "sleep", self.sleep)

    def sleep(self, s: float) -> None:
        assert s == 0.1
        self.now += s
        self.sleeps += 1
        for act in self.at_sleep:
            act(self.sleeps)


def _stat_field_22(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]


def test_a_process_is_known_by_its_start_ticks_and_state():
    assert watchdog.start_ticks(os.getpid()) == _stat_field_22(os.getpid())
    assert watchdog.start_ticks(NO_PID) is None and watchdog._state(NO_PID) is None
    assert watchdog._state(os.getpid()) == "R"  # this process, reading its own stat


def test_alive_lists_the_group_and_the_tracked_that_are_still_the_same_process(monkeypatch: pytest.MonkeyPatch):
    calls = Calls(monkeypatch)
    me, ticks = os.getpid(), watchdog.start_ticks(os.getpid())
    assert ticks is not None
    tracked = {me: ticks, NO_PID: "1"}
    assert watchdog._alive(4242, tracked) == [-4242, me] and calls.made == []  # signal 0: asked, not sent
    assert watchdog._alive(4242, {me: str(int(ticks) + 1)}) == [-4242]  # the pid was reused: not ours
    calls.gone.add(-4242)
    assert watchdog._alive(4242, tracked) == [me]
    for state in ("Z", "X"):
        monkeypatch.setattr(watchdog, "_state", lambda pid, s=state: s)
        assert watchdog._alive(4242, tracked) == []  # a zombie is not stopped again


def test_signals_go_to_the_group_and_the_processes_and_a_refusal_stops_no_other(monkeypatch: pytest.MonkeyPatch):
    calls = Calls(monkeypatch)
    calls.refuse.add(-7)
    calls.gone.add(8)
    watchdog._signal_all([-7, 8, 9], signal.SIGTERM)
    assert calls.made == [("killpg", 7, signal.SIGTERM), ("kill", 9, signal.SIGTERM)]


def _alive_as(monkeypatch: pytest.MonkeyPatch, answers: list[list[int]]) -> list[tuple[int, dict[int, str]]]:
    asked: list[tuple[int, dict[int, str]]] = []

    def alive(pgid: int, tracked: dict[int, str]) -> list[int]:
        asked.append((pgid, tracked))
        return answers.pop(0) if len(answers) > 1 else answers[0]

    monkeypatch.setattr(watchdog, "_alive", alive)
    return asked


def test_nothing_left_means_no_signal(monkeypatch: pytest.MonkeyPatch):
    calls, clock = Calls(monkeypatch), Clock(monkeypatch)
    asked = _alive_as(monkeypatch, [[]])
    watchdog.stop(42, {7: "9"}, 10.0)
    assert calls.made == [] and clock.sleeps == 0 and asked == [(42, {7: "9"})]


def test_sigterm_then_nothing_more_when_all_end_within_the_grace(monkeypatch: pytest.MonkeyPatch):
    calls, clock = Calls(monkeypatch), Clock(monkeypatch)
    _alive_as(monkeypatch, [[-42, 7], [-42, 7], [-42], []])
    watchdog.stop(42, {7: "9"}, 10.0)
    assert calls.made == [("killpg", 42, signal.SIGTERM), ("kill", 7, signal.SIGTERM)] and clock.sleeps == 3


def test_sigkill_at_the_end_of_the_grace_to_those_still_there(monkeypatch: pytest.MonkeyPatch):
    calls, clock = Calls(monkeypatch), Clock(monkeypatch)
    _alive_as(monkeypatch, [[-42, 7], [7]])  # the group ends; a tracked process ignores SIGTERM
    watchdog.stop(42, {7: "9"}, 2.0)
    assert calls.made == [("killpg", 42, signal.SIGTERM), ("kill", 7, signal.SIGTERM), ("kill", 7, signal.SIGKILL)]
    assert 19 <= clock.sleeps <= 21 and clock.now == pytest.approx(1002.0, abs=0.11)  # the grace, in 0.1 s polls


def test_containers_are_stopped_by_their_runtime_each_bounded(monkeypatch: pytest.MonkeyPatch):
    ran: list[tuple[list[str], dict[str, Any]]] = []

    def run(argv: list[str], **kw: Any) -> None:
        ran.append((argv, kw))
        if argv[0] == "docker":
            raise watchdog.subprocess.TimeoutExpired(argv, kw["timeout"])
        if argv[0] == "no-such-runtime":
            raise FileNotFoundError(argv[0])

    monkeypatch.setattr(watchdog.subprocess, "run", run)
    watchdog.stop_containers([("no-such-runtime", "a1"), ("docker", "b2"), ("podman", "c3")], 2.6)
    assert [argv for argv, _ in ran] == [["no-such-runtime", "stop", "-t", "3", "a1"],
                                         ["docker", "stop", "-t", "3", "b2"], ["podman", "stop", "-t", "3", "c3"]]
    kw = ran[2][1]
    assert kw == {"stdin": watchdog.subprocess.DEVNULL, "stdout": watchdog.subprocess.DEVNULL,
                  "stderr": watchdog.subprocess.DEVNULL,
                  "timeout": 32.6, "check": False}


def _main(monkeypatch: pytest.MonkeyPatch, argv: list[str], stdin: bytes) -> tuple[int, list[Any], list[Any]]:
    did: list[Any] = []
    ignored: list[Any] = []
    monkeypatch.setattr(watchdog, "stop_containers", lambda c, g: did.append(("containers", c, g)))
    monkeypatch.setattr(watchdog, "stop", lambda p, t, g: did.append(("stop", p, t, g)))
    monkeypatch.setattr(watchdog.signal, "signal", lambda sig, how: ignored.append((sig, how)))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    return watchdog.main(argv), did, ignored


def test_at_end_of_file_it_stops_the_containers_then_the_group_and_the_tracked(monkeypatch: pytest.MonkeyPatch):
    lines = (b"track 123 456\n\ntrack abc 1\ntrack 77\ncontainer docker 0a1b2c\ncontainer docker ab-c\n"
             b"container podman\ntrack 124 \xff9\n")
    rc, did, ignored = _main(monkeypatch, ["4242", "7.5"], lines)
    assert rc == 0
    assert did == [("containers", [("docker", "0a1b2c")], 7.5), ("stop", 4242, {123: "456", 124: "\ufffd9"}, 7.5)]
    assert ignored == [(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM,
                                                      signal.SIGPIPE)]


def test_release_leaves_everything_running(monkeypatch: pytest.MonkeyPatch):
    rc, did, _ = _main(monkeypatch, ["4242", "10"], b"track 123 456\nrelease\ntrack 124 457\n")
    assert (rc, did) == (0, [])


def test_it_never_signals_init_its_own_group_or_itself(monkeypatch: pytest.MonkeyPatch):
    for pgid in (1, 0, -1, os.getpgid(0), os.getpid()):
        rc, did, ignored = _main(monkeypatch, [str(pgid), "10"], b"")
        assert (rc, did, ignored) == (2, [], []), pgid
    assert _main(monkeypatch, ["2", "10"], b"")[0] == 0  # any other group: the server's, stopped at end of file
