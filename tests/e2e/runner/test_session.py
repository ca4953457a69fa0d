"""No stop signal is lost, and stderr nobody reads never blocks the run (issue 20).

- A real SIGTERM delivered the moment the READY probe's result is queued (the race the field saw: the judge,
  READY already final, ignored it and firstlight supervised on until a second SIGTERM).
- stderr into a real pipe that nobody reads and that is already full: the verdict, ``/readyz`` and a stop
  signal do not wait for it, and what was dropped is counted.

The tests of this subject that run the session in the test's own process; the others:
``tests/e2e/hostile/test_signals.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil
import pytest

from firstlight.assessment import Assessment, Event
from firstlight.config import AfterReadyConfig, Config, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import get_profile
from firstlight.engines.profile import Endpoints, EngineProfile
from firstlight.history.store import History
from firstlight.preflight.base import Check, PreflightReport
from firstlight.preflight.disk import device_id
from firstlight.probes.loop import EngineIdentified
from firstlight.report import series
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.runner import launcher, pump
from firstlight.runner import session as session_module
from firstlight.runner.launcher import ServerProcess
from firstlight.runner.outcome import Outcome
from firstlight.runner.output import BoundedOutput
from firstlight.runner.session import Session, SourcesFactory
from firstlight.runner.sources import Echo, Sink, Sources
from firstlight.serving import ServingStatus
from firstlight.sim.fixtures import free_port
from firstlight.timeline import (
    Interrupted,
    Level,
    LogLine,
    Observation,
    Probe,
    ProcessSample,
    Started,
    WeightsTotal,
    from_dict,
)
from firstlight.vocab import EXIT_CODES, EXIT_REGRESSION, FAILED, HUNG, READY, STARTING
from tests.support.bench import running_sim
from tests.support.common import FIXTURES, drive, signal_self, sim_cmd, wait_for
from tests.support.hostile_signals import _full_pipe

CHECK_S = 60  # far above the rule's seconds: reached only when the defect is back


def test_a_bounded_output_drops_and_counts_while_its_reader_stalls_and_says_so_after(tmp_path: Path) -> None:
    r, w = _full_pipe()
    raw = os.fdopen(w, "w")
    out = BoundedOutput(raw, limit=4096)
    t0 = time.monotonic()
    for i in range(1000):
        out.write(f"line {i} " + "y" * 100 + "\n")  # never blocks: the pipe is full
    assert time.monotonic() - t0 < CHECK_S
    assert out.dropped_writes > 900 and out.dropped_lines == out.dropped_writes
    got = bytearray()
    reader = threading.Thread(target=lambda: got.extend(_read_all(r)), daemon=True)
    reader.start()
    assert out.drain(CHECK_S)  # the reader reads again: what was kept is out
    out.write("after\n")
    out.say_dropped()
    assert out.drain(CHECK_S)
    raw.close()
    reader.join(CHECK_S)
    text = got.decode(errors="replace")
    assert f"{out.dropped_lines} lines" in text and "were dropped" in text and "after" in text


def _read_all(fd: int) -> bytes:
    chunks = []
    while data := os.read(fd, 65536):
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks)


T0 = 1_000.0


PID = 2_000_000_000  # no such process: the session only passes it on (the judge: a process tree to watch)


URL = "http://127.0.0.1:8000"


GENERATION = Probe(T0 + 6, Level.GENERATION, True, "POST /v1/completions -> 200", 200, 0.4, "Hello")


class Clock:
    """The session's clock: where the script is, never the wall."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass
class Quiet:
    """A script step: nothing arrives until ``until`` on the session's clock. Played once the session has taken
    every observation before it and ``settled`` says it has looked at them."""

    until: float
    settled: Callable[[], bool] = lambda: True


@dataclass
class Call:
    """A script step: ``fn`` runs on the script's thread (a real signal to this process, say)."""

    fn: Callable[[], None]


Step = Observation | Quiet | Call


class ScriptedSources(Sources):
    """The sources' part of the session with a script for a server: ``start`` plays the observations on the sink
    from a thread of its own (as the samplers, readers and probes do), moving the clock to each one's time;
    ``settle_logs`` delivers what the exited process's pipes still held. What the session asks of the sources
    (the port's owner, the engine's endpoints, a log line's nudge) is recorded."""

    def __init__(self, cfg: Config, sink: Sink, echo: Echo, identify: bool, clock: Clock,
                 backlog: Callable[[], int], script: list[Step], left_in_pipe: list[LogLine],
                 port_holder: str | None, start_error: str | None = None, held_before: str | None = None) -> None:
        super().__init__(cfg, sink, echo, identify, clock, backlog)
        self.held_before = held_before  # the port found held before the launch: nothing is started
        self.scripted_clock, self.script, self.left_in_pipe = clock, script, left_in_pipe
        self.port_holder, self.start_error = port_holder, start_error
        self.started = False
        self.endpoints: list[Endpoints] = []
        self.nudges = 0
        self.port_checks = 0
        self.error: BaseException | None = None
        self.stopped = False

    def start(self) -> str | None:
        self.started = True
        self.port_conflict = self.held_before
        if self.start_error is not None:  # the command could not be started: nothing to play
            return self.start_error
        threading.Thread(target=self._play, name="scripted-source", daemon=True).start()
        return None

    def _play(self) -> None:
        try:
            for step in self.script:
                if isinstance(step, Quiet):
                    self._wait_taken(step)
                    self.scripted_clock.t = step.until
                elif isinstance(step, Call):
                    step.fn()
                else:
                    self.scripted_clock.t = max(self.scripted_clock.t, step.t)
                    self.sink(step)
            wait_for(lambda: self.stopped, 30, "a verdict once the script is over")
        except BaseException as e:  # never leave the session waiting for a verdict that cannot come
            self.error = e
            self.sink(Interrupted(self.scripted_clock.t, "SIGTERM"))

    def _wait_taken(self, step: Quiet) -> None:
        backlog = self.backlog
        assert backlog is not None
        wait_for(lambda: backlog() == 0 and step.settled(), 30, "the session to take the script so far")

    def settle_logs(self, timeout: float = 2.0) -> None:
        for obs in self.left_in_pipe:
            self.sink(obs)

    def check_port_owner(self) -> str | None:
        self.port_checks += 1
        return self.port_holder

    def use_endpoints(self, endpoints: Endpoints) -> None:
        self.endpoints.append(endpoints)

    def new_log_line(self) -> None:
        self.nudges += 1

    def stop(self) -> None:
        self.stopped = True


@dataclass
class Recorder(QuietReporter):
    """What the session told its reporter, in order."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def started(self, info: dict[str, Any]) -> None:
        self.calls.append(("started", info))

    def event(self, ev: Event, a: Assessment) -> None:
        self.calls.append(("event", (ev, a)))

    def status(self, a: Assessment) -> None:
        self.calls.append(("status", a))

    def verdict(self, result: RunResult) -> None:
        self.calls.append(("verdict", result))

    def summary(self, result: RunResult) -> None:
        self.calls.append(("summary", result))

    def message(self, text: str) -> None:
        self.calls.append(("message", text))

    def heartbeat(self) -> None:
        self.calls.append(("heartbeat", None))

    def collectors(self, read: Any) -> None:
        self.calls.append(("collectors", read))

    def messages(self) -> list[str]:
        return [text for _, text in self._of("message")]

    def events(self) -> list[tuple[str, str]]:
        return [(ev.type, ev.message) for name, (ev, _) in self._of("event")]

    def statuses(self) -> list[Assessment]:
        return [a for _, a in self._of("status")]

    def _of(self, name: str) -> list[tuple[str, Any]]:
        return [c for c in list(self.calls) if c[0] == name]


def scripted(script: list[Step], left_in_pipe: list[LogLine], port_holder: str | None,
             start_error: str | None = None, held_before: str | None = None) -> SourcesFactory:
    """The session's sources factory for a scripted server: the session is composed with it, as a unit's or a
    container's is with theirs."""
    def make(cfg: Config, sink: Sink, echo: Echo, identify: bool, clock: Callable[[], float],
             backlog: Callable[[], int] | None, command: object) -> Sources:
        assert isinstance(clock, Clock) and backlog is not None
        return ScriptedSources(cfg, sink, echo, identify, clock, backlog, script, left_in_pipe, port_holder,
                               start_error, held_before)
    return make


