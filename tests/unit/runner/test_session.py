"""No stop signal is lost, and stderr nobody reads never blocks the run (issue 20).

- A real SIGTERM delivered the moment the READY probe's result is queued (the race the field saw: the judge,
  READY already final, ignored it and firstlight supervised on until a second SIGTERM).
- stderr into a real pipe that nobody reads and that is already full: the verdict, ``/readyz`` and a stop
  signal do not wait for it, and what was dropped is counted.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_signals.py``.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from firstlight.assessment import Assessment, Event
from firstlight.config import Config, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.engines import get_profile
from firstlight.engines.profile import Endpoints, EngineProfile
from firstlight.probes.loop import EngineIdentified
from firstlight.report import series
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.runner import pump
from firstlight.runner.output import BoundedOutput
from firstlight.runner.session import Outcome, Session
from firstlight.runner.sources import Echo, Sink, Sources
from firstlight.timeline import Interrupted, Level, LogLine, Observation, Probe, ProcessSample, from_dict
from firstlight.vocab import EXIT_CODES, FAILED, HUNG, READY, STARTING
from tests.support.common import wait_for
from tests.support.hostile_signals import _full_pipe

CHECK_S = 60  # far above the rule's seconds: reached only when the defect is back


def test_a_bounded_output_drops_and_counts_while_its_reader_stalls_and_says_so_after(tmp_path: Path):
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


Step = Observation | Quiet


class ScriptedSources(Sources):
    """The sources' part of the session with a script for a server: ``start`` plays the observations on the sink
    from a thread of its own (as the samplers, readers and probes do), moving the clock to each one's time;
    ``settle_logs`` delivers what the exited process's pipes still held. What the session asks of the sources
    (the port's owner, the engine's endpoints, a log line's nudge) is recorded."""

    def __init__(self, cfg: Config, sink: Sink, echo: Echo, identify: bool, clock: Clock,
                 backlog: Callable[[], int], script: list[Step], left_in_pipe: list[LogLine],
                 port_holder: str | None) -> None:
        super().__init__(cfg, sink, echo, identify, clock, backlog)
        self.scripted_clock, self.script, self.left_in_pipe = clock, script, left_in_pipe
        self.port_holder = port_holder
        self.endpoints: list[Endpoints] = []
        self.nudges = 0
        self.port_checks = 0
        self.error: BaseException | None = None
        self.stopped = False

    def start(self) -> str | None:
        threading.Thread(target=self._play, name="scripted-source", daemon=True).start()
        return None

    def _play(self) -> None:
        try:
            for step in self.script:
                if isinstance(step, Quiet):
                    self._wait_taken(step)
                    self.scripted_clock.t = step.until
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

    def events(self) -> list[tuple[str, str]]:
        return [(ev.type, ev.message) for name, (ev, _) in self._of("event")]

    def statuses(self) -> list[Assessment]:
        return [a for _, a in self._of("status")]

    def _of(self, name: str) -> list[tuple[str, Any]]:
        return [c for c in list(self.calls) if c[0] == name]


class ScriptedSession(Session):
    def __init__(self, cfg: Config, profile: EngineProfile, reporter: Recorder, clock: Clock, script: list[Step],
                 left_in_pipe: list[LogLine], port_holder: str | None, record: io.StringIO | None) -> None:
        super().__init__(cfg, profile, reporter, record=record, clock=clock)
        self.sources = ScriptedSources(cfg, self._sink, self._echo, self.detect, clock, self.q.qsize, script,
                                       left_in_pipe, port_holder)


@dataclass
class Run:
    outcome: Outcome
    reporter: Recorder
    sources: ScriptedSources
    session: ScriptedSession
    record: list[dict[str, Any]]

    @property
    def result(self) -> RunResult:
        return self.outcome.result


def run(script: list[Step], pid: int | None = PID, engine: str | None = None, left_in_pipe: list[LogLine] | None = None,
        port_holder: str | None = None, stall_timeout: float = 120.0,
        settled: Callable[[Recorder], bool] | None = None) -> Run:
    cfg = Config(pid=pid, engine=engine, probe=ProbeConfig(url=URL), history=HistoryConfig(enabled=False),
                 judge=JudgeConfig(timeout=3600, stall_timeout=stall_timeout), echo_server_output=False)
    reporter, record = Recorder(), io.StringIO()
    if settled is not None:
        script = [Quiet(s.until, lambda: settled(reporter)) if isinstance(s, Quiet) else s for s in script]
    session = ScriptedSession(cfg, get_profile(engine or "generic"), reporter, Clock(T0), script,
                              left_in_pipe or [], port_holder, record)
    outcome = session.run()
    sources = session.sources
    assert isinstance(sources, ScriptedSources)
    assert sources.error is None, sources.error
    assert sources.stopped  # whatever the verdict, the sources are stopped
    return Run(outcome, reporter, sources, session, [json.loads(r) for r in record.getvalue().splitlines()])


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
    assert names[0] == "started" and names[-2:] == ["verdict", "summary"]
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
    return rep.assessment.verdict, rep.assessment.level.label, tuple(rep.judge.phases_dicts())


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
