"""A unit watch counts attempts: each invocation of the unit is judged on its own lines, a failed one is
reported with its evidence, and the watch goes on while systemd restarts the unit, up to --max-attempts.

systemd is not PID 1 here, so a double plays systemctl: it tells the unit's state from a real journal file
(the last invocation, whether its main process exited, whether a restart is due), and its restart appends
a new invocation to that file, as systemd would. The journal side is real (systemd-journal-remote writes,
journalctl follows)."""

from __future__ import annotations

import io
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from firstlight.config import Config, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import get_profile
from firstlight.redact import Redactor
from firstlight.report.jsonl import JsonLinesReporter
from firstlight.sim.fixtures import free_port
from firstlight.units.journal.invocations import list_invocations
from firstlight.units.journal.journalctl import read_entries
from firstlight.units.systemctl import UnitState
from firstlight.units.watch import UnitOptions, UnitWatch, engine_command, start_timeout_warning
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import current_epoch, signal_self, wait_for
from tests.support.journal_export import UnitRun, journal_remote, write_journal

UNIT = "llm.service"
FIXTURES = _FIXTURES / "systemctl"
T0 = time.time() - 600  # a live journal: entries of the last minutes


class JournalSystemd:
    """systemctl as seen through a journal file: Restart=on-failure with ``restarts`` restarts allowed."""

    def __init__(self, journal: Path, restarts: int, extra: str = "Type=simple\n") -> None:
        self.journal, self.restarts, self.extra = journal, restarts, extra
        self.calls: list[str] = []
        self.on_restart: Any = None

    def show(self, unit: str) -> UnitState:
        invs = list_invocations(read_entries(self.journal, unit), unit)
        last = invs[-1] if invs else None
        done = last is not None and last.exited
        if last is None:
            active, sub = "inactive", "dead"
        elif done and len(invs) <= self.restarts:
            active, sub = "activating", "auto-restart"
        elif done:
            active, sub = "failed", "failed"
        else:
            active, sub = "activating", "start"
        code = last.exit_code if done and last is not None else 0
        return UnitState.parse(f"Id={unit}\nLoadState=loaded\nActiveState={active}\nSubState={sub}\n"
                               f"{self.extra}Restart=on-failure\nRestartUSec=100ms\nMainPID=0\nExecMainCode="
                               f"{1 if done else 0}\nExecMainStatus={code}\nNRestarts={max(0, len(invs) - 1)}\n"
                               f"InvocationID={last.id if last else ''}\nControlGroup=\n")

    def restart_or_start(self, unit: str) -> UnitState:
        before = self.show(unit)
        self.calls.append("restart" if before.starting_or_up else "start")
        if self.on_restart is not None:
            self.on_restart()
        return before

    def stop(self, unit: str, timeout: float = 120.0) -> UnitState:
        self.calls.append("stop")
        return self.show(unit)


def failing(t0: float, restart: int | None, text: str = "error: failed to load model 'x.gguf'",
            invocation: str | None = None, start: bool = True) -> UnitRun:
    run = UnitRun(UNIT, t0) if invocation is None else UnitRun(UNIT, t0, invocation=invocation)
    if start:
        run.started()
        run.lines(["build: 11434 (llama.cpp)", "main: loading model"])
    run.line(text)
    run.main_exited(1, restart=restart)
    return run


def make_watch(journal: Path, systemd: JournalSystemd, stream: io.StringIO, **opts: Any) -> UnitWatch:
    cfg = Config(probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}", connect_timeout=0.2),
                 judge=JudgeConfig(timeout=60, stall_timeout=30), history=HistoryConfig(enabled=False),
                 echo_server_output=False, sample_interval=0.2)
    return UnitWatch(UnitOptions(UNIT, journal, **opts), cfg, get_profile("llamacpp"), JsonLinesReporter(stream),
                     Redactor(), systemctl=systemd)  # type: ignore[arg-type]


