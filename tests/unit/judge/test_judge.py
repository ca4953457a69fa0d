"""The judge replays recorded timelines: no clocks, no I/O, the same verdict every time.

The in-process tests of this subject; the others: ``tests/e2e/judge/test_judge.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlight.config import JudgeConfig
from firstlight.drive import judge_timeline
from firstlight.engines import get_profile
from firstlight.judge import Judge
from firstlight.timeline import (
    GpuDevice,
    GpuProcess,
    GpuSample,
    Interrupted,
    Level,
    LogLine,
    Observation,
    ProcInfo,
    Started,
    WeightsTotal,
    from_dict,
)
from tests.support.judge import GENERIC, RULES, T0, ladder_up_to_models, probe, proc, run

SGLANG = get_profile("sglang")


def test_ready_only_after_a_real_generation():
    obs = [proc(1), *ladder_up_to_models(2), probe(2, Level.GENERATION, False, "POST -> 503 Loading model")]
    a = run(obs, 3)
    assert a.verdict == "starting" and a.level == Level.MODELS
    a = run([*obs, probe(4, Level.GENERATION, True, text=" Paris")], 5)
    assert a.verdict == "ready" and a.phase == "ready"
    assert a.evidence[0].signal == "probe:generation" and "Paris" in a.evidence[0].value


def test_health_and_models_alone_never_ready():
    obs: list[Observation] = []
    for i in range(100):
        obs += [proc(i, cpu=i * 0.5, read=i << 24), *ladder_up_to_models(i)]
    a = run(obs, 100)
    assert a.verdict == "starting"
    assert a.level == Level.MODELS


def test_engine_ready_marker_is_not_ready_without_generation():
    line = LogLine(T0 + 5, "[2025-01-01 00:00:00] The server is fired up and ready to roll!", "stderr", 40)
    a = run([proc(1), line, *ladder_up_to_models(5)], 6, profile=SGLANG)
    assert a.verdict == "starting" and a.engine_ready


def test_fatal_log_line_fails_before_the_process_exits_with_the_root_cause():
    lines = [
        LogLine(T0 + 3, "[2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                "stderr", 50),
        LogLine(T0 + 3.1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB.", "stderr", 61),
    ]
    a = run([proc(1), *lines, proc(3.2)], 4.6, profile=SGLANG)  # 1.5 s for the lines that may say where
    assert a.verdict == "failed"
    assert a.failure == "oom"
    assert any(e.signal == "log" and "line 61" in e.value for e in a.evidence)
    assert a.hint


def test_process_exit_is_failed_with_the_last_line_as_evidence():
    obs = [proc(1), LogLine(T0 + 1.5, "loading something", "stderr", 7), proc(2, alive=False, exit_code=3)]
    a = run(obs, 2.5)
    assert a.verdict == "failed"
    assert "code 3" in a.evidence[0].value
    assert any("loading something" in e.value for e in a.evidence)


def test_silent_log_with_steady_disk_reads_is_never_hung():
    # 30 minutes of log silence, but the tree reads 200 MB every second: slow, not hung.
    obs: list[Observation] = [LogLine(T0 + 1, "Load weight begin. avail mem=78.50 GB", "stderr", 1)]
    for i in range(2, 1800):
        obs.append(proc(i, cpu=i * 0.01, read=i * 200_000_000))
    a = run(obs, 1800, rules=JudgeConfig(timeout=7200, stall_timeout=120, spin_timeout=900))
    assert a.verdict == "starting"
    assert a.progress.since_last_log_s is not None and a.progress.since_last_log_s > 1700


def test_stall_is_hung_with_the_last_progress_named():
    obs: list[Observation] = [LogLine(T0 + 1, "Load weight end. type=X", "stderr", 9)]
    obs += [proc(i, cpu=5.0, read=10 << 20) for i in range(2, 200)]  # nothing moves
    judge = Judge(RULES, GENERIC, T0)
    for o in [Started(T0, 100, "http://x", "generic", True), *obs]:
        judge.feed(o)
    assert judge.assess(T0 + 120).verdict == "starting"
    a = judge.assess(T0 + 121.5)
    assert a.verdict == "hung" and a.detail == "no progress"
    first = a.evidence[0]
    assert "Load weight end" in first.value and first.since == pytest.approx(T0 + 1)


def test_access_log_lines_from_our_probes_are_not_progress():
    obs: list[Observation] = [LogLine(T0 + 1, "load_model: loading model 'm.gguf'", "stderr", 1)]
    for i in range(2, 200):
        obs.append(proc(i, cpu=1.0))
        obs.append(LogLine(T0 + i, "srv  log_server_r: request: GET /health 127.0.0.1 503", "stderr", i))
        obs.append(LogLine(T0 + i + 0.5, 'INFO:     127.0.0.1:5555 - "GET /health HTTP/1.1" 503 Service '
                                         'Unavailable', "stderr", i))
    a = run(obs, 125)
    assert a.verdict == "hung"


def test_busy_wait_is_hung_after_spin_timeout_only():
    rules = JudgeConfig(timeout=7200, stall_timeout=120, spin_timeout=900)
    obs: list[Observation] = [LogLine(T0 + 1, "Init torch distributed begin.", "stderr", 3)]
    obs += [proc(i, cpu=i * 1.0) for i in range(2, 1000)]  # one core at 100 %, nothing else
    judge = Judge(rules, SGLANG, T0)
    verdicts = {}
    for o in [Started(T0, 100, "http://x", "sglang", True), *obs]:
        judge.feed(o)
        verdicts[round(o.t - T0)] = judge.assess(o.t).verdict
    assert verdicts[800] == "starting"  # weak progress keeps it from plain "hung"
    a = judge.assess(T0 + 902)
    assert a.verdict == "hung" and a.detail == "busy-wait suspected"
    assert a.evidence[0].signal == "cpu" and "100%" in a.evidence[0].value


def test_no_stillness_signal_means_no_hung_verdict_only_timeout():
    # watch URL with nothing but probes: a closed port for minutes is also what a slow vLLM load looks like.
    obs = [probe(i, Level.PORT, False, "connection refused") for i in range(0, 600, 5)]
    rules = JudgeConfig(timeout=500, stall_timeout=60)
    a = judge_timeline([Started(T0, None, "http://x", "generic", False), *obs], rules, GENERIC, T0 + 600)
    assert a.verdict == "timeout"


def test_log_silence_without_the_process_tree_is_never_hung():
    # watch URL --log FILE: the log went quiet 10 minutes ago, but without --pid nobody sees the disk reads.
    obs = [LogLine(T0 + 1, "Load weight begin. avail mem=78.50 GB", "file", 1)]
    obs += [probe(i, Level.PORT, False, "connection refused") for i in range(2, 600, 5)]
    a = judge_timeline([Started(T0, None, "http://x", "sglang", False), *obs], JudgeConfig(timeout=3600,
                       stall_timeout=60), SGLANG, T0 + 600)
    assert a.verdict == "starting"


def test_bad_generations_fail_after_the_attempts():
    obs = [proc(1), *ladder_up_to_models(2)]
    obs += [probe(2 + i, Level.GENERATION, False, "200 but an empty completion", transient=False) for i in range(3)]
    a = run(obs, 6)
    assert a.verdict == "failed" and a.failure == "bad_generation"


def test_transient_generation_failures_do_not_fail():
    obs = [proc(1), *ladder_up_to_models(2)]
    obs += [probe(2 + i, Level.GENERATION, False, "503", transient=True) for i in range(10)]
    assert run(obs, 13).verdict == "starting"


def test_timeout_and_interrupted():
    assert run([proc(1)], 601).verdict == "timeout"
    a = run([proc(1), Interrupted(T0 + 2, "SIGTERM")], 3)
    assert a.verdict == "interrupted" and "SIGTERM" in a.evidence[0].value


def test_weights_eta_within_ten_percent_at_constant_rate():
    total = 10_000_000_000
    rate = 100_000_000  # 100 MB/s -> 100 s
    obs: list[Observation] = [WeightsTotal(T0, total, 4, "/m")]
    obs += [proc(t, read=t * rate) for t in range(0, 26)]
    judge = Judge(RULES, GENERIC, T0)
    for o in [Started(T0, 100, "http://x", "generic", True), *obs]:
        judge.feed(o)
    p = judge.assess(T0 + 25).progress
    assert p.weights_fraction == pytest.approx(0.25)
    assert p.read_rate == pytest.approx(rate, rel=0.01)
    assert p.eta_weights_s == pytest.approx(75, rel=0.10)


def test_worker_death_and_foreign_gpu_process_are_reported():
    worker = ProcInfo(101, "worker", "sleeping", 1.0, 1 << 20, T0)
    root = ProcInfo(100, "server", "sleeping", 1.0, 1 << 20, T0)
    gpu = GpuSample(T0 + 2, (GpuDevice(0, "H100", 76 << 30, 80 << 30, 0.0),),
                    (GpuProcess(0, 4242, 70 << 30, "python"), GpuProcess(0, 100, 6 << 30, "server")))
    obs = [proc(1, procs=(root, worker)), gpu, proc(10, procs=(root,), died=(worker,))]
    judge = Judge(RULES, GENERIC, T0)
    events = []
    for o in [Started(T0, 100, "http://x", "generic", True), *obs]:
        events += judge.feed(o)
    messages = [e.message for e in events if e.type == "warning"]
    assert any("PID 4242" in m and "GPU 0" in m for m in messages)
    assert any("worker[101] died" in m for m in messages)


def test_gpu_occupied_hint_names_the_foreign_pid():
    gpu = GpuSample(T0 + 1, (GpuDevice(0, "H100", 76 << 30, 80 << 30, 0.0),),
                    (GpuProcess(0, 4242, 70 << 30, "python"),))
    line = LogLine(T0 + 2, "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other "
                           "processes. pre_model_load_memory=[76.1, 2.3]", "stderr", 12)
    a = run([proc(0.5), gpu, line, proc(3, alive=False, exit_code=1)], 3.5, profile=SGLANG)
    assert a.failure == "gpu_occupied" and "4242" in (a.hint or "")


def test_recorded_timeline_replays_to_the_same_verdict(tmp_path: Path):
    obs = [Started(T0, 100, "http://x", "generic", True), proc(1, procs=(ProcInfo(100, "s", "running", 1, 2, T0),)),
           LogLine(T0 + 1.2, "hello", "stdout", 1), *ladder_up_to_models(2),
           GpuSample(T0 + 2, (GpuDevice(0, "H100", 1, 2, 3.0),), (GpuProcess(0, 100, 1),)),
           probe(3, Level.GENERATION, True, text=" Paris")]
    path = tmp_path / "timeline.jsonl"
    path.write_text("".join(json.dumps(o.to_dict()) + "\n" for o in obs))
    loaded = [from_dict(json.loads(line)) for line in path.read_text().splitlines()]
    assert loaded == obs
    a = judge_timeline(loaded, RULES, GENERIC, T0 + 4)
    assert a.verdict == "ready" and a.phase == "ready"


# -- judge.py: GPU utilisation alone is weak progress ---------------------------------------------------------
def test_gpu_utilisation_alone_is_weak_progress_hung_only_after_the_spin_timeout():
    rules = JudgeConfig(timeout=600, stall_timeout=10, spin_timeout=30)

    def busy(t: float) -> GpuSample:  # 100 % busy, memory never changes
        return GpuSample(t + 1_700_000_000.0, (GpuDevice(0, "H100", 40 << 30, 80 << 30, 100.0),))

    obs = [proc(0), *(busy(i) for i in range(1, 40))]
    a = run(obs[:26], 25, rules=rules)
    assert a.verdict == "starting", a  # 25 s of utilisation alone, stall 10 s: not hung
    a = run(obs, 39, rules=rules)
    assert a.verdict == "hung" and a.detail == "busy-wait suspected", a
    assert any("utilisation" in e.value for e in a.evidence)
