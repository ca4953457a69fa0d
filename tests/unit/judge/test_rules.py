"""Each rule the README states about the judge, with a test that fails when the rule is broken.

(The README's "Slow or hung?", "The readiness ladder" and "JSON output" sections.) Pure: recorded
observations in, verdicts and events out.
"""

from __future__ import annotations

import dataclasses

from firstlight.config import JudgeConfig
from firstlight.engines import get_profile
from firstlight.timeline import GpuDevice, GpuSample, Level, LogLine, Probe, ProcessSample, ProcInfo
from firstlight.vocab import PHASE_INDEX
from tests.support.judge import RULES, T0, ladder_up_to_models, probe, proc, run
from tests.support.judge_rules import STALL, _judge

SGLANG = get_profile("sglang")


VLLM = get_profile("vllm")


# -- generations ------------------------------------------------------------------------------------------
def test_three_bad_answers_in_a_row_reset_after_a_transient_one():
    bad = [probe(2 + i, Level.GENERATION, False, "POST -> 200 but an empty completion", transient=False)
           for i in range(2)]
    transient = probe(5, Level.GENERATION, False, "POST -> 503", transient=True)
    bad2 = [probe(6 + i, Level.GENERATION, False, "POST -> 200 but an empty completion", transient=False)
            for i in range(2)]
    a = run([proc(1), *ladder_up_to_models(1), *bad, transient, *bad2], 9)
    assert a.verdict == "starting"  # 2 + (reset) 2: never three in a row
    a = run([proc(1), *ladder_up_to_models(1), *bad, *bad2[:1]], 9)
    assert a.verdict == "failed" and a.failure == "bad_generation"


# -- progress ---------------------------------------------------------------------------------------------
def _stalled_except(extra: list, now: float = 15) -> str:
    obs = [proc(0), *extra]
    return run(obs, now, rules=STALL).verdict


def test_rss_growth_is_progress():
    assert _stalled_except([proc(1)], 15) == "hung"
    assert _stalled_except([proc(1), proc(8, rss=(100 << 20) + (64 << 20))], 15) == "starting"


def test_gpu_memory_change_is_progress():
    def gpu(t: float, used: int) -> GpuSample:
        return GpuSample(T0 + t, (GpuDevice(0, "H100", used, 80 << 30, 0.0),))

    assert _stalled_except([gpu(1, 1 << 30), gpu(8, 1 << 30)]) == "hung"
    assert _stalled_except([gpu(1, 1 << 30), gpu(8, 5 << 30)]) == "starting"


def test_a_new_process_is_progress():
    worker = ProcInfo(101, "worker", "sleeping", 0.0, 1 << 20, T0 + 8)
    server = ProcInfo(100, "server", "sleeping", 0.0, 100 << 20, T0)
    assert _stalled_except([proc(8)]) == "hung"
    assert _stalled_except([proc(8, procs=(server, worker))]) == "starting"


def test_disk_reads_are_progress():
    assert _stalled_except([proc(8, read=(2 << 20))]) == "starting"


def test_cpu_alone_is_weak_progress_hung_only_after_the_spin_timeout():
    rules = JudgeConfig(timeout=600, stall_timeout=10, spin_timeout=30)
    obs = [proc(i, cpu=float(i)) for i in range(0, 40)]
    assert run(obs[:26], 25, rules=rules).verdict == "starting"  # 25 s of CPU alone, stall 10 s: not hung
    a = run(obs, 39, rules=rules)
    assert a.verdict == "hung" and a.detail == "busy-wait suspected"


def test_compiler_children_are_strong_progress_and_one_aggregate_note():
    j = _judge()
    server = ProcInfo(100, "server", "sleeping", 0.0, 100 << 20, T0)
    j.feed(proc(0, procs=(server,)))
    events = []
    for i in range(1, 9):
        cc = ProcInfo(200 + i, "cc1plus", "running", 0.1, 1 << 20, T0 + i)
        events += j.feed(proc(i, procs=(server, cc)))
    notes = [e for e in events if e.type == "note"]
    assert len(notes) == 1 and "compiling: " in notes[0].message, notes
    assert not any("new process" in e.message for e in events)
    assert j.assess(T0 + 17).verdict == "starting"  # 9 s after the last compiler run, stall 10 s
    assert "compiler run" in j.marks.last_strong.value