def events(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def loading_first_attempt(path: Path) -> tuple[UnitRun, JournalSystemd]:
    """Attempt 1 still loading when the watch begins, under a unit that systemd restarts once."""
    first = UnitRun(UNIT, T0)
    first.started()
    first.lines(["build: 11434 (llama.cpp)", "main: loading model"])
    write_journal(path, bytes(first.out))
    return first, JournalSystemd(path, restarts=1)


@pytest.fixture(autouse=True)
def _journal_tools() -> None:
    journal_remote()


def test_each_failed_attempt_is_reported_and_the_watch_goes_on(tmp_path: Path):
    path = tmp_path / "u.journal"
    first, systemd = loading_first_attempt(path)
    second = failing(T0 + 60, restart=None, text="error: failed to open GGUF file 'x.gguf' (No such file)")
    seen = io.StringIO()

    def systemd_runs_the_unit() -> None:  # attempt 1 fails; once it is judged, systemd's restart is attempt 2
        wait_for(lambda: '"event": "started"' in seen.getvalue(), 60, "the watch to start")
        write_journal(path, bytes(failing(T0 + 1, 1, invocation=first.invocation, start=False).out))
        wait_for(lambda: '"event": "attempt"' in seen.getvalue(), 60, "attempt 1 reported")
        write_journal(path, bytes(second.out))

    threading.Thread(target=systemd_runs_the_unit, daemon=True).start()
    outcome = make_watch(path, systemd, seen, max_attempts=3, restart_wait=30).run(systemd.show(UNIT))
    evs = events(seen)
    attempts = [e for e in evs if e["event"] == "attempt"]
    assert len(attempts) == 1 and attempts[0]["attempt"] == 1 and attempts[0]["invocation"] == first.invocation
    assert attempts[0]["verdict"] == "failed"
    assert any("failed to load model" in str(ev["value"]) for ev in attempts[0]["evidence"])
    kinds = [e["event"] for e in evs]
    assert kinds[-1] == "summary" and kinds.count("summary") == 1 and kinds.count("verdict") == 1
    summary = evs[-1]
    assert summary["verdict"] == "failed" and outcome.exit_code == 1
    unit = summary["unit"]
    assert unit["attempt"] == 2 and unit["invocation"] == second.invocation
    assert [a["invocation"] for a in unit["attempts"]] == [first.invocation, second.invocation]
    # attempt 2 is judged on its own lines only: its evidence is its own error, not the first one's
    assert any("failed to open GGUF" in str(ev["value"]) for ev in summary["evidence"])
    assert not any("failed to load model" in str(ev["value"]) for ev in summary["evidence"])
    assert "failed/failed" in unit["attempts"][1]["unit_state"]


def test_one_attempt_by_default(tmp_path: Path):
    path = tmp_path / "u.journal"
    write_journal(path, bytes(failing(T0, restart=1).out + failing(T0 + 60, restart=None).out))
    systemd = JournalSystemd(path, restarts=1)
    assert systemd.show(UNIT).sub_state == "failed"
    seen = io.StringIO()
    outcome = make_watch(path, systemd, seen).run(systemd.show(UNIT))  # a failed unit: its last start's post-mortem
    assert outcome.verdict == "failed" and not [e for e in events(seen) if e["event"] == "attempt"]
    assert events(seen)[-1]["unit"]["attempt"] == 1


def test_up_watches_the_new_invocation_only(tmp_path: Path):
    path = tmp_path / "u.journal"
    write_journal(path, bytes(failing(T0, restart=None, text="error: the OLD start's error").out))
    systemd = JournalSystemd(path, restarts=0)
    new = failing(time.time(), restart=None, text="error: the new start's error")  # systemd starts it now
    systemd.on_restart = lambda: write_journal(path, bytes(new.out))
    state = systemd.restart_or_start(UNIT)
    assert systemd.calls == ["start"]  # it was failed: start, not restart
    seen = io.StringIO()
    outcome = make_watch(path, systemd, seen, restart_first=True).run(state)
    summary = events(seen)[-1]
    assert summary["unit"]["invocation"] == new.invocation
    assert any("the new start's error" in str(e["value"]) for e in summary["evidence"])
    assert "OLD" not in json.dumps(summary["evidence"])
    assert outcome.exit_code == 1


def test_ctrl_c_stops_the_watch_and_with_stop_on_interrupt_the_unit(tmp_path: Path):
    path = tmp_path / "u.journal"
    run = UnitRun(UNIT, T0)
    run.started()
    run.lines(["build: 11434 (llama.cpp)", "main: loading model"])  # still loading: no verdict on its own
    write_journal(path, bytes(run.out))
    systemd = JournalSystemd(path, restarts=0)
    seen = io.StringIO()

    epoch = current_epoch()

    def interrupt_once_watching() -> None:
        wait_for(lambda: '"event": "started"' in seen.getvalue(), 60, "the watch to start")
        signal_self(signal.SIGINT, within=60, epoch=epoch)

    threading.Thread(target=interrupt_once_watching, daemon=True).start()
    outcome = make_watch(path, systemd, seen, stop_on_interrupt=True).run(systemd.show(UNIT))
    assert outcome.verdict == "interrupted" and outcome.exit_code == 130
    assert systemd.calls == ["stop"]
    assert "stopped" in events(seen)[-1]["unit"]


def test_start_timeout_shorter_than_the_usual_start_is_a_warning():
    notify = UnitState.parse((FIXTURES / "sglang-running.txt").read_text().replace("Type=simple", "Type=notify"))
    warning = start_timeout_warning(notify, 612.0)
    assert warning and "TimeoutStartSec=90s" in warning and "612s" in warning
    assert start_timeout_warning(notify, 60.0) is None  # the start fits
    assert start_timeout_warning(notify, None) is None  # no history yet
    simple = UnitState.parse((FIXTURES / "sglang-running.txt").read_text())
    assert start_timeout_warning(simple, 612.0) is None  # Type=simple: started at fork, the limit never bites
    wrapped = UnitState.parse((FIXTURES / "firstlight-notify-activating.txt").read_text())
    assert start_timeout_warning(wrapped, 612.0) is None  # firstlight extends it while the start progresses


def test_engine_command_and_url_from_exec_start():
    running = UnitState.parse((FIXTURES / "sglang-running.txt").read_text())
    assert engine_command(running.exec_start) == (running.exec_start, None)
    wrapped = UnitState.parse((FIXTURES / "firstlight-notify-activating.txt").read_text())
    command, url = engine_command(wrapped.exec_start)
    assert command[:2] == ["vllm", "serve"] and url is None
    assert engine_command(["/usr/bin/firstlight", "up", "--url", "http://h:1", "--", "x"]) == (["x"], "http://h:1")


def test_without_systemctl_the_exit_code_comes_from_systemds_journal_message(tmp_path: Path):
    path = tmp_path / "u.journal"
    quiet = failing(T0, restart=None, text="llama_model_loader: loaded meta data with 33 key-value pairs")
    write_journal(path, bytes(quiet.out))  # no error line: the exit itself is the evidence
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cgroup.procs").write_text("")  # its processes are gone
    seen = io.StringIO()
    cfg = Config(probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}", connect_timeout=0.2),
                 judge=JudgeConfig(timeout=60, stall_timeout=30), history=HistoryConfig(enabled=False),
                 echo_server_output=False, sample_interval=0.2)
    outcome = UnitWatch(UnitOptions(UNIT, path, cgroup=cgroup), cfg, get_profile("llamacpp"),
                        JsonLinesReporter(seen), Redactor()).run()
    summary = events(seen)[-1]
    assert outcome.verdict == "failed"
    assert any(e["signal"] == "process" and "exited with code 1" in e["value"] for e in summary["evidence"]), \
        summary["evidence"]