@dataclass
class Run:
    outcome: Outcome
    reporter: Recorder
    sources: ScriptedSources
    session: Session
    record: list[dict[str, Any]]

    @property
    def result(self) -> RunResult:
        return self.outcome.result


def run(script: list[Step], pid: int | None = PID, engine: str | None = None, left_in_pipe: list[LogLine] | None = None,
        port_holder: str | None = None, stall_timeout: float = 120.0,
        settled: Callable[[Recorder], bool] | None = None, *, t0: float = T0, history: Path | None = None,
        preflight: PreflightReport | None = None, start_error: str | None = None, record: IO[str] | None = None,
        record_timeout: bool = True, reporter: Recorder | None = None, fail_on_regression: bool = False,
        margin: float = 0.2, held_before: str | None = None, server_log: Path | None = None,
        requests: dict[str, int] | None = None, **cfg_kw: Any) -> Run:
    """One scripted start; ``cfg_kw`` are further Config fields, ``history`` a history file to record in."""
    judge = cfg_kw.pop("judge", JudgeConfig(timeout=3600, stall_timeout=stall_timeout))
    hist = (HistoryConfig(path=history, fail_on_regression=fail_on_regression, margin=margin) if history is not None
            else HistoryConfig(enabled=False))
    cfg = Config(pid=pid, engine=engine, probe=cfg_kw.pop("probe", ProbeConfig(url=URL)), history=hist,
                 judge=judge, echo_server_output=False, **cfg_kw)
    reporter = reporter or Recorder()
    out = io.StringIO() if record is None else record
    if settled is not None:
        script = [Quiet(s.until, lambda: settled(reporter)) if isinstance(s, Quiet) else s for s in script]
    session = Session(cfg, get_profile(engine or "generic"), reporter, record=out, clock=Clock(t0),
                      preflight=preflight, record_timeout=record_timeout,
                      sources=scripted(script, left_in_pipe or [], port_holder, start_error, held_before))
    session.sources.server_log = server_log  # a detached server's log file, as the sources name it
    if requests is not None:
        session.sources.requests = lambda: dict(requests)  # type: ignore[method-assign]
    outcome = session.run()
    sources = session.sources
    assert isinstance(sources, ScriptedSources)
    assert sources.error is None, sources.error
    assert sources.stopped  # whatever the verdict, the sources are stopped
    lines = out.getvalue().splitlines() if isinstance(out, io.StringIO) else []
    return Run(outcome, reporter, sources, session, [json.loads(r) for r in lines])


def log(t: float, text: str, n: int) -> LogLine:
    return LogLine(T0 + t, text, "stderr", n)


def alive(t: float, read: int = 0) -> ProcessSample:
    return ProcessSample(T0 + t, True, cpu_seconds=1.0, rss_bytes=1 << 30, read_bytes=read)


def test_a_scripted_start_is_starting_until_a_generation_answers_then_ready() -> None:
    r = run([Probe(T0 + 1, Level.PORT, True, "TCP connect ok"),
             Probe(T0 + 2, Level.HEALTH, False, "GET /health -> 503", 503),
             log(3, "Loading model weights", 1),
             Probe(T0 + 5, Level.HEALTH, True, "GET /health -> 200", 200),
             GENERATION], pid=None)
    assert r.outcome.verdict == READY and r.outcome.exit_code == EXIT_CODES[READY] == 0
    assert r.result.ready_at == T0 + 6 and r.result.first_generation is not None
    assert r.result.evidence[0]["value"] == "generation returned 'Hello' in 0.40s"
    assert r.reporter.events() == [
        ("note", "process: no --pid: without the process tree's reads and CPU a slow start cannot be told from a "
                 "hung one; only --timeout ends the wait"),
        ("level", "process"), ("level", "port"), ("phase", "weights_loading"), ("level", "http"),
        ("level", "health"), ("phase", "warmup"), ("level", "models"), ("level", "generation"), ("phase", "ready")]
    verdicts = [a.verdict for _, (ev, a) in r.reporter._of("event")]
    assert verdicts == [STARTING] * 7 + [READY] * 3  # each event with the assessment at its observation
    assert {a.verdict for a in r.reporter.statuses()[:-1]} <= {STARTING}
    assert r.reporter.statuses()[-1].verdict == READY
    names = [name for name, _ in r.reporter.calls]
    assert names[:2] == ["started", "collectors"]
    assert names[-3:] == ["verdict", "heartbeat", "summary"]  # serving: the watchdog hears from it before the summary
    assert r.reporter.calls[0][1]["pid"] is None and r.reporter.calls[0][1]["engine"] == "generic"
    assert r.sources.port_checks == 1  # the port answered: whose is it?
    assert r.sources.nudges == 1  # the log line: probe again soon


