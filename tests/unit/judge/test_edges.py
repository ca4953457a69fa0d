"""Rules of the judge pinned exactly, found by mutation testing (scripts/mutation.sh on firstlight/judge.py).

Each test states one rule and asserts its observable result in full (event kinds and order, evidence strings,
level_since / first_generation contents, verdict and failure fields), so that a changed comparison, a dropped
argument or a renamed key changes a result. Pure: recorded observations in, verdicts and events out.
"""

from __future__ import annotations

import dataclasses

from firstlight.assessment import Event, Evidence
from firstlight.config import JudgeConfig
from firstlight.deaths import KILLED_HINT, OOM_HOST_HINT, crash_hint
from firstlight.engines import get_profile
from firstlight.interpret import DEATH_LINES
from firstlight.judge import STALL_HINTS, Judge
from firstlight.timeline import (
    GpuDevice,
    GpuProcess,
    GpuSample,
    Interrupted,
    Level,
    LogLine,
    Observation,
    PortConflict,
    Probe,
    ProcessSample,
    ProcInfo,
    SourceNote,
    Started,
    WeightsTotal,
)
from tests.support.judge import RULES, T0, proc
from tests.support.judge_rules import _judge

VLLM = get_profile("vllm")  # the port opens only once the model can serve; /health does not lie
OLLAMA = get_profile("ollama")  # "/" answers before any model loads
GENERIC = get_profile("generic")  # listens before ready


def _feed(j: Judge, *obs) -> list[Event]:
    events: list[Event] = []
    for o in obs:
        events += j.feed(o)
    return events


def _ok(t: float, level: Level, detail: str = "", latency: float | None = 0.1, text: str | None = None) -> Probe:
    return Probe(T0 + t, level, True, detail, latency_s=latency, text=text)


def _fail(t: float, level: Level, detail: str = "", latency: float | None = None, transient: bool = True) -> Probe:
    return Probe(T0 + t, level, False, detail, latency_s=latency, transient=transient)


def _level(t: float, label: str, detail: str) -> Event:
    return Event(T0 + t, "level", label, {"detail": detail})


def _phase(t: float, name: str, source: str = "probe", line: int | None = None) -> Event:
    return Event(T0 + t, "phase", name, {"source": source, "line": line})


# -- the readiness ladder (Judge._on_probe) -------------------------------------------------------------------
def test_a_probe_reaching_a_level_marks_every_level_below_it_once_in_order():
    """An ok probe marks each level between the current one and its own as reached, lowest first, once."""
    j = _judge(VLLM)
    _feed(j, proc(1))
    events = j.feed(_ok(2, Level.HTTP, "GET / -> 404"))
    assert events == [_level(2, "port", "GET / -> 404"), _level(2, "http", "GET / -> 404"),
                      _phase(2, "http_listening")]
    assert j.ladder.level == Level.HTTP
    assert j.ladder.since == {Level.PROCESS: T0 + 1, Level.PORT: T0 + 2, Level.HTTP: T0 + 2}
    assert (j.marks.last_strong.t, j.marks.last_strong.signal, j.marks.last_strong.value) == (
        T0 + 2, "probe:http", "http reached")
    assert [(p.name, p.start, p.source) for p in j.phases.spans] == [("process_start", T0, "start"),
                                                              ("http_listening", T0 + 2, "probe")]
    # the same level again: nothing new
    assert j.feed(_ok(3, Level.HTTP, "GET / -> 404")) == []
    assert j.ladder.since == {Level.PROCESS: T0 + 1, Level.PORT: T0 + 2, Level.HTTP: T0 + 2}


def test_without_a_process_sample_a_probe_marks_the_ladder_from_process_up():
    """Level NONE is never 'reached': a first probe marks the levels from PROCESS up."""
    j = _judge(VLLM)
    events = j.feed(_ok(2, Level.PORT, "connect ok"))
    assert events == [_level(2, "process", "connect ok"), _level(2, "port", "connect ok"),
                      _phase(2, "http_listening")]
    assert j.ladder.since == {Level.PROCESS: T0 + 2, Level.PORT: T0 + 2}


def test_a_level_regained_after_a_loss_keeps_its_first_time():
    """level_since records when a level was first reached; regaining it after a loss emits it again but keeps
    the first time."""
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.PORT, "up"))
    assert j.feed(_fail(3, Level.PORT, "refused")) == [Event(T0 + 3, "lost", "port", {"detail": "refused"})]
    assert j.ladder.level == Level.PROCESS
    assert j.feed(_ok(4, Level.PORT, "up again")) == []  # already in level_since: no second "level" event
    assert j.ladder.level == Level.PORT
    assert j.ladder.since == {Level.PROCESS: T0 + 1, Level.PORT: T0 + 2}


def test_a_first_generation_reaches_every_level_and_the_ready_phase():
    """An ok generation probe marks all the levels, records the first generation and enters READY."""
    j = _judge(VLLM)
    _feed(j, proc(1))
    events = j.feed(_ok(3, Level.GENERATION, "POST -> 200", latency=0.5, text=" Paris"))
    assert events == [_level(3, lv, "POST -> 200") for lv in ("port", "http", "health", "models", "generation")] + [
        _phase(3, "ready")]
    assert j.first_generation == {"latency_s": 0.5, "text": " Paris", "meanwhile": None}
    assert j.ready_at == T0 + 3
    assert (j.phases.spans[-1].name, j.phases.spans[-1].start, j.phases.spans[-1].source) == ("ready", T0 + 3, "probe")
    a = j.assess(T0 + 4)
    assert a.verdict == "ready"
    assert a.evidence == [Evidence("probe:generation", "generation returned ' Paris' in 0.50s", T0 + 3)]


def test_a_healthy_health_probe_enters_warmup():
    """The engine's health endpoint answering OK (when it does not lie while loading) means warmup."""
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.HTTP, "GET / -> 404"))
    events = j.feed(_ok(5, Level.HEALTH, "GET /health -> 200"))
    assert events == [_level(5, "health", "GET /health -> 200"), _phase(5, "warmup")]
    assert [(p.name, p.start, p.end, p.source) for p in j.phases.spans] == [
        ("process_start", T0, T0 + 2, "start"), ("http_listening", T0 + 2, T0 + 5, "probe"),
        ("warmup", T0 + 5, None, "probe")]


def test_a_health_probe_is_not_warmup_once_the_engine_said_ready():
    """After the engine's ready line, the health probe moves no phase (the log already did)."""
    j = _judge(VLLM)
    _feed(j, proc(1), LogLine(T0 + 2, "Application startup complete.", "stderr", 7))
    assert j.engine_ready is not None
    events = j.feed(_ok(3, Level.HEALTH, "GET /health -> 200"))
    assert [e for e in events if e.type == "phase"] == []


def test_a_health_endpoint_that_lies_while_loading_is_not_warmup():
    """Ollama's "/" says OK before any model loads: reaching HEALTH there is not a phase."""
    j = _judge(OLLAMA)
    _feed(j, proc(1))
    events = j.feed(_ok(2, Level.HEALTH, "GET / -> 200"))
    assert [e.type for e in events] == ["level", "level", "level"]
    assert [p.name for p in j.phases.spans] == ["process_start"]


def test_an_open_port_is_http_listening_only_where_the_port_opens_late():
    """PORT/HTTP reached is the http_listening phase only for engines whose port opens when ready."""
    j = _judge(GENERIC)  # listens before ready: an open port says nothing about the phase
    _feed(j, proc(1))
    assert j.feed(_ok(2, Level.PORT, "connect ok")) == [_level(2, "port", "connect ok")]
    assert j.feed(_ok(3, Level.MODELS, "GET /v1/models -> 200")) == [
        _level(3, lv, "GET /v1/models -> 200") for lv in ("http", "health", "models")]  # MODELS: no phase
    j = _judge(VLLM)  # a MODELS probe is neither PORT nor HTTP: no http_listening from it
    _feed(j, proc(1))
    events = j.feed(_ok(2, Level.MODELS, "GET /v1/models -> 200"))
    assert [e.type for e in events] == ["level"] * 4


def test_a_probe_never_moves_the_phase_backwards():
    """Once in warmup, a later PORT probe does not go back to http_listening."""
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.HEALTH, "ok"), _fail(3, Level.PORT, "refused"))
    assert j.feed(_ok(4, Level.PORT, "ok")) == []
    assert [p.name for p in j.phases.spans] == ["process_start", "warmup"]


