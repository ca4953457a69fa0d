"""The trackers (firstlight/trackers.py): the log (what a line meant, the lines quoted), the ladder, the progress,
the progress marks, the process tree with the GPUs; and the judge's progress thresholds at their defaults
(JudgeConfig()): CPU at 10 % of a core or more is weak progress (hung only after --spin-timeout, 900 s), under it
no progress (hung after --stall-timeout, 120 s)."""

from __future__ import annotations

from firstlight.anatomy import Signals
from firstlight.config import JudgeConfig
from firstlight.drive import judge_timeline
from firstlight.engines import get_profile
from firstlight.timeline import LogLine, Observation, Started
from firstlight.trackers import LogTracker, ProgressTracker
from tests.support.judge import T0, proc

DEFAULTS = JudgeConfig()


def _busy(cpu_per_10s: float, until: float) -> str:
    """A silent process using ``cpu_per_10s`` CPU seconds every 10 s; the verdict at ``until``."""
    obs: list[Observation] = [Started(T0, 100, "http://x", "generic", True)]
    obs += [proc(float(t), cpu=t / 10 * cpu_per_10s) for t in range(0, int(until) + 1, 10)]
    return judge_timeline(obs, DEFAULTS, get_profile("generic"), T0 + until).verdict


def test_cpu_at_0_10_cores_is_weak_progress_hung_only_after_the_900s_spin_timeout():
    assert _busy(1.0, 890) == "starting"  # 0.10 cores: weak progress holds off the 120 s stall rule
    assert _busy(1.0, 910) == "hung"


def test_cpu_under_0_10_cores_is_no_progress_hung_after_the_120s_stall_timeout():
    assert _busy(0.9, 110) == "starting"
    assert _busy(0.9, 130) == "hung"  # 0.09 cores


def test_the_default_thresholds():
    assert (DEFAULTS.cpu_busy_cores, DEFAULTS.stall_timeout, DEFAULTS.spin_timeout) == (0.10, 120.0, 900.0)


# -- the readiness ladder and the progress, each a tracker of its own ----------------------------------------
def test_the_ladder_tracker_reaches_loses_and_counts_wrong_answers():
    from firstlight.timeline import Level, Probe
    from firstlight.trackers import LadderTracker

    lad = LadderTracker()
    lad.process_seen(1.0)
    assert (lad.level, lad.since) == (Level.PROCESS, {Level.PROCESS: 1.0})
    assert lad.held(Probe(2.0, Level.HTTP, True, "GET /health -> 503")) == [Level.PORT, Level.HTTP]
    assert lad.held(Probe(3.0, Level.PORT, True, "again")) == [] and lad.level == Level.HTTP  # never down on a hold
    port_lost = Probe(4.0, Level.PORT, False, "refused")
    assert lad.failed(port_lost, ready=False) and lad.level == Level.PROCESS and lad.last_failure is port_lost
    assert lad.held(Probe(5.0, Level.HTTP, True, "back")) == []  # reached before: its first time stays 2.0
    assert lad.since[Level.HTTP] == 2.0 and lad.level == Level.HTTP
    wrong = Probe(6.0, Level.GENERATION, False, "200 but empty", transient=False)
    assert not lad.failed(wrong, ready=False)  # above the level that holds: nothing to lose
    assert lad.failed(Probe(6.5, Level.PORT, False, "after READY"), ready=True) is False  # READY keeps its levels
    lad.failed(wrong, ready=False)
    assert lad.bad_answers == [wrong, wrong]
    assert (wrong.state, Probe(7.0, Level.PORT, True).state) == ("bad", "ok")
    loading = Probe(7.0, Level.GENERATION, False, "503 loading", transient=True)
    assert loading.state == "not_yet"
    lad.failed(loading, ready=False)
    assert lad.bad_answers == []  # a server still loading is no wrong answer: the count starts again


def test_the_progress_tracker_reads_the_weights_from_the_reads_else_the_shard_bar():
    from firstlight.timeline import WeightsTotal
    from firstlight.trackers import CompileTracker, GpuTracker, ProcessTracker, ProgressTracker

    procs = ProcessTracker(DEFAULTS, CompileTracker())
    gpus = GpuTracker(DEFAULTS.gpu_mem_step_bytes)
    pt = ProgressTracker(T0, expected_total_s=100.0)
    p = pt.progress(T0 + 30, procs, gpus, None, T0)
    assert (p.weights_fraction, p.eta_total_s, p.since_last_log_s) == (None, 70.0, None)
    pt.progress_line(T0 + 10, "Loading shards: 1/4", "shards", 1, 4)
    p = pt.progress(T0 + 10, procs, gpus, None, T0)
    assert (p.weights_fraction, p.weights_source, p.shard) == (0.25, "log", (1, 4))
    assert p.progress_line == "Loading shards: 1/4"
    assert p.eta_weights_s == 30.0  # 10 s for a quarter: 30 s for the rest
    pt.weights_total = WeightsTotal(T0, 4_000, 4, "/m")
    assert pt.progress(T0 + 10, procs, gpus, None, T0).weights_bytes == 4_000
    pt.progress_line(T0 + 12, "Downloading 5%", "download", 5, 100)
    assert pt.shard == (1, 4, 0.25, T0 + 10) and pt.line == "Downloading 5%"  # a download is no shard


