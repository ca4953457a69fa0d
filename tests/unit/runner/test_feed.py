"""runner/feed.py, the observation path of one watch, in process: what comes in (secrets out, one queue, the
first stop signal kept) and what goes out for each observation (the record in the order judged, the reporters,
the sources told what a step learnt, a port's owner judged before what it leads to)."""

from __future__ import annotations

import io
import signal
from typing import Any

from firstlight import settings
from firstlight.assessment import Assessment, Event
from firstlight.budgets import Budgets
from firstlight.config import Config, HistoryConfig, JudgeConfig
from firstlight.drive import Driver
from firstlight.engines import get_profile
from firstlight.engines.profile import Endpoints
from firstlight.probes.loop import EngineIdentified
from firstlight.redact import Redactor
from firstlight.report.base import QuietReporter
from firstlight.runner.expectations import Expectations
from firstlight.runner.feed import Feed
from firstlight.runner.guard import RecordFile
from firstlight.timeline import (
    Interrupted,
    KnownAnswer,
    Level,
    LogLine,
    Observation,
    PortConflict,
    Probe,
    ProcessSample,
    SourceNote,
    WeightsTotal,
)
from firstlight.vocab import HUNG

T0 = 1_000_000.0


class Told(QuietReporter):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def event(self, ev: Event, a: Assessment) -> None:
        self.calls.append(("event", ev.message))
        assert isinstance(a, Assessment)  # with the assessment it is part of

    def status(self, a: Assessment) -> None:
        self.calls.append(("status", a.verdict))

    def observe(self, obs: Observation) -> None:
        self.calls.append(("observe", type(obs).__name__))

    def server_line(self, stream: str, text: str) -> None:
        self.calls.append(("line", (stream, text)))


class Sources:
    """What the feed asks of the sources, recorded."""

    def __init__(self, port_owner: str | None = None, held: list[Observation] | None = None) -> None:
        self.port_owner, self.held = port_owner, held or []
        self.asked: list[Any] = []

    def check_port_owner(self) -> str | None:
        self.asked.append("port_owner")
        return self.port_owner

    def new_log_line(self) -> None:
        self.asked.append("nudge")

    def use_endpoints(self, endpoints: Endpoints) -> None:
        self.asked.append(("endpoints", endpoints))

    def settle_logs(self) -> None:
        self.asked.append("settle")


def feed(engine: str = "generic", sources: Sources | None = None, record: io.StringIO | None = None,
         secret: str | None = None) -> tuple[Feed, Told, Sources]:
    cfg = Config(engine=None if engine == "generic" else engine, history=HistoryConfig(enabled=False))
    profile = get_profile(engine)
    redactor = Redactor([secret] if secret else [])
    told, src = Told(), sources or Sources()
    plan = settings.plan(cfg, profile, redactor=redactor)
    f = Feed(redactor, told, RecordFile(record, told.message) if record is not None else None,
             Expectations(cfg, plan, told.message), clock=lambda: T0 + 5)
    f.sources = src  # type: ignore[assignment]
    f.driver = Driver(cfg.judge, profile, T0, detect=engine == "generic")
    return f, told, src


def test_what_comes_in_loses_its_secrets_before_the_queue():
    f, told, _ = feed(secret="hunter2-token")
    f.put(LogLine(T0, "auth with hunter2-token failed", "stdout"))
    f.echo("stderr", "key=hunter2-token")
    (queued,) = [f.q.get_nowait()]
    assert isinstance(queued, LogLine) and "hunter2-token" not in queued.text
    assert told.calls[-1][0] == "line" and "hunter2-token" not in told.calls[-1][1][1]


def test_the_first_stop_signal_is_kept_and_each_one_is_queued():
    f, _, _ = feed()
    f.interrupt(signal.SIGTERM, None)
    f.interrupt(signal.SIGINT, None)
    assert f.stop_signal == Interrupted(T0 + 5, "SIGTERM")
    assert [f.q.get_nowait(), f.q.get_nowait()] == [Interrupted(T0 + 5, "SIGTERM"), Interrupted(T0 + 5, "SIGINT")]