# -- a failed rung ---------------------------------------------------------------------------------------------
def test_a_failed_rung_at_the_current_level_is_lost_and_drops_one_level():
    """A failed probe at or below the reached level emits 'lost' and drops the level below the failed rung."""
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.MODELS, "ok"))
    failed = _fail(3, Level.MODELS, "GET /v1/models -> 503")
    assert j.feed(failed) == [Event(T0 + 3, "lost", "models", {"detail": "GET /v1/models -> 503"})]
    assert j.ladder.level == Level.HEALTH
    assert j.ladder.last_failure is failed
    a = j.assess(T0 + 4)
    assert Evidence("probe:models", "GET /v1/models -> 503", T0 + 3) in a.evidence


def test_a_failed_rung_above_the_reached_level_is_not_a_loss():
    """A probe failing above the level reached (a generation not yet answered) loses nothing."""
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.HTTP, "ok"))
    assert j.feed(_fail(3, Level.GENERATION, "POST -> 503")) == []
    assert j.ladder.level == Level.HTTP


def test_nothing_is_lost_after_ready():
    """Once READY, a failed probe is not a 'lost' level (the verdict stands)."""
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.GENERATION, "ok", text="x"))
    assert j.feed(_fail(3, Level.PORT, "refused")) == []
    assert j.ladder.level == Level.GENERATION


# -- slow generations (activity_during and the "meanwhile" note) -----------------------------------------------
def _busy_server(j: Judge) -> None:
    """From t=10 to t=20: one core busy, GPUs at 40 % then 60 %, log lines at 9 (before), 10, 15 and 20."""
    _feed(j, LogLine(T0 + 9, "before the probe", "stderr", 1), proc(10, cpu=0.0),
          LogLine(T0 + 10, "at the start", "stderr", 2),
          GpuSample(T0 + 12, (GpuDevice(0, "H100", 1 << 30, 80 << 30, 40.0),)),
          LogLine(T0 + 15, "meanwhile", "stderr", 3),
          GpuSample(T0 + 18, (GpuDevice(0, "H100", 1 << 30, 80 << 30, 60.0),)),
          proc(20, cpu=10.0), LogLine(T0 + 20, "at the end", "stderr", 4))


MEANWHILE = "CPU 100% of a core, GPU utilisation 50%, 3 log lines"


def test_a_slow_unanswered_generation_says_what_the_server_did_meanwhile():
    """A transient generation failure in flight >= 5 s gets a note with the CPU, GPU and log lines of its window
    (both ends included)."""
    j = _judge(VLLM)
    _busy_server(j)
    events = j.feed(_fail(20, Level.GENERATION, "POST timed out", latency=10.0))
    assert events == [Event(T0 + 20, "note", f"generation not answered after 10s; meanwhile the server: {MEANWHILE}")]


def test_a_slow_first_generation_records_what_the_server_did_meanwhile():
    """The first generation records its latency, text and the activity of its window."""
    j = _judge(VLLM)
    _busy_server(j)
    j.feed(_ok(20, Level.GENERATION, "POST -> 200", latency=10.0, text="ok"))
    assert j.first_generation == {"latency_s": 10.0, "text": "ok", "meanwhile": MEANWHILE}


def test_a_generation_in_flight_exactly_five_seconds_is_slow():
    """The slow-probe threshold (5 s) is inclusive."""
    j = _judge(VLLM)
    _feed(j, LogLine(T0 + 16, "working", "stderr", 1))
    events = j.feed(_fail(20, Level.GENERATION, "POST timed out", latency=5.0))
    assert events == [Event(T0 + 20, "note", "generation not answered after 5s; meanwhile the server: 1 log lines")]


def test_a_fast_generation_has_no_meanwhile():
    """Under 5 s in flight there is nothing to say about meanwhile: no note, first_generation meanwhile None."""
    j = _judge(VLLM)
    _feed(j, LogLine(T0 + 16, "working", "stderr", 1))
    assert j.feed(_fail(20, Level.GENERATION, "POST timed out", latency=4.9)) == []
    assert j.feed(_fail(21, Level.GENERATION, "POST -> 503", latency=None)) == []
    j.feed(_ok(22, Level.GENERATION, "POST -> 200", latency=4.9, text="ok"))
    assert j.first_generation == {"latency_s": 4.9, "text": "ok", "meanwhile": None}


def test_a_definitive_bad_answer_gets_no_meanwhile_note():
    """A non-transient bad answer counts toward bad_generation; it is not a slow probe to explain."""
    j = _judge(VLLM)
    _busy_server(j)
    bad = _fail(20, Level.GENERATION, "200 but empty", latency=10.0, transient=False)
    assert j.feed(bad) == []
    assert j.ladder.bad_answers == [bad]


# -- phases from log lines (PhaseTracker.enter, Judge._on_log) -------------------------------------------------
def test_a_log_line_enters_its_phase_once_with_its_line_number():
    """A phase line enters its phase (source log, the line's number); a second line of the same phase does not
    enter it again."""
    j = _judge(VLLM)
    events = _feed(j, LogLine(T0 + 1, "Starting to load model /m ...", "stderr", 12))
    assert events == [_phase(1, "weights_loading", "log", 12)]
    assert j.feed(LogLine(T0 + 2, "Loading model weights from /m", "stderr", 13)) == []
    assert [(p.name, p.start, p.end, p.source, p.line) for p in j.phases.spans] == [
        ("process_start", T0, T0 + 1, "start", None), ("weights_loading", T0 + 1, None, "log", 12)]


def test_every_final_log_line_counts_and_is_strong_progress():
    """Each final line counts in log_lines and is strong progress, signal 'log', its text the value."""
    j = _judge(VLLM)
    _feed(j, *(LogLine(T0 + i, f"line {i}", "stderr", i) for i in (1, 2, 3)))
    assert j.log.count == 3
    assert (j.marks.last_strong.t, j.marks.last_strong.signal, j.marks.last_strong.value) == (T0 + 3, "log", "line 3")
    a = j.assess(T0 + 4)
    assert a.evidence[0] == Evidence("log", "last progress: line 3", T0 + 3)


def test_a_progress_bar_redraw_does_not_take_a_line_number():
    """A non-final line (a \\r redraw) is not counted by the interpreter: the next final line keeps its number."""
    j = _judge(VLLM)
    _feed(j, LogLine(T0 + 1, "Downloading: 10%", "stderr", 0, final=False))
    events = j.feed(LogLine(T0 + 2, "Starting to load model /m ...", "stderr", 0))
    assert events == [_phase(2, "weights_loading", "log", 1)]


def test_a_progress_bar_redraw_that_is_the_first_sign_of_a_phase_enters_it():
    """A start joined at its checkpoint bar (the lines before it printed before the watch attached): the bar's
    first redraw enters weights_loading at its own time, not the later final line (whose phase the interpreter
    already holds, so it moves nothing)."""
    j = _judge(get_profile("sglang"))
    bar = "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:00,  1.00it/s]"
    events = j.feed(LogLine(T0 + 1, bar, "stderr", 0, final=False))
    assert events == [_phase(1, "weights_loading", "log", 1)]
    assert j.feed(LogLine(T0 + 2, bar.replace("25%", "100%").replace("1/4", "4/4"), "stderr", 0)) == []
    assert [p.name for p in j.phases.spans] == ["process_start", "weights_loading"]


def test_a_worker_is_ready_when_its_port_is_seen_listening_and_a_server_never_is():
    """llama.cpp's RPC server generates nothing itself: its port, seen listening in /proc, is its READY (the role the
    command reader gave the run's rules), with that evidence; for a server the same probe is only a level."""
    seen = "pid 7 listens on port 50052 (seen in /proc, no connection made)"
    w = _judge(get_profile("llamarpc"), dataclasses.replace(RULES, role="worker"))
    assert _feed(w, _fail(1, Level.PORT, "no process of pid 7's tree listens on port 50052")) == []
    assert w.assess(T0 + 1).verdict == "starting"
    events = _feed(w, _ok(2, Level.PORT, seen))
    assert events == [_level(2, "process", seen), _level(2, "port", seen), _phase(2, "ready")]
    a = w.assess(T0 + 2)
    assert (a.verdict, w.ready_at) == ("ready", T0 + 2)
    assert [(e.signal, e.value) for e in a.evidence] == [("probe:port", f"worker ready: {seen}")]
    server = _judge(get_profile("llamarpc"))  # the same engine told it is a server: its READY is a generation
    _feed(server, _ok(2, Level.PORT, "127.0.0.1:8080 accepts connections"))
    assert server.assess(T0 + 2).verdict == "starting" and server.ready_at is None