def test_a_port_that_answers_for_another_process_fails_the_start_and_the_answers_after_it_never_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The ladder's next rungs answer in the same moment as the port (the other server is up): one drain of the
    queue takes them all. The drain is held open here until the exit, so that it does every time."""
    monkeypatch.setattr(pump, "ASSESS_EVERY_S", 60.0)
    monkeypatch.setattr(pump, "IDLE_ASSESS_S", 60.0)
    r = run([Probe(T0 + 1, Level.PORT, True, "TCP connect ok"), GENERATION, ProcessSample(T0 + 7, False, 0)],
            port_holder="pid 4242 (nginx) listens on port 8000")
    assert (r.result.verdict, r.result.failure) == (FAILED, "port_in_use")
    assert r.result.evidence[0]["value"] == "pid 4242 (nginx) listens on port 8000"
    assert ("warning", "the port is not the server's: pid 4242 (nginx) listens on port 8000") in r.reporter.events()
    assert r.result.ready_at is None and r.result.first_generation is None  # the other server's answer
    assert "generation" not in r.result.levels and [p["name"] for p in r.result.phases] == ["process_start"]
    assert ("phase", "ready") not in r.reporter.events()
    assert [o["kind"] for o in r.record][-4:] == ["port_conflict", "probe", "probe", "process"]  # as judged
    assert replayed(r) == (FAILED, r.result.level, r.result.phases)


def replayed(r: Run) -> tuple[str, str, tuple[dict[str, Any], ...]]:
    """The session's record replayed (``firstlight report``'s way): verdict, level and phases."""
    observations = [from_dict(o) for o in r.record]
    rules = r.session.cfg.judge
    rep = series.replay(observations, rules, series.profile_for(observations, r.session.cfg.engine))
    return rep.assessment.verdict, rep.assessment.level.label, tuple(rep.judge.phases.dicts())


def test_an_engine_detected_from_its_lines_swaps_the_judge_and_the_endpoints_probed() -> None:
    r = run([log(1, "load_tensors: offloading 32 repeating layers to GPU", 1),
             log(2, "ggml_cuda_init: found 1 CUDA devices:", 2), GENERATION], pid=None)
    llama = get_profile("llamacpp")
    assert r.sources.endpoints == [llama.endpoints]
    assert r.session.profile is llama and r.result.engine == "llamacpp" and r.result.verdict == READY
    assert r.reporter.calls[0][1]["engine"] == "generic"  # not known yet when the watch began
    events = r.reporter.events()
    swap = events.index(("note", "engine detected from its log lines: llamacpp"))
    assert events[swap - 1] == ("phase", "weights_loading")  # the line before, read again, reported with it
    assert [p["name"] for p in r.result.phases] == ["process_start", "weights_loading", "ready"]


def test_an_engine_identified_by_its_endpoints_swaps_the_judge_and_is_no_observation_of_the_start() -> None:
    r = run([log(1, "load_tensors: offloading 32 repeating layers to GPU", 1),
             EngineIdentified(T0 + 2, engine="llamacpp", how="/props"), GENERATION], pid=None)
    assert r.sources.endpoints == [get_profile("llamacpp").endpoints]
    assert r.result.engine == "llamacpp"
    assert ("note", "engine identified by its endpoints (/props): llamacpp") in r.reporter.events()
    assert [p["name"] for p in r.result.phases] == ["process_start", "weights_loading", "ready"]
    assert [o["kind"] for o in r.record] == ["started", "note", "log", "probe"]  # for the session, not the judge


def test_an_engine_named_up_front_is_not_learnt_again() -> None:
    r = run([log(1, "load_tensors: offloading 32 repeating layers to GPU", 1),
             log(2, "ggml_cuda_init: found 1 CUDA devices:", 2),
             EngineIdentified(T0 + 3, engine="vllm", how="/version"), GENERATION], pid=None, engine="llamacpp")
    assert r.sources.endpoints == [] and r.result.engine == "llamacpp"
    assert not any(kind == "note" and "engine" in msg for kind, msg in r.reporter.events())


def test_a_crash_is_failed_crashed_with_how_the_process_died_and_its_phase() -> None:
    r = run([alive(1), log(2, "Loading model weights", 1), ProcessSample(T0 + 3, False, exit_code=-11)])
    assert (r.result.verdict, r.result.failure) == (FAILED, "crashed")
    assert r.outcome.exit_code == EXIT_CODES[FAILED]
    assert r.result.evidence[0]["value"] == ("server process died of SIGSEGV (signal 11) before serving, in phase "
                                             "weights_loading")
    assert ("warning", "server process died of SIGSEGV (signal 11)") in r.reporter.events()


def test_a_crash_is_judged_after_the_last_lines_the_process_left_in_its_pipes() -> None:
    """The exit is seen before the pipe's last line is read: the session settles the logs first, so the line
    that names the cause is judged before the exit."""
    r = run([alive(1), log(2, "Loading model weights", 1), ProcessSample(T0 + 3, False, exit_code=1)],
            left_in_pipe=[log(2.5, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 2)])
    assert (r.result.verdict, r.result.failure) == (FAILED, "oom")
    assert r.result.evidence[0]["value"].startswith("line 2: torch.OutOfMemoryError: CUDA out of memory")
    kinds = [(o["kind"], o.get("lineno")) for o in r.record]
    assert kinds[-2:] == [("log", 2), ("process", None)]
    assert replayed(r) == (FAILED, r.result.level, r.result.phases)


def test_a_stall_is_judged_hung_on_the_idle_tick_at_the_sessions_clock() -> None:
    """The process and its log stop moving at t = 2; nothing arrives after that. The session's own ticks judge
    the silence: starting while it is short, hung once it is stall_timeout long, with the last progress as
    evidence; no observation carries that moment."""
    def ticked_after_the_last_line(rep: Recorder) -> bool:
        return any(a.elapsed_s >= 2 and a.verdict == STARTING for a in rep.statuses())

    r = run([alive(1, read=0), log(2, "Loading model weights", 1), alive(2, read=0), Quiet(T0 + 2 + 120)],
            settled=ticked_after_the_last_line)
    assert r.result.verdict == HUNG and r.outcome.exit_code == EXIT_CODES[HUNG]
    assert r.result.detail == "no progress"
    assert r.result.evidence[0]["value"] == "no progress for 120s; last progress: Loading model weights"
    assert r.result.ended_at == T0 + 122 and r.result.phase == "weights_loading"
    statuses = r.reporter.statuses()
    assert statuses[-1].verdict == HUNG and statuses[-1].elapsed_s == 122
    assert all(a.verdict == STARTING for a in statuses[:-1])
    assert max(o["t"] for o in r.record) == T0 + 2  # judged on the clock, not on an observation
    hung_events = [a for _, (ev, a) in r.reporter._of("event") if a.verdict == HUNG]
    assert hung_events == []


def test_a_silence_shorter_than_stall_timeout_is_still_starting() -> None:
    """The same silence, one second short of stall_timeout, then a stop signal ends the watch: never hung."""
    r = run([alive(1), log(2, "Loading model weights", 1), Quiet(T0 + 2 + 119),
             Interrupted(T0 + 2 + 119, "SIGINT")],
            settled=lambda rep: any(a.elapsed_s >= 2 for a in rep.statuses()))
    assert r.result.verdict == "interrupted"
    assert all(a.verdict == STARTING for a in r.reporter.statuses()[:-1])


@pytest.mark.parametrize("access", [True, False])
def test_only_a_line_that_is_not_an_access_line_nudges_the_sources(access: bool) -> None:
    text = '127.0.0.1:51234 - "GET /health HTTP/1.1" 503 Service Unavailable' if access else "Loading model weights"
    r = run([log(1, text, 1), GENERATION], pid=None)
    assert r.sources.nudges == (0 if access else 1)


# -- the steps around the watch: what is told first, preflight, launch, history, record, facts -----------------

def generation(t: float) -> Probe:
    return Probe(t, Level.GENERATION, True, "POST /v1/completions -> 200", 200, 0.4, "Hello")


def test_the_watch_begins_by_telling_what_it_watches_with_the_urls_password_masked() -> None:
    command = ["python", "-m", "sglang.launch_server", "--model-path", "/models/llama", "--node-rank", "1"]
    r = run([log(0.5, "retrying with pa55w0rd-xyz", 1), generation(T0 + 1)], engine="sglang",
            watched_command=command, probe=ProbeConfig(url="http://ops:pa55w0rd-xyz@127.0.0.1:8000"))
    name, info = r.reporter.calls[0]
    assert name == "started"
    assert info == {"started_at": T0, "pid": PID, "launched": False, "engine": "sglang", "role": "server",
                    "node_rank": 1, "url": "http://ops:***@127.0.0.1:8000", "command": None,
                    "model": "/models/llama", "timeout_is_verdict": True}
    assert r.reporter.calls[1] == ("collectors", r.sources.collector_stats)
    assert r.record[0] == {"kind": "started", "t": T0, "pid": PID, "url": "http://ops:***@127.0.0.1:8000",
                           "engine": "sglang", "launched": False}
    assert "pa55w0rd-xyz" not in json.dumps(r.record) + repr(r.result.to_dict())  # the URL's password: anywhere
    assert {"kind": "log", "t": T0 + 0.5, "text": "retrying with ***", "stream": "stderr",
            "lineno": 1, "final": True} in r.record
    assert r.result.url == "http://ops:***@127.0.0.1:8000" and r.result.pid == PID
    assert not any(o["kind"] == "note" for o in r.record)  # a --pid to watch: no warning that it lacks one


def test_a_watch_without_a_command_or_pid_names_no_rank_or_model() -> None:
    r = run([generation(T0 + 1)], pid=None, model_path=Path("/weights/m"))
    info = r.reporter.calls[0][1]
    assert (info["node_rank"], info["model"], info["command"]) == (None, "/weights/m", None)


def test_a_failed_preflight_is_the_verdict_nothing_is_watched_and_the_run_is_recorded(tmp_path: Path) -> None:
    report = PreflightReport([Check("python", "ok", "other", "python 3.12"),
                              Check("gpus", "fail", "gpu_occupied", "GPU 0: pid 77 holds 70 GiB", "stop pid 77")])
    r = run([], history=tmp_path / "h.db", preflight=report)
    assert not r.sources.started and r.sources.stopped
    assert (r.result.verdict, r.result.failure, r.result.hint) == (FAILED, "gpu_occupied", "stop pid 77")
    assert r.result.evidence == ({"signal": "preflight:gpus", "value": "GPU 0: pid 77 holds 70 GiB", "since": T0},)
    assert r.result.detail == "preflight gpus failed: no server was started"
    assert r.result.preflight == report.to_dict()
    assert r.outcome.exit_code == EXIT_CODES[FAILED]
    assert [name for name, _ in r.reporter.calls] == ["verdict", "summary"]
    assert r.reporter.calls[-1][1] is r.result and r.result.history_run is not None
    told = r.reporter.calls[0][1]
    assert isinstance(told, RunResult) and (told.verdict, told.failure) == (FAILED, "gpu_occupied")
    runs = History(tmp_path / "h.db").runs()
    assert [(x.id, x.kind, x.ok, x.summary["failure"]) for x in runs] == [(r.result.history_run, "watch", False,
                                                                         "gpu_occupied")]


def test_a_passed_preflight_goes_with_the_result() -> None:
    report = PreflightReport([Check("python", "ok", "other", "python 3.12")])
    r = run([generation(T0 + 1)], preflight=report)
    assert r.sources.started and r.result.verdict == READY and r.result.preflight == report.to_dict()


def test_a_command_that_cannot_start_fails_with_the_error_as_the_process_evidence(tmp_path: Path) -> None:
    r = run([], history=tmp_path / "h.db", start_error="cannot run 'vlm': No such file or directory")
    assert (r.result.verdict, r.result.failure) == (FAILED, "other")
    assert r.result.evidence == ({"signal": "process", "value": "cannot run 'vlm': No such file or directory",
                                  "since": T0},)
    assert r.result.hint == "check the command: the executable must exist"
    assert r.outcome.exit_code == EXIT_CODES[FAILED] and r.sources.stopped
    assert [name for name, _ in r.reporter.calls] == ["started", "verdict", "summary"]
    assert r.reporter.calls[1][1] is r.result and r.reporter.calls[2][1] is r.result  # what is told is the result
    assert r.record == []  # nothing was watched


def born() -> float:
    return psutil.Process().create_time()


def watched_start(tmp_path: Path, ready_after_birth: float, **kw: Any) -> Run:
    """This test process watched as the server (its birth is real), READY ``ready_after_birth`` s after it."""
    t = born() + ready_after_birth
    return run([generation(t)], pid=os.getpid(), t0=t - 1, history=tmp_path / "h.db", **kw)


def test_the_cold_start_of_a_watched_process_counts_from_its_birth(tmp_path: Path) -> None:
    r = watched_start(tmp_path, 100.0)
    assert r.result.cold_start_s == pytest.approx(100.0, abs=1e-6)


def test_a_start_slower_than_the_baseline_by_more_than_the_margin_is_a_regression(tmp_path: Path) -> None:
    first = watched_start(tmp_path, 100.0)
    assert first.result.regression is None and first.result.history_run == 1
    assert first.result.baseline is not None and first.result.baseline["cold_start_s"] is None  # none before it
    same = watched_start(tmp_path, 119.0)  # 19 % slower: within the 20 % margin
    assert same.result.regression is None and same.outcome.exit_code == 0
    slow = watched_start(tmp_path, 150.0, fail_on_regression=True)
    assert slow.result.regression is not None and slow.result.verdict == "regression"
    (reg,) = slow.result.regression
    assert reg["metric"] == "cold_start_s"
    assert f"REGRESSION: {reg['message']}" in slow.reporter.messages()
    assert slow.outcome.exit_code == EXIT_REGRESSION  # --fail-on-regression
    assert slow.result.history_run == 3 and (slow.result.baseline or {})["margin"] == 0.2
    told = watched_start(tmp_path, 150.0)
    assert told.result.regression is not None and told.outcome.exit_code == 0  # reported, never a stop


def test_the_next_start_is_told_its_eta_from_the_history_once(tmp_path: Path) -> None:
    watched_start(tmp_path, 100.0)
    watched_start(tmp_path, 110.0)
    r = watched_start(tmp_path, 120.0)
    told = [m for m in r.reporter.messages() if m.startswith("history:")]
    assert told == ["history: ETA from 2 untyped starts: 105.0s"]
    assert r.session.expectations.expected_total_s == 105.0
    assert r.result.eta is not None and r.result.eta["seconds"] == 105.0 and r.result.eta["runs"] == 2


def test_an_estimate_given_up_front_is_not_replaced_by_the_history(tmp_path: Path) -> None:
    watched_start(tmp_path, 100.0)
    r = watched_start(tmp_path, 110.0, judge=JudgeConfig(expected_total_s=42.0))
    assert not any(m.startswith("history:") for m in r.reporter.messages())
    assert r.session.expectations.expected_total_s == 42.0 and r.result.eta is None


@pytest.mark.parametrize(("resident", "told"), [(900, "warm_page_cache"), (899, "cold")])
def test_the_page_cache_at_start_picks_the_eta_of_that_type_of_start(tmp_path: Path, resident: int, told: str) -> None:
    """90 % of the weights resident at start (RESIDENT_WARM) is a warm page cache start."""
    watched_start(tmp_path, 100.0)
    t = born() + 100.0
    weights = WeightsTotal(t - 0.5, bytes=1000, files=1, path=str(tmp_path), resident=resident)
    r = run([weights, generation(t)], pid=os.getpid(), t0=t - 1, history=tmp_path / "h.db")
    said = [m for m in r.reporter.messages() if m.startswith("history:") and "ETA" in m]
    assert said[-1] == f"history: no {told} starts yet: ETA from 1 untyped start: 100.0s"
    last = r.reporter.statuses()[-1]  # assessed after the weights were seen
    assert last.progress.eta_total_s is not None  # the judge keeps the estimate of that type of start


def test_a_sidecars_timeout_is_not_a_run_of_the_history(tmp_path: Path) -> None:
    script: list[Step] = [alive(1), Quiet(T0 + 6)]
    for record_timeout, runs in ((False, 0), (True, 1)):
        r = run(script, history=tmp_path / "h.db", judge=JudgeConfig(timeout=5.0), record_timeout=record_timeout,
                settled=lambda rep: bool(rep.statuses()))
        assert r.result.verdict == "timeout"
        assert r.reporter.calls[0][1]["timeout_is_verdict"] is record_timeout
        assert len(History(tmp_path / "h.db").runs()) == runs
        assert (r.result.history_run is None) is (not record_timeout)


def test_a_record_on_a_full_disk_is_one_warning_and_the_watch_goes_on() -> None:
    with open("/dev/full", "w", buffering=1) as full:  # every line written: ENOSPC, as a full disk says
        r = run([log(1, "Loading model weights", 1), GENERATION], pid=None, record=full)
    assert r.result.verdict == READY
    warnings = [m for m in r.reporter.messages() if "--record" in m]
    assert warnings == ["warning: --record /dev/full: cannot write (No space left on device); recording stopped, "
                        "the run goes on"]


def test_the_read_rates_measured_for_the_weights_filesystem_go_with_the_result(tmp_path: Path) -> None:
    disk = {"device": device_id(str(tmp_path)), "mount": "/", "fstype": "ext4", "rate": 2.0e9, "cache_rate": 9.0e9,
            "bytes": 1 << 30, "measured_at": 1.0}
    History(tmp_path / "h.db").record_disk(disk)
    weights = WeightsTotal(T0 + 0.5, bytes=1000, files=1, path=str(tmp_path), resident=0)
    r = run([weights, generation(T0 + 1)], history=tmp_path / "h.db")
    assert (r.result.anatomy or {})["cache"]["device_rate"] == 2.0e9
    unmeasured = run([WeightsTotal(T0 + 0.5, bytes=1000, files=1, path="/proc", resident=0), generation(T0 + 1)],
                     history=tmp_path / "h.db")
    assert (unmeasured.result.anatomy or {})["cache"]["device_rate"] is None
    unrecorded = run([weights, generation(T0 + 1)])  # no history: nothing measured to read
    assert (unrecorded.result.anatomy or {})["cache"]["device_rate"] is None


# -- after READY: the engine's own clock and the checks, against a real (simulated) server on loopback -----------

def heartbeats(rep: Recorder) -> int:
    return len(rep._of("heartbeat"))


def test_after_ready_the_engines_clock_is_read_and_the_warmup_runs_against_the_server() -> None:
    info = str(FIXTURES / "clocks" / "sglang-server-info-startup-time.json")
    with running_sim("--server-info", info, rate=400.0) as url:
        r = run([generation(T0 + 1)], engine="sglang", probe=ProbeConfig(url=url),
                after=AfterReadyConfig(warmup=2))
    assert r.result.verdict == READY
    clocks = [o for o in r.record if o["kind"] == "engine_clock"]
    assert {o["stage"] for o in clocks} >= {"load_weight", "cuda_graph"} and clocks[0]["source"] == "server_info"
    assert r.record[-len(clocks):] == clocks  # after READY, fed like every observation (and so recorded)
    assert r.result.engine_clock is not None and r.result.engine_clock["source"] == "server_info"
    assert r.result.warmup is not None and r.result.warmup["n"] == 2 and r.result.warmup["errors"] == 0
    assert any(m.startswith("warm-up: first request ") for m in r.reporter.messages())
    names = [name for name, _ in r.reporter.calls]
    assert "heartbeat" in names[names.index("verdict"):names.index("summary")]  # the watchdog fed meanwhile


def test_without_checks_asked_after_ready_none_runs_and_an_engine_without_clock_endpoints_is_not_asked() -> None:
    with running_sim(rate=400.0) as url:
        r = run([generation(T0 + 1)], probe=ProbeConfig(url=url))
    assert r.result.verdict == READY and r.result.warmup is None and r.result.bench is None
    assert not any(o["kind"] == "engine_clock" for o in r.record)
    assert not any(m.startswith("warm-up") for m in r.reporter.messages())


def test_a_stop_signal_during_the_checks_after_ready_ends_them_at_once() -> None:
    """Warm-up requests of 4 s each (8 tokens at 2 tokens/s): SIGTERM once the checks run ends the run then,
    with the warm-up unfinished and the signal as the evidence."""
    reporter = Recorder()

    def stop_during_the_checks() -> None:
        wait_for(lambda: heartbeats(reporter) > 0, CHECK_S, "the checks after READY to begin")
        signal_self(signal.SIGTERM)

    with running_sim(rate=2.0) as url:
        r = run([generation(T0 + 1), Call(stop_during_the_checks)], engine="sglang", probe=ProbeConfig(url=url),
                after=AfterReadyConfig(warmup=50), reporter=reporter)
    assert r.result.verdict == "interrupted" and r.result.warmup is None
    assert r.result.evidence[0]["value"] == "SIGTERM received during the checks after READY"
    assert r.result.evidence[0]["since"] is not None and r.result.evidence[0]["since"] == r.result.ended_at
    assert r.outcome.exit_code == EXIT_CODES["interrupted"]



def test_checks_abandoned_by_a_stop_signal_never_speak_after_the_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """A benchmark left running by the stop ends later, when the stopped server stops answering: its words came
    after the JSON summary (the last line a script reads), once in a loaded fresh CI run."""
    reporter = Recorder()
    release, spoke = threading.Event(), threading.Event()

    got: list[Any] = []

    def checks(cfg: Any, profile: Any, model: Any, say: Callable[[str], None], server: Any = None) -> dict[str, Any]:
        got.extend([profile, threading.current_thread().daemon])
        say("warm-up: first words")
        release.wait(CHECK_S)
        say("bench: last words")
        spoke.set()
        return {}

    def stop_during_the_checks() -> None:
        wait_for(lambda: "warm-up: first words" in reporter.messages(), CHECK_S, "the checks to begin")
        signal_self(signal.SIGTERM)

    monkeypatch.setattr(session_module, "post_ready_checks", checks)
    r = run([generation(T0 + 1), Call(stop_during_the_checks)], probe=ProbeConfig(url=URL),
            after=AfterReadyConfig(warmup=1), reporter=reporter)
    assert r.result.verdict == "interrupted"
    release.set()
    assert spoke.wait(CHECK_S)
    assert "bench: last words" not in reporter.messages()
    assert [name for name, _ in reporter.calls][-1] == "summary"
    assert got == [r.session.profile, True]  # the engine's profile; a daemon thread: it never holds the exit
    assert r.result.evidence[0]["since"] is not None  # when the signal came

# -- a launched server: the session's own choices about it (stop, supervise, an escape) ---------------------------

def launched(tmp_path: Path | None, reporter: Recorder | None = None, *, api_key: str | None = None,
             probe_s: float = 5.0, server_args: tuple[str, ...] = (), **cfg_kw: Any) -> Session:
    """A session that launches the simulated SGLang server (loads in 0.2 s) on a free loopback port, with
    ``api_key`` required; ``probe_s``: the probes' read timeouts; ``tmp_path``: where its history is (None:
    no history)."""
    port = free_port()
    probe = ProbeConfig(url=f"http://127.0.0.1:{port}", api_key=api_key, generation_timeout=probe_s,
                        read_timeout=probe_s)
    extra = ("--api-key", api_key) if api_key else ()
    history = HistoryConfig(path=tmp_path / "h.db") if tmp_path else HistoryConfig(enabled=False)
    cfg = Config(command=sim_cmd("normal", port, "--load-seconds", "0.2", *extra, *server_args), probe=probe,
                 history=history,
                 engine="sglang", sample_interval=0.2, **{"echo_server_output": False, **cfg_kw})
    return Session(cfg, get_profile("sglang"), reporter or Recorder())


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_launched_server_is_stopped_at_ready_under_stop_and_its_cold_start_counts_from_the_launch(
        tmp_path: Path) -> None:
    rep = Observing()
    s = launched(tmp_path, rep, api_key="sk-live-0123456789", after_ready="stop")
    o = s.run()
    assert o.verdict == READY and o.exit_code == 0
    info = rep.calls[0][1]
    assert info["launched"] is True and info["pid"] == o.server_pid
    first = next(obs for name, obs in rep.calls if name == "observe")
    assert isinstance(first, Started) and first.launched is True and first.pid == o.server_pid  # so recorded
    assert "--api-key ***" in info["command"] and "sk-live-0123456789" not in json.dumps(o.summary)
    assert o.result.command is not None and "***" in o.result.command
    assert o.result.ready_at is not None and o.result.cold_start_s == o.result.ready_at - o.result.started_at
    assert o.result.server_stopped is not None and o.result.server_stopped.startswith("stopped with SIGTERM")
    assert o.server_pid is not None and gone(o.server_pid)
    assert [r.kind for r in History(tmp_path / "h.db").runs()] == ["up"]


class Broken(Recorder):
    """A reporter with a bug: ``fails`` raises an error that is no output failure."""

    def __init__(self, fails: str) -> None:
        super().__init__()
        self.fails = fails

    def verdict(self, result: RunResult) -> None:
        super().verdict(result)
        if self.fails == "verdict":
            raise RuntimeError("a reporter's bug")

    def summary(self, result: RunResult) -> None:
        super().summary(result)
        if self.fails == "summary":
            raise RuntimeError("a reporter's bug")


def test_an_error_escaping_the_run_stops_the_launched_server() -> None:
    s = launched(None, Broken("verdict"))
    with pytest.raises(RuntimeError, match="a reporter's bug"):
        s.run()
    pid = s.sources.pid
    assert pid is not None and gone(pid)


def test_an_error_escaping_the_run_kills_a_server_deaf_to_sigterm_after_the_grace() -> None:
    port = free_port()
    cfg = Config(command=sim_cmd("normal", port, "--load-seconds", "0.2", "--ignore-term"), engine="sglang",
                 probe=ProbeConfig(url=f"http://127.0.0.1:{port}"), history=HistoryConfig(enabled=False),
                 sample_interval=0.2, echo_server_output=False, grace=1.0)
    s = Session(cfg, get_profile("sglang"), Broken("verdict"))
    with pytest.raises(RuntimeError, match="a reporter's bug"):
        s.run()
    pid = s.sources.pid
    assert pid is not None and gone(pid)
    server = s.sources.server
    assert server is not None and server.poll() == -signal.SIGKILL


def test_an_error_escaping_a_watch_without_a_server_is_the_error_raised() -> None:
    with pytest.raises(RuntimeError, match="a reporter's bug"):
        run([generation(T0 + 1)], reporter=Broken("verdict"))


def test_an_error_escaping_is_raised_even_when_stopping_the_server_fails() -> None:
    s = launched(None, Broken("verdict"))
    real_stop = ServerProcess.stop

    def stop_then_fail(self: ServerProcess, grace: float) -> str:
        real_stop(self, grace)
        raise OSError("the stop failed too")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ServerProcess, "stop", stop_then_fail)
        with pytest.raises(RuntimeError, match="a reporter's bug"):
            s.run()
    pid = s.sources.pid
    assert pid is not None and gone(pid)


def test_the_serving_checks_watch_the_servers_pid_with_the_sessions_profile_and_the_model_served() -> None:
    r = run([generation(T0 + 1)], engine="sglang")
    r.session.sources = types.SimpleNamespace(pid=4242, model="served-model")  # type: ignore[assignment]
    generic = dataclasses.replace(r.result, engine="generic")  # the session's profile wins over the result's
    w = r.session.serving_watch(generic)
    assert w.probe.sampler is not None and w.probe.sampler.pid == 4242
    assert w.probe.counters == get_profile("sglang").serving and w.probe.ladder.cfg.model == "served-model"
    given = r.session.serving_watch(generic, pid=5151)
    assert given.probe.sampler is not None and given.probe.sampler.pid == 5151
    assert w.clock is r.session.clock  # the checks' times on the session's clock, as the run's


def test_an_error_escaping_after_a_detach_leaves_the_detached_server_serving(tmp_path: Path) -> None:
    rep = Broken("summary")
    s = launched(tmp_path, rep, after_ready="detach")
    try:
        with pytest.raises(RuntimeError, match="a reporter's bug"):
            s.run()
        pid = s.sources.pid
        assert pid is not None and not gone(pid)
        log = s.sources.server_log
        assert log is not None and any(m.startswith(f"detached: server pid {pid} keeps running; its output goes to "
                                                    f"{log}; ") for m in rep.messages())
    finally:
        server = s.sources.server
        if server is not None and server.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.popen.wait(CHECK_S)  # reaped: a child left unreaped is a stray exit for whoever waits next


def test_the_serving_checks_under_supervision_record_each_change_in_the_history(tmp_path: Path) -> None:
    """The supervised server is frozen (SIGSTOP) after READY: its serving checks fail, then it is thawed and
    answers again; each change is in the history, under this run; a SIGTERM then stops it."""
    rep = Recorder()
    s = launched(tmp_path, rep, serving_interval=0.3, probe_s=1.0)
    changes: list[str] = []

    def states() -> list[str]:
        runs = History(tmp_path / "h.db").runs()
        changes[:] = [state for _, state, _ in History(tmp_path / "h.db").serving_changes(runs[0].id)] if runs else []
        return changes

    def freeze_and_thaw() -> None:
        wait_for(lambda: rep._of("summary"), CHECK_S, "READY")
        pid = s.sources.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: "not_serving" in states(), CHECK_S, "the frozen server's checks to fail twice")
        os.kill(pid, signal.SIGCONT)
        wait_for(lambda: states()[-1:] == ["serving"], CHECK_S, "the thawed server to answer its check")

    def thaw_and_stop() -> None:
        if s.sources.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(s.sources.pid, signal.SIGCONT)
        signal_self(signal.SIGTERM)

    errors = drive(freeze_and_thaw, thaw_and_stop)
    o = s.run()
    assert not errors, errors
    assert o.verdict == "interrupted" and o.result.history_run == 1
    # (a check slower than 1 s on a loaded machine may have been a blip before the freeze: recorded before these)
    assert changes[-3:] == ["degraded", "not_serving", "serving"]
    assert f"supervising server pid {o.server_pid}; Ctrl-C or SIGTERM stops it" in rep.messages()
    assert [c for c, _ in rep.calls].count("summary") == 2  # READY for scripts, then the final one


def test_a_supervised_server_killed_after_ready_fails_serving_and_what_is_left_of_it_goes_too() -> None:
    """Its root SIGKILLed, its two TP workers live on in its group holding (on a GPU machine) their memory: they
    are stopped, its watchdog ends, and this process is no longer a subreaper (the API's caller lives on)."""
    rep = Recorder()
    was = launcher.is_subreaper()
    s = launched(None, rep, serving_interval=0.3, server_args=("--workers", "2"))
    workers: list[int] = []

    def kill_after_ready() -> None:
        wait_for(lambda: rep._of("summary"), CHECK_S, "READY")
        pid = s.sources.pid
        assert pid is not None
        workers.extend(c.pid for c in psutil.Process(pid).children())
        os.kill(pid, signal.SIGKILL)
        # the stop below only ends a run that missed the death: it comes once the death was told (a second summary)
        wait_for(lambda: len(rep._of("summary")) >= 2, CHECK_S, "the death while serving told")

    errors = drive(kill_after_ready, lambda: signal_self(signal.SIGTERM))
    o = s.run()
    assert not errors, errors
    assert (o.verdict, o.result.phase) == (FAILED, "serving"), o.result.evidence
    assert o.result.evidence[0]["since"] is not None and o.result.ended_at is not None
    assert "SIGKILL" in json.dumps(o.result.evidence)
    server = s.sources.server
    assert server is not None and server.watchdog is not None
    assert len(workers) == 2 and all(gone(w) for w in workers), o.result.server_stopped
    assert o.result.server_stopped is not None and server.watchdog.poll() is not None
    assert launcher.is_subreaper() == was and launcher._SUBREAPER._holders == 0


class SignalledAtVerdict(Recorder):
    """A stop signal that comes as READY is told: after the judge's verdict was final (the first one only)."""

    def verdict(self, result: RunResult) -> None:
        super().verdict(result)
        if len(self._of("verdict")) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # handled on this (the main) thread before kill returns
            os.kill(os.getpid(), signal.SIGINT)  # a second one: the first is the one told


def test_a_stop_signal_as_ready_is_reached_is_honoured_not_lost() -> None:
    r = run([generation(T0 + 1)], reporter=SignalledAtVerdict())
    assert r.result.verdict == "interrupted" and r.outcome.exit_code == EXIT_CODES["interrupted"]
    (e,) = r.result.evidence
    assert e["value"] == "SIGTERM received as READY was reached" and e["since"] is not None


class Observing(Recorder):
    """A reporter that draws from the observations themselves (the dashboard)."""

    def observe(self, obs: Observation) -> None:
        self.calls.append(("observe", obs))


def test_a_reporter_that_observes_gets_every_observation_fed() -> None:
    rep = Observing()
    r = run([log(0.5, "INFO Loading model weights", 1), generation(T0 + 1)], reporter=rep)
    seen = [obs for name, obs in rep.calls if name == "observe"]
    assert r.result.verdict == READY and any(isinstance(o, LogLine) and o.text == "INFO Loading model weights"
                                             for o in seen)
    assert len(seen) == len(r.record)  # each one fed, as recorded


class Echoed(Recorder):
    """What the session echoed of the server's output, by stream."""

    def server_line(self, stream: str, text: str) -> None:
        self.calls.append(("server_line", (stream, text)))


def test_the_servers_output_is_echoed_with_its_secrets_masked(tmp_path: Path) -> None:
    """The simulated SGLang prints its server_args with the API key, as SGLang does."""
    rep = Echoed()
    o = launched(None, rep, api_key="sk-live-echo-0123456789", after_ready="stop", echo_server_output=True).run()
    assert o.verdict == READY
    lines = [text for _, (stream, text) in rep._of("server_line")]
    args = [line for line in lines if "server_args=" in line]
    assert args and "api_key='***'" in args[0] and not any("sk-live-echo-0123456789" in line for line in lines)
    assert {stream for _, (stream, _) in rep._of("server_line")} <= {"stdout", "stderr"}


def test_a_session_learns_the_engine_only_when_neither_named_nor_told_by_the_command() -> None:
    def detects(engine: str | None, profile: str) -> bool:
        return Session(Config(pid=PID, engine=engine, history=HistoryConfig(enabled=False)), get_profile(profile),
                       Recorder()).detect

    assert detects(None, "generic") is True
    assert detects(None, "sglang") is False  # the command named the engine: its profile
    assert detects("generic", "generic") is False  # --engine generic: told, not to be learnt
    assert detects("vllm", "vllm") is False


def test_the_sessions_sources_are_built_with_its_sink_clock_backlog_and_engine_learning() -> None:
    clock = Clock(T0)
    s = Session(Config(pid=PID, history=HistoryConfig(enabled=False)), get_profile("generic"), Recorder(),
                clock=clock)
    assert s.sources.cfg is s.cfg and s.sources.clock is clock and s.sources.backlog == s.q.qsize
    assert s.sources.sink == s.feed.put and s.sources.echo == s.feed.echo and s.sources.identify is True
    assert s.feed.sources is s.sources and s.feed.q is s.q
    assert (s.history, s.driver, s.feed.stop_signal, s.preflight) == (None, None, None, None)
    assert s.record_timeout is True  # a run's --timeout is a run of the history unless the sidecar says not


def test_a_preflight_given_is_kept_with_the_session() -> None:
    report = PreflightReport([Check("python", "ok", "other", "python 3.12")])
    s = Session(Config(pid=PID, history=HistoryConfig(enabled=False)), get_profile("generic"), Recorder(),
                preflight=report)
    assert s.preflight is report


def test_an_estimate_given_up_front_is_the_eta_from_the_first_status() -> None:
    r = run([alive(1), Quiet(T0 + 30), generation(T0 + 31)], judge=JudgeConfig(timeout=3600, expected_total_s=600.0),
            settled=lambda rep: bool(rep.statuses()))
    first = r.reporter.statuses()[0]
    assert first.progress.eta_total_s is not None and first.progress.eta_total_s <= 600.0
    assert r.result.verdict == READY


def test_a_history_that_cannot_be_opened_is_said_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    r = run([generation(T0 + 1)], history=tmp_path / "file" / "h.db")
    assert r.result.verdict == READY and r.result.history_run is None
    assert [m for m in r.reporter.messages() if m.startswith("history unavailable, not recorded: ")]


class SignalledAtHeartbeat(Recorder):
    """A stop signal once the checks after READY are over and before the run's summary (a watched server: nothing
    reads the session's queue any more)."""

    def heartbeat(self) -> None:
        super().heartbeat()
        if len(self._of("heartbeat")) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # handled on this (the main) thread before kill returns


def test_a_stop_signal_after_the_checks_of_a_watched_server_is_honoured_before_the_summary() -> None:
    r = run([generation(T0 + 1)], reporter=SignalledAtHeartbeat())
    assert r.result.verdict == "interrupted" and r.outcome.exit_code == EXIT_CODES["interrupted"]
    (e,) = r.result.evidence
    assert e["value"] == "SIGTERM received after READY, during the checks" and e["since"] == T0 + 1
    assert r.reporter.calls[-1] == ("summary", r.result)  # the last word, with the verdict returned
    assert r.session.feed.stop_signal is not None and r.session.feed.stop_signal.signal == "SIGTERM"


def test_the_first_stop_signal_is_the_one_kept_with_its_time() -> None:
    clock = Clock(T0 + 7)
    s = Session(Config(pid=PID, history=HistoryConfig(enabled=False)), get_profile("generic"), Recorder(),
                clock=clock)
    s.feed.interrupt(signal.SIGTERM, None)
    clock.t = T0 + 8
    s.feed.interrupt(signal.SIGINT, None)
    assert s.feed.stop_signal == Interrupted(T0 + 7, "SIGTERM")
    assert pump.drain(s.q) == [Interrupted(T0 + 7, "SIGTERM"), Interrupted(T0 + 8, "SIGINT")]  # each one judged


def test_a_port_held_before_the_launch_is_judged_first_with_its_holder_at_the_start() -> None:
    holder = "pid 4242 (nginx) listens on port 8000"
    r = run([], held_before=holder)
    assert (r.result.verdict, r.result.failure) == (FAILED, "port_in_use")
    assert r.result.evidence[0]["value"] == holder and r.result.evidence[0]["since"] == T0
    assert [o["kind"] for o in r.record] == ["started", "port_conflict"]
    assert r.record[1] == {"kind": "port_conflict", "t": T0, "detail": holder}


@dataclass
class Root:
    """A launched server as the heartbeat asks it: its root's exit and the daemon it may have left serving."""

    code: int | None
    daemon: list[Any] = field(default_factory=list)

    def poll(self) -> int | None:
        return self.code

    def daemon_serving(self) -> list[Any]:
        return self.daemon


@pytest.mark.parametrize(("server", "beats"), [(None, True), (Root(None), True), (Root(0, ["daemon"]), True),
                                                (Root(0), False), (Root(1), False)],
                         ids=["watched", "alive", "daemonized", "exited", "failed"])
def test_the_heartbeat_goes_on_while_the_server_or_the_daemon_it_left_lives(server: Root | None, beats: bool) -> None:
    rep = Recorder()
    s = Session(Config(pid=PID, history=HistoryConfig(enabled=False)), get_profile("generic"), rep)
    s.sources.server = server  # type: ignore[assignment]
    s._heartbeat()
    assert heartbeats(rep) == (1 if beats else 0)


def test_a_deployment_is_one_key_when_recorded_and_when_estimated_masked_by_the_sessions_own_secrets(
        tmp_path: Path) -> None:
    """The watched command carries the URL's password, which only the session's redactor knows: the start is
    recorded and estimated under the same masked key; another command is another deployment."""
    url = "http://ops:pa55w0rd-xyz@127.0.0.1:8000"
    ours = ["python", "-m", "sglang.launch_server", "--model-path", "/models/a", "--tag", "pa55w0rd-xyz"]
    other = [*ours[:-1], "other"]
    for ready in (100.0, 110.0):
        watched_start(tmp_path, ready, watched_command=ours, probe=ProbeConfig(url=url))
    another = watched_start(tmp_path, 120.0, watched_command=other, probe=ProbeConfig(url=url))
    assert not any(m.startswith("history:") for m in another.reporter.messages())
    r = watched_start(tmp_path, 130.0, watched_command=ours, probe=ProbeConfig(url=url))
    assert [m for m in r.reporter.messages() if m.startswith("history:")] == [
        "history: ETA from 2 untyped starts: 105.0s"]
    assert r.session.history is not None and r.session.history.busy_timeout == 1.0  # stopping waits 1 s at most
    assert "pa55w0rd-xyz" not in (tmp_path / "h.db").read_bytes().decode("latin-1")


def test_the_result_names_the_servers_log_file_the_requests_made_and_no_command_when_watched(tmp_path: Path) -> None:
    r = run([generation(T0 + 1)], server_log=tmp_path / "server.log", requests={"generation": 3})
    assert r.result.server_log == str(tmp_path / "server.log") and r.result.requests == {"generation": 3}
    assert r.result.command is None
    plain = run([generation(T0 + 1)])
    assert plain.result.server_log is None


class Chosen:
    """The policy after the verdict, as chosen: it keeps the context it was given."""

    def __init__(self) -> None:
        self.ctx: Any = None

    def apply(self, ctx: Any, result: RunResult) -> RunResult:
        self.ctx = ctx
        return result


@pytest.mark.parametrize("log_file", [True, False], ids=["log-file", "pipes"])
def test_the_policy_after_the_verdict_gets_the_sessions_server_clock_queue_log_and_oom_evidence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_file: bool) -> None:
    r = run([generation(T0 + 1)])
    s, chosen = r.session, Chosen()
    monkeypatch.setattr(session_module.policy, "choose", lambda cfg, result: chosen)
    s.sources.server = Root(None)  # type: ignore[assignment]
    s.sources.server_log = tmp_path / "server.log" if log_file else None
    assert s._after_verdict(r.result) is r.result
    ctx = chosen.ctx
    assert ctx.server is s.sources.server and ctx.cfg is s.cfg and ctx.q is s.q and ctx.clock is s.clock
    assert ctx.say == s.reporter.message and ctx.on_serving == s.reporter.summary and ctx.serving == s.serving_watch
    assert ctx.oom == s.sources.oom_evidence
    assert ctx.server_log == (str(tmp_path / "server.log") if log_file else None)