def test_a_start_timeout_shorter_than_the_history_says_is_warned_before_it_bites(tmp_path: Path):
    from firstlight.history.store import History
    from firstlight.runner.after_ready import deployment_key

    command = ["/opt/llama/llama-server", "-m", "/models/m.gguf", "--port", "8080"]
    path = tmp_path / "u.journal"
    run = UnitRun(UNIT, T0)
    run.started()
    run.line("main: loading model")
    write_journal(path, bytes(run.out))
    systemd = JournalSystemd(path, restarts=0, extra="Type=notify\nTimeoutStartUSec=1min 30s\nExecStart={ path="
                             f"{command[0]} ; argv[]={' '.join(command)} ; ignore_errors=no ; start_time=[n/a] ; "
                             "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n")
    state = systemd.show(UNIT)
    assert state.exec_start == command and state.timeout_start_s == 90.0
    db = tmp_path / "history.sqlite3"
    cfg = Config(probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}", connect_timeout=0.2),
                 judge=JudgeConfig(timeout=3, stall_timeout=30), history=HistoryConfig(path=db),
                 echo_server_output=False, watched_command=command, engine="llamacpp")
    key = deployment_key(cfg, get_profile("llamacpp"), command, Redactor())
    with History(db) as h:
        for cold in (590.0, 610.0, 640.0):  # three good starts of this deployment, ten minutes each
            h.record_run("watch", {"verdict": "ready", "cold_start_s": cold, "ready_at": T0}, key)
    seen = io.StringIO()
    UnitWatch(UnitOptions(UNIT, path), cfg, get_profile("llamacpp"), JsonLinesReporter(seen), Redactor(),
              systemctl=systemd).run(state)  # type: ignore[arg-type]
    evs = events(seen)
    warnings = [e["message"] for e in evs if e["event"] == "message" and "TimeoutStartSec" in e["message"]]
    assert warnings and "TimeoutStartSec=90s is shorter than this deployment's usual start (610s" in warnings[0]
    assert any("TimeoutStartSec=90s" in n for n in evs[-1]["notes"])
    # before it bites: the warning is the watch's first word on the start, before it is even watched, so a person
    # reading along learns it while the start still runs, not from the verdict after systemd killed it
    warned = next(i for i, e in enumerate(evs) if e["event"] == "message" and "TimeoutStartSec" in e["message"])
    watched = [i for i, e in enumerate(evs) if e["event"] in ("started", "phase", "status", "verdict", "summary")]
    assert watched and warned < min(watched), [e["event"] for e in evs]
    assert evs[warned]["t"] <= min(e["t"] for e in evs if e["event"] in ("status", "verdict"))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_while_waiting_for_systemds_next_attempt_ends_the_watch_at_once(
        tmp_path: Path, stop: signal.Signals):
    path = tmp_path / "u.journal"
    first, systemd = loading_first_attempt(path)
    seen = io.StringIO()

    epoch = current_epoch()

    def stop_while_waiting() -> None:  # attempt 1 fails; systemd's restart is due but never comes
        wait_for(lambda: '"event": "started"' in seen.getvalue(), 60, "the watch to start")
        write_journal(path, bytes(failing(T0 + 1, 1, invocation=first.invocation, start=False).out))
        wait_for(lambda: '"event": "attempt"' in seen.getvalue(), 60, "attempt 1 reported")
        signal_self(stop, within=60, epoch=epoch)

    threading.Thread(target=stop_while_waiting, daemon=True).start()
    t0 = time.monotonic()
    outcome = make_watch(path, systemd, seen, max_attempts=3, restart_wait=120).run(systemd.show(UNIT))
    assert time.monotonic() - t0 < 60  # not the 120 s wait for an attempt that never comes
    assert outcome.verdict == "interrupted" and outcome.exit_code == 130
    summary = events(seen)[-1]
    assert summary["evidence"][0]["value"] == f"{stop.name} received while waiting for systemd's next attempt"
    assert [a["verdict"] for a in summary["unit"]["attempts"]] == ["failed"]
    assert signal.getsignal(stop) in (signal.default_int_handler, signal.SIG_DFL)  # given back


def test_a_stop_signal_before_any_invocation_is_interrupted_not_no_invocation(tmp_path: Path):
    path = tmp_path / "u.journal"
    write_journal(path, bytes(failing(T0, restart=None).out))  # a failed invocation: up waits for the new one
    systemd = JournalSystemd(path, restarts=0)
    seen = io.StringIO()
    waiting = threading.Event()
    systemd.on_restart = waiting.set  # systemd was asked, but its new invocation never appears

    epoch = current_epoch()

    def stop_while_waiting() -> None:
        wait_for(waiting.is_set, 60, "the restart to be asked for")
        signal_self(signal.SIGTERM, within=60, epoch=epoch)

    threading.Thread(target=stop_while_waiting, daemon=True).start()
    state = systemd.restart_or_start(UNIT)
    t0 = time.monotonic()
    outcome = make_watch(path, systemd, seen, restart_first=True).run(state)
    assert time.monotonic() - t0 < 30  # not the 60 s wait for the first invocation
    assert outcome.verdict == "interrupted"
    assert "interrupted before an invocation of the unit appeared" in json.dumps(events(seen)[-1])