def test_a_headless_worker_is_ready_at_its_engines_line_and_its_connection_to_its_head_not_before():
    """A vLLM --headless node serves no port: connected to its head from its first second (the handshake comes
    before the weights), it is READY only once its engines said they are up, at the next check that sees the
    connection, with both as evidence; a held check never moves its phase to http_listening."""
    seen = "pid 7 is connected to its head 10.0.0.1:29501 (seen in /proc, no connection made)"
    w = _judge(get_profile("vllm"), dataclasses.replace(RULES, role="worker", head=("10.0.0.1",)))
    events = _feed(w, _ok(1, Level.PORT, seen))
    assert w.ready_at is None and "ready" not in [e.name for e in events if e.type == "phase"]
    assert w.assess(T0 + 1).phase == "process_start"  # not http_listening
    line = "init engine (profile, create kv cache, warmup model) took 41.20 s"
    events = _feed(w, LogLine(T0 + 2, line, "stderr", 9))
    assert [e.type for e in events] == ["engine_ready"] and w.ready_at is None
    assert _feed(w, _ok(3, Level.PORT, seen))[-1] == _phase(3, "ready")
    a = w.assess(T0 + 3)
    assert (a.verdict, w.ready_at) == ("ready", T0 + 3)
    assert [(e.signal, e.value) for e in a.evidence] == [("probe:port", f"worker ready: {seen}"),
                                                         ("log", f"line 9: {line}")]
    server = _judge(get_profile("vllm"))  # the head prints the same line long before its API serves
    _feed(server, LogLine(T0 + 2, line, "stderr", 9))
    assert server.engine_ready is None


# -- GPU samples (Judge._on_gpu) ---------------------------------------------------------------------------------
def _gpu(t: float, used: int, util: float = 0.0, pids: tuple[int, ...] = ()) -> GpuSample:
    return GpuSample(T0 + t, (GpuDevice(0, "H100", used, 80 << 30, util),),
                     tuple(GpuProcess(0, pid, 1 << 30, "python") for pid in pids))


def test_gpu_memory_moving_is_strong_progress_signal_gpu():
    """A GPU memory step is strong progress under the signal 'gpu', valued with the step."""
    j = _judge(VLLM)
    _feed(j, _gpu(1, 1 << 30), _gpu(2, 5 << 30))
    assert (j.marks.last_strong.t, j.marks.last_strong.signal, j.marks.last_strong.value) == (
        T0 + 2, "gpu", "GPU 0 memory 1.07 GB -> 5.37 GB")


def test_gpu_utilisation_alone_is_weak_progress_signal_gpu():
    """GPU utilisation is weak progress under the signal 'gpu'."""
    j = _judge(VLLM)
    _feed(j, _gpu(1, 1 << 30, util=97.0))
    assert j.marks.last_weak is not None
    assert (j.marks.last_weak.t, j.marks.last_weak.signal, j.marks.last_weak.value) == (
        T0 + 1, "gpu", "GPU 0 utilisation 97%")
    assert j.marks.last_strong.signal == "watch"


def test_a_gpu_held_by_a_process_outside_the_tree_is_a_warning_event():
    """A GPU process outside the server's tree is one warning event (with gpu and pid) and one warning."""
    j = _judge(VLLM)
    _feed(j, proc(1))
    events = j.feed(_gpu(2, 1 << 30, pids=(4242, 100)))
    value = "GPU 0 held by PID 4242 python (1.07 GB), outside the server's process tree"
    assert events == [Event(T0 + 2, "warning", value, {"gpu": 0, "pid": 4242})]
    assert j.tree.warnings == [Evidence("gpu", value, T0 + 2)]


def test_gpu_processes_of_the_tree_and_of_the_root_pid_are_not_foreign():
    """The tree is every pid seen in process samples plus the launched pid (even before a sample names it)."""
    j = _judge(VLLM)  # Started pid 100
    _feed(j, proc(1, procs=(ProcInfo(101, "worker", "sleeping", 0.0, 1 << 20, T0),)))
    assert j.feed(_gpu(2, 1 << 30, pids=(100, 101))) == []
    j = _judge(VLLM)
    _feed(j, proc(1, procs=(ProcInfo(100, "server", "sleeping", 0.0, 1 << 20, T0),
                            ProcInfo(101, "worker", "sleeping", 0.0, 1 << 20, T0))))
    assert j.feed(_gpu(2, 1 << 30, pids=(101,))) == []


def test_without_a_pid_or_a_process_tree_no_gpu_process_is_called_foreign():
    """Attached by URL only (no pid, no process samples): firstlight cannot tell whose GPU processes are."""
    j = Judge(RULES, VLLM, T0)
    j.feed(Started(T0, None, "http://x", "vllm", False))
    assert j.feed(_gpu(2, 1 << 30, pids=(4242,))) == []
    assert j.tree.warnings == []


# -- how the process died (Judge._exit_or_line, _death_cause, _tail_evidence) -----------------------------------
LOADING = LogLine(T0 + 0.5, "Starting to load model /m ...", "stderr", 9)  # vLLM: enters weights_loading
STEPS = [LogLine(T0 + 1 + i / 10, f"step {i}", "stderr", 10 + i) for i in range(4)]
TAIL = [Evidence("log", f"last line {10 + i}: step {i}", T0 + 1 + i / 10) for i in (1, 2, 3)]  # the last 3 only
FOREIGN = GpuSample(T0 + 1.5, (GpuDevice(0, "H100", 1 << 30, 80 << 30, 0.0),),
                    (GpuProcess(0, 4242, 1 << 30, "python"),))
FOREIGN_EV = Evidence("gpu", "GPU 0 held by PID 4242 python (1.07 GB), outside the server's process tree", T0 + 1.5)
STALL_RULES = JudgeConfig(timeout=600, stall_timeout=10, spin_timeout=900)
EXITED_HINT = "the server exited without a recognised error; read its last log lines"


def _died(exit_code: int | None, *extra, oom: tuple[str, ...] = (), now: float = 4):
    j = _judge(VLLM)
    _feed(j, proc(0.2), LOADING, *STEPS, FOREIGN, *extra,
          ProcessSample(T0 + 3, alive=False, exit_code=exit_code, oom=oom))
    return j.assess(T0 + now)


def _how(what: str) -> Evidence:
    return Evidence("process", f"server process {what} before serving, in phase weights_loading", T0 + 3)


def test_an_exit_without_a_recognised_cause_quotes_the_exit_the_last_three_lines_and_the_warnings():
    """A plain non-zero exit: failed/other, the exit with its phase, the last 3 log lines, then the warnings."""
    a = _died(3)
    assert (a.verdict, a.failure, a.hint, a.phase) == ("failed", "other", EXITED_HINT, "weights_loading")
    assert a.evidence == [_how("exited with code 3"), *TAIL, FOREIGN_EV]


def test_an_exit_of_a_process_not_our_child_says_its_status_is_unknown():
    """A process we did not launch has no exit status: 'ended; not our child, status unknown; before serving'."""
    a = _died(None)
    assert a.evidence[0] == _how("ended; not our child, status unknown;")
    assert (a.failure, a.hint) == ("other", EXITED_HINT)


def test_a_crash_signal_is_a_crash_with_the_signal_hint():
    """Death by a crash signal (SIGSEGV) with no log cause: failed/crashed, the signal's hint, the last lines."""
    a = _died(-11)
    assert (a.verdict, a.failure, a.hint) == ("failed", "crashed", crash_hint("SIGSEGV"))
    assert a.evidence == [_how("died of SIGSEGV (signal 11)"), *TAIL, FOREIGN_EV]


def test_a_crash_signal_beats_only_a_wrapper_line_and_quotes_it_last():
    """A SIGABRT after a generic wrapper line (EngineDeadError) is the crash; the wrapper line is quoted after the
    tail."""
    line = LogLine(T0 + 2, "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.", "stderr", 20)
    a = _died(-6, line)
    assert (a.failure, a.hint) == ("crashed", crash_hint("SIGABRT"))
    text = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    assert a.evidence == [_how("died of SIGABRT (signal 6)"), *TAIL[1:],
                          Evidence("log", f"last line 20: {text}", T0 + 2),
                          Evidence("log", f"line 20: {text}", T0 + 2), FOREIGN_EV]


def test_a_log_line_naming_a_cause_beats_a_crash_signal_and_the_exit_is_quoted_after_it():
    """A (non-fatal) line naming a cause ranked above 'crashed' wins over the signal; the exit is quoted after it."""
    text = "ModuleNotFoundError: No module named 'flash_attn'"
    a = _died(-11, LogLine(T0 + 2, text, "stderr", 20))
    assert a.failure == "import_error"
    assert a.evidence == [Evidence("log", f"line 20: {text}", T0 + 2), _how("died of SIGSEGV (signal 11)"),
                          FOREIGN_EV]