def test_serving_changes_are_recorded_only_for_a_run_of_the_history_and_a_locked_history_never_stops_them(
        tmp_path: Path) -> None:
    r = watched_start(tmp_path, 100.0, probe=ProbeConfig(url="http://ops:pa55w0rd-xyz@127.0.0.1:8000"))
    s, run_id = r.session, r.result.history_run
    assert s.history is not None and run_id is not None
    assert s._record_serving(dataclasses.replace(r.result, history_run=None, history_uid=None)) is None  # no run
    record = s._record_serving(r.result)
    assert record is not None
    record(ServingStatus("serving", "generation ok, retried with pa55w0rd-xyz", T0 + 5, True, True))
    assert History(tmp_path / "h.db").serving_changes(run_id) == [  # masked by the session's own secrets
        (T0 + 5, "serving", "generation ok, retried with ***")]
    s.history.set_busy_timeout(0.05)
    other = sqlite3.connect(tmp_path / "h.db", isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")  # another writer holds the history
        record(ServingStatus("not_serving", "timeout", T0 + 9, False, True))  # no error: the checks go on
    finally:
        other.close()


def test_the_verdict_is_told_once_as_judged_and_the_summary_is_the_last_word() -> None:
    r = run([generation(T0 + 1)])
    verdicts = [result for name, result in r.reporter.calls if name == "verdict"]
    assert len(verdicts) == 1 and verdicts[0].verdict == READY and verdicts[0].ready_at == T0 + 1
    assert r.reporter.calls[-1] == ("summary", r.result)


def test_the_checks_after_ready_ask_for_the_model_the_server_lists_with_the_sessions_profile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[Any, ...]] = []

    def checks(cfg: Config, profile: EngineProfile, model: str | None, say: Callable[[str], None],
               server: Any = None) -> dict[str, Any]:
        asked.append((cfg, profile.name, model))
        say("warm-up: done")
        return {"warmup": {"n": 1, "errors": 0}}

    monkeypatch.setattr(session_module, "post_ready_checks", checks)
    monkeypatch.setattr(ScriptedSources, "model", property(lambda self: "served/model-7b"))
    r = run([generation(T0 + 1)], engine="sglang", after=AfterReadyConfig(warmup=1))
    assert asked == [(r.session.cfg, "sglang", "served/model-7b")]
    assert r.result.warmup == {"n": 1, "errors": 0} and "warm-up: done" in r.reporter.messages()