def test_the_log_tracker_reads_each_line_once_and_keeps_what_the_judge_and_the_anatomy_quote():
    signals = Signals()
    log = LogTracker(get_profile("vllm"), signals, ProgressTracker(T0, None))
    texts = ["INFO 12-01 10:00:00 [x.py:1] Starting to load model /m...",
             "INFO 12-01 10:00:01 [x.py:1] vLLM API server version 0.11.0",
             "INFO 12-01 10:00:02 [x.py:1] Loading weights took 3.50 seconds",
             "INFO 12-01 10:00:03 [x.py:1] Directly load the compiled graph(s) for dynamic shape from the cache",
             "INFO:     127.0.0.1:5 - \"GET /health HTTP/1.1\" 200 OK"]
    marks = [log.feed(LogLine(T0 + i, text, lineno=i + 1))[1] for i, text in enumerate(texts)]
    assert marks[0] is not None and marks[-1] is None  # an access line (our own probe) is no progress
    assert log.count == 5 and log.last is not None and log.last.lineno == 5
    assert [e.value.split(":")[0] for e in log.tail_evidence()] == ["last line 2", "last line 3", "last line 4"]
    assert log.lines_between(T0 + 1, T0 + 3) == 3 and log.lines_between(T0 + 4, T0 + 9) == 0
    assert signals.compile_lines and signals.compile_lines[0][1] == "hit"
    assert signals.clocks and signals.clocks[0].stage


# -- the progress marks and the process tree ------------------------------------------------------------------
def test_the_mark_tracker_keeps_the_latest_strong_mark_and_the_last_weak_one():
    from firstlight.budgets import QuietTracker
    from firstlight.trackers import Mark, MarkTracker

    quiet = QuietTracker()
    quiet.enter("process_start", T0)
    marks = MarkTracker(T0, quiet)
    assert (marks.last_strong, marks.last_weak) == (Mark(T0, "watch", "firstlight started watching"), None)
    marks.strong(T0 + 5, "disk", "8 MB read")
    marks.strong(T0 + 3, "log", "a late line")  # older than the last mark: it does not replace it
    assert marks.last_strong == Mark(T0 + 5, "disk", "8 MB read")
    marks.weak(T0 + 6, "gpu", "GPU 0 utilisation 90%")
    marks.weak(T0 + 4, "cpu", "CPU busy at 100% of a core")  # the weak mark is the last one told
    assert marks.last_weak == Mark(T0 + 4, "cpu", "CPU busy at 100% of a core")
    assert quiet.silence(T0 + 7) == 2.0  # the strong marks are the phases' silences too
    assert quiet.of("process_start", T0 + 7)["moved"] == ["cpu", "disk", "gpu_util", "log"]


def test_the_tree_tracker_knows_the_server_its_samples_its_gpus_and_its_sampler():
    from firstlight.assessment import Evidence
    from firstlight.budgets import QuietTracker
    from firstlight.timeline import GpuDevice, GpuProcess, GpuSample, SourceNote, Started
    from firstlight.trackers import MarkTracker, TreeTracker

    marks = MarkTracker(T0, QuietTracker())
    tree = TreeTracker(DEFAULTS, Signals(), marks)
    tree.started(Started(T0, None, "http://x"))
    assert (tree.pid, tree.launched, tree.has_stillness_signal) == (None, False, False)  # attached to a URL only
    tree.started(Started(T0, 100, "http://x", "vllm", True))
    assert (tree.pid, tree.launched, tree.has_stillness_signal) == (100, True, True)
    tree.process(proc(1.0, read=0))
    assert tree.process(proc(2.0, read=64 << 20)) == [] and marks.last_strong.signal == "disk"
    gpu = GpuSample(T0 + 3, devices=(GpuDevice(0, "H100", 1 << 30, 80 << 30, 0.0),),
                    processes=(GpuProcess(0, 100, 1 << 30), GpuProcess(0, 777, 2 << 30, "python")))
    events = tree.gpu(gpu)  # the server's own PID is in its tree; another holds the GPU too
    assert [e.type for e in events] == ["warning"] and "PID 777 python" in events[0].message
    assert tree.warnings == [Evidence("gpu", events[0].message, T0 + 3)]
    failed = SourceNote(T0 + 4, "process", "psutil failed", failed=True)
    assert [e.type for e in tree.note(failed)] == ["warning"] and tree.process_failed is failed
    assert [e.type for e in tree.note(SourceNote(T0 + 5, "process", "works again"))] == ["note"]
    assert tree.process_failed is None and len(tree.notes) == 2
    gone = proc(6.0, alive=False, exit_code=1)
    tree.ended(gone)
    assert tree.procs.prev is gone


def test_a_slow_generation_is_noted_with_what_the_server_did_meanwhile():
    from firstlight.budgets import QuietTracker
    from firstlight.timeline import Level, Probe
    from firstlight.trackers import SLOW_PROBE_S, MarkTracker, TreeTracker

    tree = TreeTracker(DEFAULTS, Signals(), MarkTracker(T0, QuietTracker()))
    log = LogTracker(get_profile("vllm"), Signals(), ProgressTracker(T0, None))
    quick = Probe(T0 + 10, Level.GENERATION, False, "503", latency_s=SLOW_PROBE_S - 0.1)
    assert tree.activity_during(quick, log) is None and tree.slow_generation(quick, log) == []
    slow = Probe(T0 + 10, Level.GENERATION, False, "503", latency_s=SLOW_PROBE_S)
    assert tree.activity_during(slow, log) == "0 log lines"
    [note] = tree.slow_generation(slow, log)
    assert note.message == "generation not answered after 5s; meanwhile the server: 0 log lines"