def test_an_uncaught_exception_before_an_exit_is_the_cause_and_the_exit_is_quoted():
    """The log ending inside a traceback names the cause of an exit with a code; the exit is quoted after it."""
    a = _died(1, LogLine(T0 + 2, "RuntimeError: boom", "stderr", 20))
    assert (a.failure, a.hint) == ("other", "the log ends with an uncaught exception (the process most likely "
                                            "exited): see the last traceback")
    assert a.evidence == [Evidence("log", "line 20: RuntimeError: boom", T0 + 2), _how("exited with code 1"),
                          FOREIGN_EV]


def test_a_sigkill_with_oom_kill_traces_is_a_host_oom():
    """SIGKILL plus the kernel's OOM-kill traces: failed/oom with the host-OOM hint and each trace as evidence."""
    a = _died(-9, oom=("memory.events oom_kill 1", "dmesg: Killed process 100"))
    assert (a.failure, a.hint) == ("oom", OOM_HOST_HINT)
    assert a.evidence == [_how("died of SIGKILL (signal 9)"),
                          Evidence("memory", "OOM kill: memory.events oom_kill 1", T0 + 3),
                          Evidence("memory", "OOM kill: dmesg: Killed process 100", T0 + 3), *TAIL, FOREIGN_EV]


def test_oom_kill_traces_count_for_a_process_with_unknown_status_but_not_for_a_clean_exit_code():
    """OOM traces name the cause when the process died of a signal or its status is unknown, not when it exited
    with a code of its own."""
    a = _died(None, oom=("oom_kill 1",))
    assert (a.failure, a.hint) == ("oom", OOM_HOST_HINT)
    assert a.evidence[:2] == [_how("ended; not our child, status unknown;"),
                              Evidence("memory", "OOM kill: oom_kill 1", T0 + 3)]
    a = _died(1, oom=("oom_kill 1",))
    assert (a.failure, a.hint) == ("other", EXITED_HINT)
    assert a.evidence == [_how("exited with code 1"), *TAIL, FOREIGN_EV]


def test_a_sigkill_without_oom_traces_is_said_to_come_from_outside():
    """SIGKILL and no OOM-kill trace: failed/other with the killed-from-outside hint and evidence."""
    a = _died(-9)
    assert (a.failure, a.hint) == ("other", KILLED_HINT)
    assert a.evidence == [_how("died of SIGKILL (signal 9)"),
                          Evidence("process", "killed by SIGKILL from outside (firstlight did not send it; no OOM-kill "
                                              "trace found)", T0 + 3), *TAIL, FOREIGN_EV]


def test_a_sigterm_is_not_a_crash_nor_a_kill():
    """A non-crash, non-kill signal names no cause: the generic exit verdict."""
    a = _died(-15)
    assert (a.failure, a.hint) == ("other", EXITED_HINT)
    assert a.evidence == [_how("died of SIGTERM (signal 15)"), *TAIL, FOREIGN_EV]


def test_a_settled_fatal_line_does_not_quote_the_exit():
    """A fatal line that settled (a named cause) is the verdict with its own line; the later exit is not quoted."""
    line = LogLine(T0 + 2, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "stderr", 20)
    a = _died(-6, line)
    assert a.failure == "oom"
    assert a.evidence == [Evidence("log", f"line 20: {line.text}", T0 + 2), FOREIGN_EV]


def test_a_kill_does_not_beat_a_line_of_the_same_rank():
    """The death's own cause wins only when strictly more specific: SIGKILL ('other') loses to a fatal 'other'
    line (a CUDA illegal memory access), which settled and is quoted alone."""
    text = "RuntimeError: CUDA error: an illegal memory access was encountered"
    a = _died(-9, LogLine(T0 + 2, text, "stderr", 20))
    assert (a.failure, a.hint) == ("other", "a CUDA kernel crashed: try disabling CUDA graphs/custom kernels, and "
                                            "report it with CUDA_LAUNCH_BLOCKING=1 output")
    assert a.evidence == [Evidence("log", f"line 20: {text}", T0 + 2), FOREIGN_EV]


# -- replay's ready line, stall hints ---------------------------------------------------------------------------
def test_with_ready_from_log_the_ready_line_enters_ready_once():
    """--ready-from-log (replay): the engine's ready line is READY, entered once, quoted as the evidence."""
    j = Judge(JudgeConfig(timeout=600, stall_timeout=120, spin_timeout=900, ready_from_log=True), VLLM, T0)
    j.feed(Started(T0, 100, "http://x", "vllm", True))
    assert j.feed(LogLine(T0 + 2, "Application startup complete.", "stderr", 7)) == [_phase(2, "ready", "log", 7)]
    assert [p.name for p in j.phases.spans] == ["process_start", "ready"]
    a = j.assess(T0 + 3)
    assert a.verdict == "ready"
    assert a.evidence == [Evidence("log", "line 7: Application startup complete.", T0 + 2)]


def test_a_hung_start_gets_the_stall_hint_of_its_phase():
    """Hung in weights_loading: the hint is that phase's stall hint; the evidence names the last progress."""
    j = _judge(VLLM)
    _feed(j, proc(0.2), LOADING)
    a = j.assess(T0 + 20.5)
    assert (a.verdict, a.detail, a.phase) == ("hung", "no progress", "weights_loading")
    assert a.hint == STALL_HINTS["weights_loading"]
    assert a.evidence == [Evidence("log", "no progress for 20s; last progress: Starting to load model /m ...",
                                   T0 + 0.5),
                          Evidence("log", "last line 9: Starting to load model /m ...", T0 + 0.5)]


# -- log lines: failures, the engine's ready line, progress (Judge._on_log, _on_progress, _clip) ----------------
OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_a_failure_line_is_an_event_with_its_category_fatality_and_line():
    """A failure line emits failure_line with category, fatal, line number and serving; a fatal one before READY is
    the start's fatal line."""
    j = _judge(VLLM)
    events = j.feed(LogLine(T0 + 2, f"  {OOM_LINE}  ", "stderr", 20))
    assert events == [Event(T0 + 2, "failure_line", OOM_LINE,
                            {"category": "oom", "fatal": True, "line": 20, "serving": False})]
    assert j.fatal is not None and (j.fatal.line, j.fatal.t, j.fatal.failure.category) == (20, T0 + 2, "oom")


def test_a_fatal_line_after_ready_does_not_fail_the_start():
    """After a generation answered, a fatal line is reported but is not the start's fatal line."""
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.GENERATION, "ok", text="x"))
    events = j.feed(LogLine(T0 + 3, OOM_LINE, "stderr", 20))
    assert [e.type for e in events] == ["failure_line"]
    assert j.fatal is None
    assert j.assess(T0 + 10).verdict == "ready"


def test_the_engines_ready_line_is_a_claim_confirmed_by_a_generation():
    """Live, the engine's ready line is an engine_ready event (once), not the ready phase."""
    j = _judge(VLLM)
    line = LogLine(T0 + 2, "Application startup complete.", "stderr", 7)
    assert j.feed(line) == [Event(T0 + 2, "engine_ready", "engine reports ready; confirming with a generation")]
    assert j.engine_ready is line
    assert j.ready_at is None
    assert [p.name for p in j.phases.spans] == ["process_start"]
    assert j.feed(LogLine(T0 + 3, "Application startup complete.", "stderr", 8)) == []
    assert j.engine_ready is line
    j.feed(_ok(4, Level.GENERATION, "ok", latency=0.25, text="x"))
    a = j.assess(T0 + 5)
    assert a.evidence == [Evidence("probe:generation", "generation returned 'x' in 0.25s", T0 + 4),
                          Evidence("log", "line 7: Application startup complete.", T0 + 2)]


def test_access_lines_are_not_progress_nor_tail_nor_meanwhile():
    """HTTP access lines (our own probes cause them) count as log lines but are not progress, not in a crash's
    tail, not in a slow probe's log-line count."""
    access = 'INFO:     127.0.0.1:5555 - "GET /health HTTP/1.1" 503 Service Unavailable'
    j = _judge(VLLM)
    _feed(j, LogLine(T0 + 11, "working", "stderr", 1), LogLine(T0 + 12, access, "stderr", 2))
    assert j.log.count == 2
    assert (j.marks.last_strong.t, j.marks.last_strong.signal, j.marks.last_strong.value) == (T0 + 11, "log", "working")
    j.feed(_ok(20, Level.GENERATION, "ok", latency=10.0, text="x"))
    assert j.first_generation is not None and j.first_generation["meanwhile"] == "1 log lines"
    j = _judge(VLLM)
    _feed(j, proc(1), LogLine(T0 + 11, "working", "stderr", 1), LogLine(T0 + 12, access, "stderr", 2),
          proc(13, alive=False, exit_code=2))
    assert j.assess(T0 + 14).evidence[1:] == [Evidence("log", "last line 1: working", T0 + 11)]