def test_each_observation_is_recorded_in_the_order_judged_and_told():
    out = io.StringIO()
    f, told, src = feed(record=out)
    f.feed(SourceNote(T0 + 1, "process", "a note"))
    f.feed(LogLine(T0 + 2, "loading the model", "stdout"))
    f.feed(LogLine(T0 + 3, 'INFO:     127.0.0.1:5555 - "GET /health HTTP/1.1" 200 OK', "stdout"))
    f.feed(LogLine(T0 + 4, "model loaded", "stdout"))
    assert [line.split('"kind": "')[1].split('"')[0] for line in out.getvalue().splitlines()] == [
        "note", "log", "log", "log"]
    assert [c for c in told.calls if c[0] == "observe"] == [("observe", "SourceNote"), ("observe", "LogLine"),
                                                           ("observe", "LogLine"), ("observe", "LogLine")]
    assert src.asked == ["nudge", "nudge"]  # a log line nudges the probes; an access line of their own does not


def test_an_open_port_has_its_owner_checked_and_a_conflict_is_judged_before_the_probe():
    out = io.StringIO()
    f, _, src = feed(sources=Sources(port_owner="pid 42 (nginx) listens on port 8000"), record=out)
    f.feed(Probe(T0 + 1, Level.PORT, True, "port open"))
    kinds = [line.split('"kind": "')[1].split('"')[0] for line in out.getvalue().splitlines()]
    assert src.asked[0] == "port_owner" and kinds[0] == "port_conflict"
    assert "pid 42 (nginx) listens on port 8000" in out.getvalue().splitlines()[0]
    assert f.driver is not None and f.driver.judge.port_conflict is not None
    f2, _, src2 = feed()
    f2.feed(Probe(T0 + 1, Level.PORT, False, "refused"))
    assert "port_owner" not in src2.asked  # a closed port has no owner to ask about


def test_an_engine_identified_by_its_endpoints_changes_what_is_probed_and_is_not_judged():
    out = io.StringIO()
    f, told, src = feed(record=out)
    f.feed(EngineIdentified(T0 + 1, "sglang", "GET /server_info -> 200"))
    assert f.driver is not None and f.driver.profile.name == "sglang"
    assert src.asked == [("endpoints", get_profile("sglang").endpoints)]
    assert out.getvalue() == ""  # for the run, not the judge's timeline
    assert any(c[0] == "event" and "engine identified by its endpoints" in c[1] for c in told.calls), told.calls
    f.feed(EngineIdentified(T0 + 2, "vllm", "GET /version -> 200"))  # learnt once: a second one changes nothing
    assert f.driver.profile.name == "sglang" and len(src.asked) == 1


def test_assess_tells_the_status_and_settling_drains_what_the_logs_held():
    f, told, src = feed()
    a = f.assess()
    assert told.calls[-1] == ("status", a.verdict)
    f.put(LogLine(T0 + 1, "last words", "stdout"))
    assert [type(o).__name__ for o in f.settle_logs()] == ["LogLine"] and src.asked == ["settle"]
    assert f.q.empty()


def test_a_port_conflict_fed_directly_is_recorded_once():
    out = io.StringIO()
    f, _, _ = feed(record=out)
    f.feed(PortConflict(T0, "pid 1 listens"))
    assert out.getvalue().count("port_conflict") == 1


class Expect:
    """Expectations as the feed asks them: what is looked up, and when (a fixed estimate, a known answer)."""

    def __init__(self, known: Observation | None = None) -> None:
        self.looked: list[str] = []
        self.asked: list[tuple[str, float]] = []
        self.expected_total_s: float | None = None
        self.budgets = None
        self.weights = None
        self.known = known

    def look(self, profile: Any) -> None:
        self.looked.append(profile.name)
        self.expected_total_s = 123.0
        self.budgets = Budgets(start_type="cold", starts=2)  # type: ignore[assignment]

    def known_answer(self, profile: Any, answers: Any, t: float) -> Observation | None:
        assert answers is not None  # the judge's, to see whether it holds one already
        self.asked.append((profile.name, t))
        return self.known