def test_the_weights_filesystem_of_a_path_gone_is_no_disk_figure_and_no_error(tmp_path: Path) -> None:
    weights = WeightsTotal(T0 + 0.5, bytes=1000, files=1, path=str(tmp_path / "gone"), resident=0)
    r = run([weights, generation(T0 + 1)], history=tmp_path / "h.db")
    assert r.result.verdict == READY and r.result.anatomy is not None
    assert r.result.anatomy["cache"]["device_rate"] is None


def test_the_cold_start_of_a_watched_process_counts_from_its_own_birth_not_firstlights(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        birth = psutil.Process(child.pid).create_time()
        assert birth != born()
        r = run([generation(birth + 100.0)], pid=child.pid, t0=birth + 99.0, history=tmp_path / "h.db")
        assert r.result.cold_start_s == pytest.approx(100.0, abs=1e-6)
    finally:
        child.kill()
        child.wait(CHECK_S)


def test_the_known_answer_looked_up_keeps_this_starts_clock_not_the_time_it_was_recorded(tmp_path: Path) -> None:
    """The known answer was recorded at the wall clock of an earlier run, long after this start's scripted clock:
    fed at that time it would move the judge's now past the stall clock (hung); it is fed at this start's now."""
    first = run([generation(T0 + 5.0)], history=tmp_path / "h.db")
    assert first.result.verdict == "ready" and (first.result.known_answer or {}).get("outcome") == "recorded"
    again = run([generation(T0 + 5.0)], history=tmp_path / "h.db", stall_timeout=30.0)
    assert again.result.verdict == "ready", again.result.evidence
    assert again.result.ended_at - again.result.started_at < 30.0
    assert (again.result.known_answer or {}).get("outcome") == "same"


def test_the_history_eta_is_said_once_however_often_it_is_looked_up(tmp_path: Path) -> None:
    watched_start(tmp_path, 100.0)
    r = watched_start(tmp_path, 110.0)
    r.session.expectations.look(r.session.profile)  # again once this start is recorded: a new estimate, said
    told = [m for m in r.reporter.messages() if m.startswith("history:")]
    r.session.expectations.look(r.session.profile)  # again (the engine learnt, the page cache known): not said
    assert [m for m in r.reporter.messages() if m.startswith("history:")] == told
    assert told == ["history: ETA from 1 untyped start: 100.0s", "history: ETA from 2 untyped starts: 105.0s"]


def test_weights_of_no_bytes_are_no_start_type_and_no_error(tmp_path: Path) -> None:
    watched_start(tmp_path, 100.0)
    t = born() + 100.0
    empty = WeightsTotal(t - 0.5, bytes=0, files=0, path=str(tmp_path), resident=0)
    r = run([empty, generation(t)], pid=os.getpid(), t0=t - 1, history=tmp_path / "h.db")
    assert r.result.verdict == READY
    said = [m for m in r.reporter.messages() if m.startswith("history:")]
    assert said == ["history: ETA from 1 untyped start: 100.0s"]