def test_a_compile_cache_line_is_recorded_for_the_anatomy():
    """A compile-cache hit/miss line is recorded with its time, state and text."""
    j = _judge(VLLM)
    text = "Directly load the compiled graph(s) for dynamic shape from the cache, took 1.2 s"
    j.feed(LogLine(T0 + 2, text, "stderr", 5))
    assert j.signals.compile_lines == [(T0 + 2, "hit", None, text)]


def test_shard_progress_lines_give_the_weights_fraction_and_eta():
    """A shard progress line (even a \\r redraw) is strong progress and gives shard, fraction and ETA from the
    weights_loading start."""
    j = _judge(VLLM)
    shards = "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:10<00:10,  5.00s/it]"
    _feed(j, LOADING, LogLine(T0 + 10.5, shards, "stderr", 0, final=False))
    assert (j.marks.last_strong.t, j.marks.last_strong.signal, j.marks.last_strong.value) == (T0 + 10.5, "log", shards)
    p = j.progress(T0 + 12.5)
    assert (p.shard, p.weights_fraction, p.weights_source) == ((2, 4), 0.5, "log")
    assert p.eta_weights_s == 8.0  # 10 s for half, 10 s to go, 2 s of them gone
    assert p.progress_line == shards


def test_long_lines_are_clipped_with_an_ellipsis():
    """Evidence quotes a stripped line, clipped to 240 characters (239 and an ellipsis); progress lines to 120."""
    j = _judge(VLLM)
    j.feed(LogLine(T0 + 2, "  " + "x" * 300 + "  ", "stderr", 5))
    assert j.marks.last_strong.value == "x" * 239 + "…"
    j.feed(LogLine(T0 + 3, "  " + "y" * 240 + "  ", "stderr", 6))
    assert j.marks.last_strong.value == "y" * 240
    shards = "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:10<00:10,  5.00s/it]" + " " + "z" * 100
    j.feed(LogLine(T0 + 4, shards, "stderr", 7))
    assert j.progress(T0 + 5).progress_line == shards[:119] + "…"


# -- hung: no progress, or only busy-waiting (Judge._hang) ------------------------------------------------------
def test_no_progress_for_the_stall_timeout_is_hung_with_the_last_progress_and_activity():
    """No strong nor weak progress for stall_timeout (inclusive) is hung/'no progress': the last progress, the
    last activity, the last probe failure, the last line, then the warnings."""
    j = _judge(VLLM)  # stall_timeout 10
    _feed(j, proc(0.2), LOADING, proc(1, cpu=0.0), proc(2, cpu=1.0), FOREIGN, _fail(2.5, Level.PORT, "refused"))
    assert j.assess(T0 + 11.9).verdict == "starting"
    a = j.assess(T0 + 12)
    assert (a.verdict, a.detail, a.hint) == ("hung", "no progress", STALL_HINTS["weights_loading"])
    assert a.evidence == [
        Evidence("log", "no progress for 10s; last progress: Starting to load model /m ...", T0 + 0.5),
        Evidence("cpu", "last activity: CPU busy at 100% of a core", T0 + 2),
        Evidence("probe:port", "refused", T0 + 2.5),
        Evidence("log", "last line 9: Starting to load model /m ...", T0 + 0.5),
        FOREIGN_EV]


def test_only_busy_waiting_for_the_spin_timeout_is_hung_busy_wait():
    """CPU busy but nothing else moving for spin_timeout (inclusive) is hung/'busy-wait suspected'."""
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=10, spin_timeout=30))
    _feed(j, proc(0.2, cpu=0.0), LOADING, FOREIGN, *(proc(i, cpu=float(i)) for i in range(1, 41)))
    assert j.assess(T0 + 30.4).verdict == "starting"
    a = j.assess(T0 + 30.5)
    assert (a.verdict, a.detail, a.hint) == ("hung", "busy-wait suspected", STALL_HINTS["weights_loading"])
    assert a.evidence == [
        Evidence("cpu", "CPU busy at 100% of a core, yet nothing else moved for 30s", T0 + 0.5),
        Evidence("log", "last real progress: Starting to load model /m ...", T0 + 0.5),
        Evidence("log", "last line 9: Starting to load model /m ...", T0 + 0.5),
        FOREIGN_EV]


def test_without_a_process_tree_silence_is_never_hung():
    """Attached without a pid and no process samples: no stillness signal, so starting, never hung."""
    j = Judge(STALL_RULES, VLLM, T0)
    _feed(j, Started(T0, None, "http://x", "vllm", False), LOADING)
    a = j.assess(T0 + 500)
    assert (a.verdict, a.hint) == ("starting", None)
    assert a.evidence == [Evidence("log", "last progress: Starting to load model /m ...", T0 + 0.5),
                          Evidence("log", "last line 9: Starting to load model /m ...", T0 + 0.5)]


# -- process samples (Judge._on_process) ------------------------------------------------------------------------
def test_the_process_exit_is_one_warning_event_with_its_code_and_signal():
    """The first dead sample is a warning naming the exit (code and signal); later dead samples add nothing."""
    j = _judge(VLLM)
    _feed(j, proc(1))
    first = ProcessSample(T0 + 2, alive=False, exit_code=-9)
    assert j.feed(first) == [Event(T0 + 2, "warning", "server process died of SIGKILL (signal 9)",
                                   {"exit_code": -9, "signal": "SIGKILL"})]
    assert j.feed(ProcessSample(T0 + 3, alive=False, exit_code=1)) == []
    assert j.exited is first
    j = _judge(VLLM)
    assert j.feed(ProcessSample(T0 + 2, alive=False, exit_code=3)) == [
        Event(T0 + 2, "warning", "server process exited with code 3", {"exit_code": 3, "signal": None})]


def test_a_live_process_sample_reaches_the_process_level_once():
    """A live sample means Level.PROCESS, since its first sample; it never lowers a higher level."""
    j = Judge(STALL_RULES, VLLM, T0)
    j.feed(Started(T0, None, "http://x", "vllm", False))
    assert j.tree.has_stillness_signal is False
    _feed(j, proc(1), proc(2))
    assert j.tree.has_stillness_signal is True
    assert (j.ladder.level, j.ladder.since) == (Level.PROCESS, {Level.PROCESS: T0 + 1})
    _feed(j, _ok(3, Level.HTTP, "ok"), proc(4))
    assert j.ladder.level == Level.HTTP


def test_disk_reads_are_strong_progress_and_cpu_is_weak_signal_cpu():
    """Bytes read are strong progress (signal 'disk'); CPU time alone is weak (signal 'cpu')."""
    j = _judge(VLLM)
    _feed(j, proc(1, cpu=0.0, read=0), proc(2, cpu=0.0, read=8 << 20))
    assert (j.marks.last_strong.t, j.marks.last_strong.signal, j.marks.last_strong.value) == (
        T0 + 2, "disk", "8.4 MB read since the last sample")
    _feed(j, proc(3, cpu=0.5, read=8 << 20))
    assert j.marks.last_weak is not None
    assert (j.marks.last_weak.t, j.marks.last_weak.signal, j.marks.last_weak.value) == (
        T0 + 3, "cpu", "CPU busy at 50% of a core")
    assert j.marks.last_strong.t == T0 + 2


def test_process_warnings_are_events_and_evidence_and_dead_compilers_feed_the_anatomy():
    """A worker dying is a warning event and a warning; a compiler child that ended counts its CPU for the
    anatomy."""
    root = ProcInfo(100, "server", "sleeping", 0.0, 100 << 20, T0)
    worker = ProcInfo(101, "worker", "sleeping", 1.0, 1 << 20, T0)
    cc = ProcInfo(102, "cc1plus", "running", 2.5, 1 << 20, T0 + 5)
    j = _judge(VLLM)
    _feed(j, proc(1, procs=(root, worker)))
    events = j.feed(proc(10, procs=(root,), died=(worker, cc)))
    value = "child worker[101] died while the server process lives"
    assert Event(T0 + 10, "warning", value, {"pid": 101}) in events
    assert j.tree.warnings == [Evidence("process", value, T0 + 10)]
    assert (j.signals.compiler_runs, j.signals.compiler_cpu) == (1, 2.5)


def test_after_the_exit_progress_shows_the_exit_samples_reads_and_no_live_figures():
    """The exit sample becomes the last sample: reads counted from the first sample, no CPU/RSS/process count."""
    j = _judge(VLLM)
    _feed(j, proc(1, cpu=2.0, read=1 << 20), ProcessSample(T0 + 2, alive=False, exit_code=1, read_bytes=9 << 20))
    p = j.progress(T0 + 3)
    assert (p.read_bytes, p.cpu_seconds, p.rss_bytes, p.procs) == (8 << 20, 0.0, 0, 0)