def _expecting(known: Observation | None = None, record: io.StringIO | None = None) -> tuple[Feed, Expect, Told]:
    f, told, _ = feed(record=record)
    expect = f.expectations = Expect(known)  # type: ignore[assignment]
    return f, expect, told


def test_an_engine_learnt_looks_up_the_history_again_by_its_name_and_its_known_answer():
    out = io.StringIO()
    known = KnownAnswer(T0 + 1, run=3, recorded_at=T0 - 100, text=" Paris")
    f, expect, _ = _expecting(known, record=out)
    f.feed(EngineIdentified(T0 + 1, "sglang", "GET /server_info -> 200"))
    assert expect.looked == ["sglang"] and expect.asked == [("sglang", T0 + 1)]
    assert f.driver is not None and f.driver.judge.progress_tracker.expected_total_s == 123.0
    assert f.driver.judge.phases.budgets is expect.budgets is not None
    assert '"kind": "known_answer"' in out.getvalue()  # the known answer is judged and recorded


def test_the_weights_page_cache_known_once_looks_up_the_history_once():
    f, expect, _ = _expecting()
    weights = WeightsTotal(T0 + 1, bytes=4 << 30, files=4, path="/models/m", resident=0)
    f.feed(weights)
    f.feed(WeightsTotal(T0 + 2, bytes=4 << 30, files=4, path="/models/m", resident=0))
    assert expect.looked == ["generic"] and expect.weights is not None and expect.asked == []
    assert f.driver is not None and f.driver.judge.progress_tracker.expected_total_s == 123.0


def test_the_servers_own_lines_are_echoed_with_their_stream():
    f, told, _ = feed()
    f.echo("stderr", "a line")
    assert told.calls[-1] == ("line", ("stderr", "a line"))


def test_an_open_port_nobody_else_holds_is_no_conflict():
    out = io.StringIO()
    f, _, src = feed(record=out)
    f.feed(Probe(T0 + 1, Level.PORT, True, "port open"))
    assert src.asked == ["port_owner"] and "port_conflict" not in out.getvalue()
    assert f.driver is not None and f.driver.judge.port_conflict is None
    f.feed(PortConflict(T0 + 2, "pid 7 (x) listens on port 8000"))
    busy = Sources(port_owner="pid 9 (y) listens on port 8000")
    f.sources = busy  # type: ignore[assignment]
    f.feed(Probe(T0 + 3, Level.PORT, True, "port open"))
    assert out.getvalue().count("port_conflict") == 1  # the judge holds one already: not judged twice


def test_a_backlog_holds_the_assessment_at_the_oldest_waiting_observations_time():
    """A pump held up (a slow step, a starved machine) with a ready line still queued: the silence is judged up to
    that line, not to now; once the queue is empty it is judged to now again."""
    now = [T0 + 60]
    f, _, _ = feed()
    f.clock = lambda: now[0]
    f.driver = Driver(JudgeConfig(stall_timeout=3), get_profile("generic"), T0)
    f.feed(ProcessSample(T0, True, cpu_seconds=1.0))
    f.feed(Probe(T0, Level.PORT, True, "port reached"))
    f.put(LogLine(T0 + 1, "loading", "stdout"))
    held = f.assess()
    assert held.verdict != HUNG and held.t == T0 + 1
    f.q.get_nowait()
    late = f.assess()
    assert late.verdict == HUNG and late.t == T0 + 60
    now[0] = T0 + 30  # a clock read before the last assessment's time never moves it back
    f.put(LogLine(T0 + 2, "loading", "stdout"))
    assert f.assess().t == T0 + 60