def test_a_slow_generation_carries_what_the_server_did_meanwhile():
    j = _judge()
    server = ProcInfo(100, "server", "sleeping", 0.0, 100 << 20, T0)
    j.feed(proc(0, procs=(server,)))
    for i in range(1, 20):
        cc = ProcInfo(300 + i, "ptxas", "running", 0.1, 1 << 20, T0 + i)
        j.feed(ProcessSample(T0 + i, True, cpu_seconds=i * 0.9, rss_bytes=100 << 20, procs=(server, cc)))
    for o in ladder_up_to_models(1):
        j.feed(o)
    events = j.feed(Probe(T0 + 20, Level.GENERATION, True, "ok", latency_s=18.0, text=" Paris"))
    assert j.first_generation is not None
    meanwhile = j.first_generation["meanwhile"]
    assert meanwhile and "compiler runs" in meanwhile and "CPU" in meanwhile, meanwhile
    assert any(e.type == "phase" and e.message == "ready" for e in events)


# -- warnings ---------------------------------------------------------------------------------------------
def test_a_zombie_is_reported_once_after_its_threshold_only():
    j = _judge(rules=JudgeConfig(zombie_seconds=5))
    z = ProcInfo(101, "worker", "zombie", 1.0, 0, T0)
    s = ProcInfo(100, "server", "sleeping", 0.0, 100 << 20, T0)

    def feed(t: float, zombies: tuple[ProcInfo, ...] = (z,)) -> list[str]:
        sample = dataclasses.replace(proc(t, procs=(s,)), zombies=zombies)
        return [e.message for e in j.feed(sample) if e.type == "warning"]

    assert feed(1) == [] and feed(5.9) == []  # reaped soon after, as parents do: nothing to say
    late = feed(6)
    assert len(late) == 1 and "worker[101] is a zombie" in late[0] and "for 5s" in late[0], late
    assert feed(20) == []  # once
    assert feed(21, ()) == [] and feed(22) == [] and feed(40) == []  # the same pid is not reported twice


def test_a_zombie_reaped_before_its_threshold_starts_over():
    j = _judge(rules=JudgeConfig(zombie_seconds=5))
    z = ProcInfo(101, "worker", "zombie", 1.0, 0, T0)
    s = ProcInfo(100, "server", "sleeping", 0.0, 100 << 20, T0)
    for t, zombies in ((1, (z,)), (4, (z,)), (5, ()), (6, (z,)), (10, (z,))):
        sample = dataclasses.replace(proc(t, procs=(s,)), zombies=zombies)
        assert not [e for e in j.feed(sample) if e.type == "warning"], t


def test_d_state_is_reported_after_its_threshold_only():
    j = _judge(rules=JudgeConfig(d_state_seconds=30))
    d = ProcInfo(100, "server", "disk-sleep", 0.0, 100 << 20, T0)
    early = [e for t in range(0, 20, 5) for e in j.feed(proc(t, procs=(d,)))]
    assert not [e for e in early if e.type == "warning"]
    late = j.feed(proc(31, procs=(d,)))
    assert [e for e in late if e.type == "warning" and "state D" in e.message]


# -- levels -----------------------------------------------------------------------------------------------
def test_a_level_that_no_longer_holds_is_a_lost_event():
    j = _judge()
    for o in ladder_up_to_models(1):
        j.feed(o)
    events = j.feed(probe(2, Level.HEALTH, False, "GET /health -> 503"))
    assert [(e.type, e.message) for e in events] == [("lost", "health")]
    assert j.ladder.level == Level.HTTP


# -- failures ---------------------------------------------------------------------------------------------
def test_a_generic_fatal_line_waits_for_the_root_cause():
    j = _judge(SGLANG)
    j.feed(LogLine(T0 + 1, "[2025-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call "
                           "last):", "stderr", 10))
    assert j.assess(T0 + 1.2).verdict == "starting"  # a generic wrapper: the cause comes after it
    j.feed(LogLine(T0 + 1.3, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "stderr", 30))
    assert j.assess(T0 + 1.4).verdict == "starting"  # ... and the lines after it may say where it died
    a = j.assess(T0 + 2.6)
    assert a.verdict == "failed" and a.failure == "oom"


def test_a_generic_fatal_line_alone_settles_after_its_wait():
    j = _judge(SGLANG)
    j.feed(LogLine(T0 + 1, "[2025-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call "
                           "last):", "stderr", 10))
    assert j.assess(T0 + 2.0).verdict == "starting"
    assert j.assess(T0 + 2.6).verdict == "failed"


def test_the_phase_never_goes_backwards():
    j = _judge(SGLANG)
    for t, text in enumerate(["[2025-01-01 00:00:01 TP0] Load weight begin. avail mem=78.58 GB",
                              "[2025-01-01 00:00:02 TP0] KV Cache is allocated. #tokens: 1000, K size: 1 GB",
                              "[2025-01-01 00:00:03 TP1] Load weight end. type=X, dtype=bf16, avail mem=60 GB",
                              "[2025-01-01 00:00:04 TP0] Memory pool end. avail mem=7.43 GB"]):
        j.feed(LogLine(T0 + t + 1, text, "stderr", t + 1))
    assert [p.name for p in j.phases.spans] == ["process_start", "weights_loading", "kv_cache"]