def test_a_download_progress_line_is_a_download_not_a_shard():
    """A download bar (Fetching N files) is strong progress and a download mark for the anatomy; it says nothing
    about shards."""
    j = _judge(VLLM)
    text = "Fetching 4 files:  50%|█████     | 2/4 [00:01<00:01,  1.50it/s]"
    j.feed(LogLine(T0 + 2, text, "stderr", 3))
    assert j.signals.downloads == [T0 + 2]
    assert (j.marks.last_strong.t, j.marks.last_strong.signal, j.marks.last_strong.value) == (T0 + 2, "log", text)
    p = j.progress(T0 + 3)
    assert (p.shard, p.weights_fraction, p.progress_line) == (None, None, text)
    j = _judge(VLLM)
    j.feed(LogLine(T0 + 2, "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:10<00:10]", "stderr", 3))
    assert j.signals.downloads == []


def test_gpu_occupied_names_every_foreign_gpu_process_in_its_hint():
    """A gpu_occupied failure's hint ends with every foreign GPU process, joined by '; '."""
    sglang = get_profile("sglang")
    gpu = GpuSample(T0 + 1, (GpuDevice(0, "H100", 76 << 30, 80 << 30, 0.0),),
                    (GpuProcess(0, 4242, 1 << 30, "python"), GpuProcess(0, 4343, 2 << 30, "java")))
    line = LogLine(T0 + 2, "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other "
                           "processes. pre_model_load_memory=[76.1, 2.3]", "stderr", 12)
    j = _judge(sglang)
    _feed(j, proc(0.5), gpu, line, proc(3, alive=False, exit_code=1))
    a = j.assess(T0 + 3.5)
    assert a.failure == "gpu_occupied"
    assert a.hint is not None and a.hint.endswith(
        " (GPU 0 held by PID 4242 python (1.07 GB), outside the server's process tree; "
        "GPU 0 held by PID 4343 java (2.15 GB), outside the server's process tree)")


# -- other observations (Judge.feed) and the verdict order (Judge._verdict, _failure, assess) ------------------
def test_other_observations_become_notes_warnings_and_state():
    """WeightsTotal and SourceNote are notes; Started sets pid/launched; an unknown observation does nothing."""
    j = Judge(STALL_RULES, VLLM, T0)
    assert j.feed(Started(T0, 4321, "http://x", "vllm", True)) == []
    assert (j.tree.pid, j.tree.launched, j.tree.has_stillness_signal) == (4321, True, True)
    w = WeightsTotal(T0 + 1, 16_000_000_000, 4, "/models/m")
    assert j.feed(w) == [Event(T0 + 1, "note", "weights: 16.00 GB in 4 files at /models/m")]
    assert j.progress_tracker.weights_total is w
    note = SourceNote(T0 + 2, "journal", "unit restarted")
    assert j.feed(note) == [Event(T0 + 2, "note", "journal: unit restarted")]
    assert j.tree.notes == [note]
    assert j.feed(Observation(T0 + 3)) == []
    j = Judge(STALL_RULES, VLLM, T0)
    j.feed(Started(T0, None, "http://x", "vllm", False))
    assert (j.tree.pid, j.tree.launched, j.tree.has_stillness_signal) == (None, False, False)


def test_the_first_stop_signal_is_the_interrupted_verdict_over_everything():
    """Interrupted (the first signal kept) beats a port conflict, READY and a failure."""
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.GENERATION, "ok", text="x"), PortConflict(T0 + 3, "nginx"),
          Interrupted(T0 + 4, "SIGTERM"), Interrupted(T0 + 5, "SIGINT"))
    a = j.assess(T0 + 6)
    assert (a.verdict, a.evidence) == ("interrupted", [Evidence("signal", "SIGTERM received", T0 + 4)])
    assert j.interrupted == Interrupted(T0 + 4, "SIGTERM")


def test_a_port_conflict_is_failed_port_in_use_reported_once_and_never_after_ready():
    """Another server on our port: one warning event, then failed/port_in_use; none once READY."""
    j = _judge(VLLM)
    assert j.feed(PortConflict(T0 + 2, "PID 77 nginx")) == [
        Event(T0 + 2, "warning", "the port is not the server's: PID 77 nginx")]
    assert j.feed(PortConflict(T0 + 3, "PID 78 other")) == []
    a = j.assess(T0 + 4)
    assert (a.verdict, a.failure, a.evidence) == ("failed", "port_in_use", [Evidence("port", "PID 77 nginx", T0 + 2)])
    assert a.hint == "another server already answers on this port: stop it, or give this one another port"
    j = _judge(VLLM)
    _feed(j, proc(1), _ok(2, Level.GENERATION, "ok", text="x"))
    assert j.feed(PortConflict(T0 + 3, "PID 77 nginx")) == []
    assert j.assess(T0 + 4).verdict == "ready"


def test_after_a_port_conflict_the_probes_answers_are_the_other_servers_and_never_count():
    """The probe that found the port another's is followed by the ladder's next rungs (in the same moment): their
    answers are not this server's levels, phases nor READY."""
    j = _judge(VLLM)
    _feed(j, proc(1), PortConflict(T0 + 2, "PID 77 nginx"))
    assert j.feed(_ok(2, Level.GENERATION, "ok", text="x")) == []
    assert (j.ladder.level, j.ready_at, j.first_generation) == (Level.PROCESS, None, None)
    assert [s.name for s in j.phases.spans] == ["process_start"]
    assert (j.assess(T0 + 3).verdict, j.assess(T0 + 3).failure) == ("failed", "port_in_use")


def test_timeout_is_inclusive_and_quotes_the_context():
    """No READY by --timeout (inclusive): timeout, with the watch evidence then the context."""
    j = _judge(VLLM, JudgeConfig(timeout=100, stall_timeout=1000, spin_timeout=1000))
    _feed(j, proc(1), LOADING, _fail(50, Level.PORT, "refused"))
    assert j.assess(T0 + 99.9).verdict == "starting"
    a = j.assess(T0 + 100)
    assert (a.verdict, a.elapsed_s, a.phase, a.level) == ("timeout", 100.0, "weights_loading", Level.PROCESS)
    assert a.evidence == [Evidence("watch", "no READY within --timeout 100s", T0),
                          Evidence("log", "last progress: Starting to load model /m ...", T0 + 0.5),
                          Evidence("probe:port", "refused", T0 + 50),
                          Evidence("log", "last line 9: Starting to load model /m ...", T0 + 0.5)]
    assert j.settled and j.phases.spans[-1].end == T0 + 100
    assert j.assess(T0 + 200) is a


def test_a_starting_verdict_is_not_final_and_carries_the_stall_hint_only_once_the_log_ended():
    """Starting is not final; a replayed log that ended mid-start gets the phase's stall hint."""
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, proc(1), LOADING)
    a = j.assess(T0 + 5)
    assert (a.verdict, a.hint, a.engine_ready, a.elapsed_s) == ("starting", None, False, 5.0)
    assert not j.settled and j.phases.spans[-1].end is None
    j.end_of_log(T0 + 6)
    assert j.log_ended == T0 + 6
    assert j.assess(T0 + 7).hint == STALL_HINTS["weights_loading"]


def test_a_generic_fatal_line_waits_for_a_better_cause_unless_the_process_exits():
    """A fatal line of a generic category (a wrapper) settles 1.5 s after it (inclusive), or at once on exit."""
    text = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, proc(1), LogLine(T0 + 2, text, "stderr", 20))
    assert j.assess(T0 + 3.4).verdict == "starting"
    a = j.assess(T0 + 3.5)
    assert (a.verdict, a.failure, a.evidence) == ("failed", "other", [Evidence("log", f"line 20: {text}", T0 + 2)])
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, proc(1), LogLine(T0 + 2, text, "stderr", 20), proc(2.1, alive=False, exit_code=1))
    assert j.assess(T0 + 2.2).verdict == "failed"


def test_a_replayed_log_that_ends_inside_a_traceback_is_failed():
    """Replay: the log's end settles it; ending inside an uncaught exception is failed with that line."""
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, LogLine(T0 + 2, "RuntimeError: boom", "stderr", 20))
    assert j.assess(T0 + 10).verdict == "starting"
    j.end_of_log(T0 + 11)
    a = j.assess(T0 + 11)
    assert (a.verdict, a.failure, a.evidence) == ("failed", "other",
                                                  [Evidence("log", "line 20: RuntimeError: boom", T0 + 2)])
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, LogLine(T0 + 2, "all fine", "stderr", 20))
    j.end_of_log(T0 + 3)
    assert j.assess(T0 + 4).verdict == "starting"


def test_bad_answers_fail_after_the_attempts_quoting_the_count_the_last_and_the_first_time():
    """generation_attempts bad answers in a row: failed/bad_generation; the evidence counts them, quotes the last
    one and dates the first."""
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000, generation_attempts=2))
    _feed(j, proc(1), _fail(2, Level.GENERATION, "empty", transient=False))
    assert j.assess(T0 + 2.5).verdict == "starting"
    j.feed(_fail(3, Level.GENERATION, "garbage", transient=False))
    a = j.assess(T0 + 4)
    assert (a.verdict, a.failure) == ("failed", "bad_generation")
    assert a.evidence == [Evidence("probe:generation", "2 bad answers in a row; last: garbage", T0 + 2)]
    assert a.hint == ("the server answers generations but not with valid text: check the model, its chat template "
                      "and --expect")


def test_use_profile_and_expect_total_change_what_is_read_and_the_eta():
    """The engine learnt mid-run switches the line interpretation; the expected total gives eta_total_s."""
    j = _judge(GENERIC)
    j.use_profile(VLLM)
    assert j.profile is VLLM
    assert j.feed(LogLine(T0 + 1, "Starting to load model /m ...", "stderr", 9)) == [
        _phase(1, "weights_loading", "log", 9)]
    j.expect_total(100.0)
    assert j.progress_tracker.expected_total_s == 100.0
    assert j.progress(T0 + 30).eta_total_s == 70.0
    assert j.progress(T0 + 130).eta_total_s == 0.0


# -- progress and ETA (Judge.progress) ----------------------------------------------------------------------------
def _loading_from_disk(reads: list[float], total: int = 10_000_000_000) -> Judge:
    j = _judge(VLLM)
    tree = (ProcInfo(100, "server", "sleeping", 0.0, 1 << 20, T0),
            ProcInfo(101, "worker", "sleeping", 0.0, 1 << 20, T0))
    _feed(j, WeightsTotal(T0, total, 4, "/m"), LogLine(T0 + 1, "hello", "stderr", 1),
          *(proc(t, cpu=t * 0.5, read=int(r), rss=3 << 30, procs=tree) for t, r in enumerate(reads)))
    return j


def test_progress_reads_the_last_live_sample_and_the_weights_read_from_disk():
    """From the process samples: CPU, RSS, process count, bytes read since the first sample, read rate and cores
    over the window; with the weights' size: fraction read (source disk) and the ETA at the current rate."""
    j = _loading_from_disk([1e9, 2e9, 3e9, 4e9, 5e9])  # t=0..4, 1 GB/s from a 1 GB base
    p = j.progress(T0 + 4.5)
    assert (p.cpu_seconds, p.rss_bytes, p.procs, p.read_bytes) == (2.0, 3 << 30, 2, 4_000_000_000)
    assert (p.read_rate, p.cpu_cores) == (1e9, 0.5)
    assert (p.weights_bytes, p.weights_fraction, p.weights_source, p.eta_weights_s) == (10_000_000_000, 0.4,
                                                                                        "disk", 6.0)
    assert (p.shard, p.progress_line, p.eta_total_s, p.since_last_log_s) == (None, None, None, 3.5)
    assert j.progress(T0 + 0.5).since_last_log_s == 0.0  # never negative


def test_weights_read_in_full_are_fraction_one_with_no_eta_left():
    """Reading more than the weights' size caps the fraction at 1 and the ETA is 0."""
    j = _loading_from_disk([0, 6e9, 12e9])
    p = j.progress(T0 + 3)
    assert (p.weights_fraction, p.eta_weights_s, p.read_bytes) == (1.0, 0.0, 12_000_000_000)


def test_without_reads_the_shard_line_gives_the_fraction_and_the_eta():
    """No bytes read: the shard bar is the fraction (source log), its ETA from the weights_loading start, never
    negative; with the weights' size known, a full shard count is ETA 0."""
    shards = "Loading safetensors checkpoint shards:  {pct}% Completed | {done}/4 [00:10<00:10]"
    j = _loading_from_disk([1e9, 1e9])  # nothing read after the first sample
    _feed(j, LOADING, LogLine(T0 + 4.5, shards.format(pct=25, done=1), "stderr", 12))
    p = j.progress(T0 + 6.5)
    assert (p.read_bytes, p.shard, p.weights_fraction, p.weights_source) == (0, (1, 4), 0.25, "log")
    assert p.eta_weights_s == 10.0  # 4 s for a quarter: 12 s more, 2 of them gone
    assert j.progress(T0 + 100).eta_weights_s == 0.0
    j.feed(LogLine(T0 + 8.5, shards.format(pct=100, done=4), "stderr", 13))
    p = j.progress(T0 + 9)
    assert (p.shard, p.weights_fraction, p.eta_weights_s) == ((4, 4), 1.0, 0.0)


def test_a_full_shard_count_without_the_weights_size_has_no_eta():
    """Without WeightsTotal, a finished shard bar gives fraction 1 and no ETA (nothing to compute)."""
    j = _judge(VLLM)
    _feed(j, LOADING, LogLine(T0 + 4.5, "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:10<00:00]",
                              "stderr", 12))
    p = j.progress(T0 + 5)
    assert (p.weights_bytes, p.weights_fraction, p.weights_source, p.eta_weights_s) == (None, 1.0, "log", None)


def test_progress_sums_gpu_memory_and_averages_the_utilisation_reported():
    """GPU memory is summed over devices; utilisation averaged over the devices that report it."""
    j = _judge(VLLM)
    j.feed(GpuSample(T0 + 1, (GpuDevice(0, "H100", 1 << 30, 80 << 30, 20.0),
                              GpuDevice(1, "H100", 3 << 30, 80 << 30, None),
                              GpuDevice(2, "H100", 0, 80 << 30, 40.0))))
    p = j.progress(T0 + 2)
    assert (p.gpu_memory_bytes, p.gpu_util) == (4 << 30, 30.0)
    j.feed(GpuSample(T0 + 3, (GpuDevice(0, "H100", 1 << 30, 80 << 30, None),)))
    assert (j.progress(T0 + 4).gpu_memory_bytes, j.progress(T0 + 4).gpu_util) == (1 << 30, None)


# -- the initial state, the anatomy's feed, settling a fatal line ---------------------------------------------------
def test_a_fresh_judge_knows_nothing_and_quotes_its_own_start_as_the_last_progress():
    """Before any observation: no pid, not launched, and the last progress is firstlight's own start."""
    j = Judge(JudgeConfig(timeout=600, stall_timeout=120, spin_timeout=900, expected_total_s=50.0), VLLM, T0)
    assert (j.tree.pid, j.tree.launched, j.progress_tracker.expected_total_s) == (None, False, 50.0)
    a = j.assess(T0 + 1)
    assert a.evidence == [Evidence("watch", "last progress: firstlight started watching", T0)]
    assert a.progress.eta_total_s == 49.0


def test_observations_also_feed_the_anatomy_and_compiler_runs_are_counted():
    """Every observation reaches the anatomy's signals; compiler children count in the compile tracker's runs."""
    j = _judge(VLLM)
    cc = ProcInfo(102, "cc1plus", "running", 2.5, 1 << 20, T0 + 5)
    _feed(j, proc(1, cpu=1.0, read=5), LogLine(T0 + 2, "hello", "stderr", 1), proc(6, died=(cc,)))
    assert j.signals.log_times == [T0 + 2]
    assert [pt[:3] for pt in j.signals.points] == [(T0 + 1, 5, 1.0), (T0 + 6, 0, 0.0)]
    assert j.tree.compiles.runs(T0 + 7) == 1


def test_a_ready_generation_without_a_latency_says_zero_seconds():
    """The ready evidence quotes the latency as 0.00s when the probe did not measure one."""
    j = _judge(VLLM)
    j.feed(_ok(2, Level.GENERATION, "ok", latency=None, text="x"))
    assert j.assess(T0 + 3).evidence == [Evidence("probe:generation", "generation returned 'x' in 0.00s", T0 + 2)]


def test_a_fatal_line_naming_a_specific_cause_settles_once_the_lines_that_may_place_it_are_read():
    """A fatal line whose category ranks above 'other' (CUDA OOM) is the verdict, before any exit, as soon as the
    DEATH_LINES lines after it (which may say where it died) are read; fewer, and 1.5 s settle it."""
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    after = [LogLine(T0 + 2, f"next line {i}", "stderr", 21 + i) for i in range(DEATH_LINES)]
    _feed(j, proc(1), LogLine(T0 + 2, OOM_LINE, "stderr", 20), *after[:-1])
    assert j.assess(T0 + 2).verdict == "starting"  # one line of its death still to come
    _feed(j, after[-1])
    a = j.assess(T0 + 2)
    assert (a.verdict, a.failure, a.evidence) == ("failed", "oom", [Evidence("log", f"line 20: {OOM_LINE}", T0 + 2)])
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, proc(1), LogLine(T0 + 2, OOM_LINE, "stderr", 20), after[0])
    assert j.assess(T0 + 3.4).verdict == "starting"
    assert (j.assess(T0 + 3.5).verdict, j.assess(T0 + 3.5).failure) == ("failed", "oom")