def test_vllm_compile_after_weights_is_not_weights_loading():
    j = _judge(VLLM)
    lines = ["INFO 11-30 10:00:01 [gpu_model_runner.py:1] Starting to load model /m...",
             "INFO 11-30 10:00:02 [default_loader.py:1] Loading weights took 0.50 seconds",
             "INFO 11-30 10:00:03 [gpu_model_runner.py:1] Model loading took 0.25 GiB and 1.0 seconds",
             "INFO 11-30 10:00:04 [backends.py:1] Using cache directory: /root/.cache/vllm/torch_compile_cache",
             "INFO 11-30 10:00:05 [default_loader.py:1] Loading weights took 0.10 seconds"]
    for i, text in enumerate(lines):
        j.feed(LogLine(T0 + i + 1, text, "stderr", i + 1))
    names = [p.name for p in j.phases.spans]
    assert names == sorted(names, key=PHASE_INDEX.__getitem__), names
    assert names[-1] != "weights_loading", names


def test_an_argument_error_is_bad_argument_with_the_parsers_line():
    j = _judge(VLLM)
    j.feed(LogLine(T0 + 1, "api_server.py: error: unrecognized arguments: --bogus-flag", "stderr", 3))
    j.feed(LogLine(T0 + 1, "To show complete usage, run with -h", "stderr", 4))
    j.feed(ProcessSample(T0 + 2, alive=False, exit_code=2))
    a = j.assess(T0 + 2)
    assert a.verdict == "failed" and a.failure == "bad_argument", a
    assert "unrecognized arguments" in a.evidence[0].value


def test_regression_is_not_a_judge_verdict_but_a_result():
    from firstlight.vocab import FINAL_VERDICTS
    assert "regression" not in FINAL_VERDICTS
    assert RULES.timeout == 600


def test_the_interpreter_alone_never_moves_the_phase_back():
    from firstlight.interpret import LineInterpreter

    lines = LineInterpreter(SGLANG)
    for text in ("[2025-01-01 00:00:01 TP0] Load weight begin. avail mem=78.58 GB",
                 "[2025-01-01 00:00:02 TP0] KV Cache is allocated. #tokens: 1000, K size: 1 GB",
                 "[2025-01-01 00:00:03 TP1] Load weight end. type=X, dtype=bf16, avail mem=60 GB"):
        lines.feed(text)
    assert lines.phase == "kv_cache"


def test_a_log_line_never_moves_the_phase_back_behind_a_probe():
    j = _judge(SGLANG)
    j.feed(LogLine(T0 + 1, "[2025-01-01 00:00:01 TP0] Load weight begin. avail mem=78.58 GB", "stderr", 1))
    for o in ladder_up_to_models(2):  # /health answers: warm-up (SGLang 0.4 says 200 during the load)
        j.feed(o)
    j.feed(LogLine(T0 + 3, "[2025-01-01 00:00:03 TP0] KV Cache is allocated. #tokens: 1000, K size: 1 GB",
                   "stderr", 2))
    names = [p.name for p in j.phases.spans]
    assert names == sorted(names, key=PHASE_INDEX.__getitem__), names


def test_a_failed_process_sampler_is_a_missing_signal_not_a_hang_and_the_verdict_names_it():
    from firstlight.timeline import SourceNote

    rules = JudgeConfig(timeout=60, stall_timeout=10, spin_timeout=900)
    failed = SourceNote(T0 + 2, "process", "sampler failed: OSError: [Errno 5] Input/output error; its signal is "
                                           "missing until it samples again", failed=True)
    obs = [proc(0), proc(1), failed]
    assert run(obs, 30, rules=rules).verdict == "starting"  # 28 s without a sample: no `hung` from a lost signal
    timeout = run(obs, 61, rules=rules)
    assert timeout.verdict == "timeout"
    assert any(e.signal == "sampler:process" and "Input/output error" in e.value for e in timeout.evidence)
    # it works again: stillness is a signal again, and a stall is a hang
    again = SourceNote(T0 + 3, "process", "sampler works again")
    assert run([*obs, again, proc(3)], 30, rules=rules).verdict == "hung"


def test_only_the_process_samplers_failure_suspends_the_stall_rule():
    from firstlight.timeline import SourceNote

    rules = JudgeConfig(timeout=60, stall_timeout=10, spin_timeout=900)
    gpu = SourceNote(T0 + 2, "gpu", "sampler failed: NVMLError: Unknown Error", failed=True)
    assert run([proc(0), proc(1), gpu], 30, rules=rules).verdict == "hung"