def test_a_fatal_line_of_category_other_waits_like_a_generic_one():
    """'other' (a CUDA illegal memory access) is not specific: it waits 1.5 s for a better cause."""
    text = "RuntimeError: CUDA error: an illegal memory access was encountered"
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, proc(1), LogLine(T0 + 2, text, "stderr", 20), LogLine(T0 + 2, "next line", "stderr", 21))
    assert j.assess(T0 + 2.1).verdict == "starting"
    a = j.assess(T0 + 3.5)
    assert (a.verdict, a.failure, a.evidence) == ("failed", "other", [Evidence("log", f"line 20: {text}", T0 + 2)])


def test_an_exit_settles_a_pending_generic_fatal_line_without_quoting_the_exit():
    """The exit settles a waiting generic fatal line at once; the verdict is that line alone."""
    text = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    j = _judge(VLLM, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, proc(1), LogLine(T0 + 2, text, "stderr", 20), proc(2.1, alive=False, exit_code=1))
    a = j.assess(T0 + 2.2)
    assert (a.verdict, a.failure, a.evidence) == ("failed", "other", [Evidence("log", f"line 20: {text}", T0 + 2)])


def test_bad_answers_quote_the_last_of_three():
    """With the default 3 attempts, the evidence quotes the third (last) bad answer."""
    j = _judge(VLLM)
    _feed(j, proc(1), *(_fail(2 + i, Level.GENERATION, f"bad {i}", transient=False) for i in range(3)))
    assert j.assess(T0 + 6).evidence == [Evidence("probe:generation", "3 bad answers in a row; last: bad 2", T0 + 2)]


def test_a_slow_probe_counts_at_most_the_last_4096_progress_lines():
    """Only the last 4096 progress lines are remembered for a slow probe's log-line count."""
    j = _judge(VLLM)
    _feed(j, *(LogLine(T0 + 10 + i / 1000, "x", "stderr", i + 1) for i in range(4100)))
    j.feed(_ok(20, Level.GENERATION, "ok", latency=10.0, text="x"))
    assert j.first_generation is not None and j.first_generation["meanwhile"] == "4096 log lines"


def test_rates_need_two_samples_apart_in_time_and_are_never_negative_nor_invented():
    """Two samples are enough for the read rate and CPU cores; flat figures are rates of 0; two samples at the
    same instant give no rate; a weights size of 0 is no weights size."""
    j = _judge(VLLM)
    _feed(j, WeightsTotal(T0, 0, 0, "/m"), proc(1, cpu=3.0, read=1 << 20), proc(3, cpu=4.0, read=5 << 20))
    p = j.progress(T0 + 3)
    assert (p.read_rate, p.cpu_cores, p.read_bytes) == (2 << 20, 0.5, 4 << 20)
    assert (p.weights_bytes, p.weights_fraction, p.eta_weights_s) == (None, None, None)
    j = _judge(VLLM)
    _feed(j, proc(1, cpu=3.0, read=1 << 20), proc(3, cpu=3.0, read=1 << 20))
    assert (j.progress(T0 + 3).read_rate, j.progress(T0 + 3).cpu_cores) == (0.0, 0.0)
    j = _judge(VLLM)
    _feed(j, proc(1, cpu=3.0), proc(1, cpu=4.0))
    assert (j.progress(T0 + 3).read_rate, j.progress(T0 + 3).cpu_cores) == (None, None)


def test_a_single_byte_read_counts_toward_the_weights():
    """Any byte read counts toward the weights' fraction, however small the checkpoint."""
    j = _judge(VLLM)
    _feed(j, WeightsTotal(T0, 10, 1, "/m"), proc(1, read=0), proc(2, read=1))
    p = j.progress(T0 + 2)
    assert (p.weights_bytes, p.read_bytes, p.weights_fraction, p.weights_source) == (10, 1, 0.1, "disk")
    j = _judge(VLLM)
    _feed(j, WeightsTotal(T0, 1, 1, "/m"), proc(1, read=0), proc(2, read=1))
    assert (j.progress(T0 + 2).weights_bytes, j.progress(T0 + 2).weights_fraction) == (1, 1.0)


def test_reads_that_stopped_give_no_weights_eta():
    """Bytes were read but none in the last window: the rate is 0 and there is no ETA (not a division by 0)."""
    j = _judge(VLLM)
    _feed(j, WeightsTotal(T0, 100, 1, "/m"), proc(0, read=0), proc(1, read=5),
          *(proc(t, read=5) for t in range(2, 31)))
    p = j.progress(T0 + 30)
    assert (p.read_rate, p.weights_fraction, p.eta_weights_s) == (0.0, 0.05, None)


def test_a_shard_bar_after_the_loading_phase_was_skipped_times_from_the_start():
    """When the start never entered weights_loading (a probe moved it past), the shard ETA counts from the
    start of watching."""
    j = _judge(VLLM)
    _feed(j, _ok(1, Level.HTTP, "ok"),
          LogLine(T0 + 5, "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:05<00:15]", "stderr", 3))
    assert [p.name for p in j.phases.spans] == ["process_start", "http_listening"]
    assert j.progress(T0 + 6).eta_weights_s == 14.0


def test_a_shard_eta_needs_some_shards_done_and_some_time_spent():
    """No ETA from 0 shards done, nor from a bar at the very instant loading began; half a second is enough."""
    bar = "Loading safetensors checkpoint shards:  {pct}% Completed | {done}/4 [00:00<?]"
    j = _judge(VLLM)
    _feed(j, LOADING, LogLine(T0 + 1, bar.format(pct=0, done=0), "stderr", 10))
    assert (j.progress(T0 + 1).weights_fraction, j.progress(T0 + 1).eta_weights_s) == (0.0, None)
    j = _judge(VLLM)
    _feed(j, LOADING, LogLine(T0 + 0.5, bar.format(pct=25, done=1), "stderr", 10))
    assert j.progress(T0 + 0.5).eta_weights_s is None
    j = _judge(VLLM)
    _feed(j, LOADING, LogLine(T0 + 1, bar.format(pct=25, done=1), "stderr", 10))
    assert j.progress(T0 + 1).eta_weights_s == 1.5


def test_rates_span_the_whole_window_even_when_its_first_samples_share_an_instant():
    """The rate window runs from its first to its last sample: two samples at one instant do not void it."""
    j = _judge(VLLM)
    _feed(j, proc(1, cpu=1.0, read=0), proc(1, cpu=1.0, read=0), proc(3, cpu=2.0, read=4 << 20))
    p = j.progress(T0 + 3)
    assert (p.read_rate, p.cpu_cores) == (2 << 20, 0.5)


OLLAMA_LISTENING = ('time=2024-05-27T12:32:31.493Z level=INFO source=routes.go:1074 msg="Listening on '
                    '127.0.0.1:11434 (version 0.1.39)"')


def test_a_replayed_daemon_left_listening_idle_is_ready_at_its_listening_lines_time():
    """Replay (ready from the log): Ollama left listening, asked for no model, serves from its listening line:
    READY at that line's time, not at the log's end."""
    rules = JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000, ready_from_log=True)
    j = _judge(OLLAMA, rules)
    _feed(j, LogLine(T0 + 1, "total blobs: 11", "stderr", 1), LogLine(T0 + 2, OLLAMA_LISTENING, "stderr", 2))
    j.end_of_log(T0 + 9)
    a = j.assess(T0 + 9)
    assert (a.verdict, a.phase, a.engine_ready) == ("ready", "ready", True)
    assert j.ready_at == T0 + 2 and j.engine_ready is not None and j.engine_ready.t == T0 + 2
    assert j.engine_ready.text == OLLAMA_LISTENING and j.engine_ready.lineno == 2
    assert [(s.name, s.start, s.source, s.line) for s in j.phases.spans][-1] == ("ready", T0 + 2, "log", 2)


def test_a_daemon_left_listening_is_not_ready_where_only_a_probe_may_say_so():
    """Live (probes decide READY): the log's end says nothing of serving."""
    j = _judge(OLLAMA, JudgeConfig(timeout=600, stall_timeout=1000, spin_timeout=1000))
    _feed(j, LogLine(T0 + 2, OLLAMA_LISTENING, "stderr", 2))
    j.end_of_log(T0 + 9)
    assert j.ready_at is None and j.engine_ready is None and j.assess(T0 + 9).verdict == "starting"
