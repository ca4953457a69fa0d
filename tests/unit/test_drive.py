"""The driver of the judge (firstlight.drive), in process: the engine learnt late (from its lines or its
endpoints) and the judge swapped, the kept observations fed again (bounded, in order, once), and when it
assesses. Each test is named for the rule it pins; the real detector, profiles and judge, no stand-ins."""

from __future__ import annotations

import pytest

import firstlight.drive as drive
from firstlight.assessment import Assessment, Event
from firstlight.config import JudgeConfig
from firstlight.drive import Driver
from firstlight.engines import get_profile, words
from firstlight.logreplay import REPLAY_RULES
from firstlight.timeline import Interrupted, Level, LogLine, Observation, Probe, ProcessSample, Started
from firstlight.vocab import FAILED, HUNG, INTERRUPTED, STARTING
from tests.support.common import REPO

GENERIC, LLAMA = get_profile("generic"), get_profile("llamacpp")
T0 = 1_000.0
RULES = JudgeConfig(timeout=3600, stall_timeout=120)

# llama.cpp lines the generic profile reads as nothing. The detector needs a weight of 4: TENSORS (3) alone is
# not enough, TENSORS then CUDA_INIT (+1) or CONTEXT (+3) is.
TENSORS = "load_tensors: offloading 32 repeating layers to GPU"  # llama.cpp: weights_loading
CUDA_INIT = "ggml_cuda_init: found 1 CUDA devices:"  # no phase
CONTEXT = "llama_new_context_with_model: n_ctx      = 4096"  # llama.cpp: kv_cache
GENERIC_LINE = "INFO: something unremarkable happened"  # no engine's, no phase
# A llama.cpp OOM at the default verbosity, the lines the detector cannot place (1 point in all): its
# common_init_from_params line and its loader's (llama_model_load:, llama_load_model_from_file:) name
# llama.cpp, left out
OOM = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: cudaMalloc failed: "
       "out of memory",
       "alloc_tensor_range: failed to allocate CUDA0 buffer of size 9437184000",
       "main: exiting due to model loading error")


def line(t: float, text: str, n: int, final: bool = True) -> LogLine:
    return LogLine(T0 + t, text, "stderr", n, final)


def lines(*texts: str, t: float = 1.0, step: float = 1.0) -> list[LogLine]:
    return [line(t + i * step, text, i + 1) for i, text in enumerate(texts)]


def detecting() -> Driver:
    return Driver(RULES, GENERIC, T0, detect=True)


def known_from_start(observations: list[Observation], engine: str = "llamacpp") -> tuple[Driver, Assessment]:
    """What a driver told the engine up front makes of the same observations (a replay with --engine)."""
    d = Driver(RULES, get_profile(engine), T0)
    a = None
    for obs in observations:
        a = d.feed(obs).assessment
    assert a is not None
    return d, a


def phases(d: Driver) -> list[tuple[str, float, int | None]]:
    return [(s.name, s.start - T0, s.line) for s in d.judge.phases.spans]


# -- the engine detected from its lines: a fresh judge, fed again ----------------------------------------------
def test_detection_from_lines_swaps_in_a_judge_with_the_engines_profile() -> None:
    d = detecting()
    first = d.feed(line(1, TENSORS, 1))
    assert first.engine is None and d.detecting and d.profile.name == "generic"
    generic_judge = d.judge
    step = d.feed(line(2, CUDA_INIT, 2))
    assert step.engine == "llamacpp"
    assert d.profile is LLAMA and d.judge.profile is LLAMA and d.judge is not generic_judge
    assert not d.detecting
    assert step.events[-1].type == "note" and step.events[-1].t == T0 + 2
    assert step.events[-1].message == "engine detected from its log lines: llamacpp"


def test_a_line_read_before_detection_is_read_again_with_the_engines_markers() -> None:
    d = detecting()
    d.feed(line(1, TENSORS, 1))
    assert phases(d) == [("process_start", 0.0, None)]  # generic: the line means nothing
    d.feed(line(2, CUDA_INIT, 2))
    assert phases(d) == [("process_start", 0.0, None), ("weights_loading", 1.0, 1)]


def test_the_phases_read_again_are_reported_with_the_swap_and_only_those_the_generic_reading_missed() -> None:
    """A health probe made 'warmup' under both readings: the reporters heard it already, once is enough."""
    d = detecting()
    d.feed(line(1, TENSORS, 1))
    warm = d.feed(Probe(T0 + 2, Level.HEALTH, True, "GET /health -> 200"))
    assert [(e.type, e.message) for e in warm.events if e.type == "phase"] == [("phase", "warmup")]
    step = d.feed(line(3, CUDA_INIT, 2))
    assert [(e.type, e.message, e.t - T0, e.data) for e in step.events] == [
        ("phase", "weights_loading", 1.0, {"source": "log", "line": 1}),
        ("note", "engine detected from its log lines: llamacpp", 3.0, {})]
    assert phases(d) == [("process_start", 0.0, None), ("weights_loading", 1.0, 1), ("warmup", 2.0, None)]


def test_the_swapped_judge_reads_exactly_what_a_judge_told_the_engine_up_front_reads() -> None:
    timeline: list[Observation] = [Started(T0, 100, "http://x", "generic", True), *lines(TENSORS, CONTEXT),
                                   line(3, "llama_kv_cache_unified: KV self size = 512.00 MiB", 3)]
    d = detecting()
    steps = [d.feed(o) for o in timeline]
    assert [s.engine for s in steps] == [None, None, "llamacpp", None]
    known, a = known_from_start(timeline)
    assert steps[-1].assessment == a
    assert d.judge.phases.spans == known.judge.phases.spans and d.judge.ladder.level == known.judge.ladder.level


def test_an_oom_printed_before_the_engine_is_known_is_read_with_its_markers_when_the_endpoints_tell_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp at the default verbosity: OOM lines the detector cannot place, the exit, then /props answers
    as llama.cpp's does. The generic verdict (exited, the OOM its generic wording names) was already final: it is
    judged again."""
    monkeypatch.setattr(words, "MIN_WORDS", 10_000)  # three lines' words too few to name it (as a shorter log's)
    timeline: list[Observation] = [Started(T0, 100, "http://x", "generic", True),
                                   *lines(*OOM, step=0.01), ProcessSample(T0 + 2, False, exit_code=1)]
    d = detecting()
    for obs in timeline:
        generic = d.feed(obs).assessment
    # ggml's "cudaMalloc failed: out of memory" is an OOM under every profile, the generic one too
    assert (generic.verdict, generic.failure, generic.final) == (FAILED, "oom", True) and d.detecting
    step = d.use_engine("llamacpp", T0 + 3, "engine identified by its endpoints (/props): llamacpp")
    assert step.engine == "llamacpp" and d.profile is LLAMA and not d.detecting
    assert (step.assessment.verdict, step.assessment.failure) == (FAILED, "oom")
    assert step.assessment.evidence[0].value.startswith("line 1: ggml_backend_cuda_buffer_type_alloc_buffer")
    # llama.cpp's reading places the death: its loader's "exiting due to model loading error" says weights_loading
    assert step.events == [Event(T0 + 1.02, "phase", "weights_loading", {"source": "log", "line": 3}),
                           Event(T0 + 3, "note", "engine identified by its endpoints (/props): llamacpp")]
    assert step.assessment == known_from_start(timeline)[1]


def test_an_engine_another_embeds_is_provisional_until_the_embedding_engines_lines_come() -> None:
    # c-ollama-journal-2023-json-runner.log: Ollama's runner prints llama.cpp's lines before Ollama's own
    d = detecting()
    d.feed(line(1, TENSORS, 1))
    assert d.feed(line(2, CUDA_INIT, 2)).engine == "llamacpp" and d.profile is LLAMA
    assert not d.detecting  # the endpoints no longer decide
    assert d.feed(line(3, "sglang is using nccl==2.21.5", 3)).engine is None
    assert d.profile is LLAMA  # SGLang embeds no llama.cpp: it never takes the log
    step = d.feed(line(4, 'time=2024-05-25T03:28:13.829-04:00 level=INFO source=server.go:100 msg="x"', 4))
    assert step.engine == "ollama" and d.profile.name == "ollama"
    assert [(n, ln) for n, _, ln in phases(d)] == [(n, ln) for n, _, ln in phases(known_from_start(
        [line(1, TENSORS, 1), line(2, CUDA_INIT, 2)], "ollama")[0])]
    assert d.detector is None  # Ollama is embedded by none: final


def test_a_provisional_engine_is_final_after_provisional_lines_and_keeps_nothing_more() -> None:
    """A plain vLLM or llama.cpp log is not kept to KEEP_BYTES waiting for an embedding engine: after
    PROVISIONAL_LINES more lines the provisional engine is final (memory bounded by a log's length, not
    proportional to it), and the embedding engine's line no longer takes the log; one line earlier it still does."""
    def provisional_then(n: int) -> Driver:
        d = detecting()
        d.feed(line(1, TENSORS, 1))
        assert d.feed(line(2, CUDA_INIT, 2)).engine == "llamacpp"
        for i in range(n):
            d.feed(line(3 + i, GENERIC_LINE, 3 + i))
        return d

    ollama = 'time=2024-05-25T03:28:13.829-04:00 level=INFO source=server.go:100 msg="x"'
    d = provisional_then(drive.PROVISIONAL_LINES)
    assert d.detector is None and d._kept is None and d.profile is LLAMA
    assert d.feed(line(9_000, ollama, 9_000)).engine is None and d.profile is LLAMA
    d = provisional_then(drive.PROVISIONAL_LINES - 1)
    assert d.detector is not None and d._kept is not None
    assert d.feed(line(9_000, ollama, 9_000)).engine == "ollama" and d.profile.name == "ollama"


def test_the_docs_state_the_provisional_window() -> None:
    text = " ".join((REPO / "docs" / "engines.md").read_text().split())
    assert f"within the next {drive.PROVISIONAL_LINES:,} lines" in text


def test_the_engine_from_the_endpoints_is_ignored_once_it_is_known() -> None:
    d = detecting()
    d.feed(line(1, TENSORS, 1))
    d.feed(line(2, CUDA_INIT, 2))
    judge = d.judge
    step = d.use_engine("vllm", T0 + 3, "endpoints say vllm")
    assert (step.engine, step.events) == (None, []) and d.judge is judge and d.profile is LLAMA
    told = Driver(RULES, LLAMA, T0)  # named on the command line: never detected at all
    assert told.use_engine("vllm", T0 + 1, "endpoints say vllm").engine is None and told.profile is LLAMA


def test_the_whole_start_estimate_survives_the_swap() -> None:
    d = detecting()
    d.expect_total(240.0)
    d.feed(line(1, TENSORS, 1))
    step = d.feed(line(2, CUDA_INIT, 2))
    assert d.judge.progress_tracker.expected_total_s == 240.0
    assert step.assessment.progress.eta_total_s == pytest.approx(240.0 - 2)


# -- what is kept and fed again: everything, in order, once; bounded -------------------------------------------
def test_every_kind_of_observation_kept_is_fed_again_in_arrival_order() -> None:
    """The start, a process sample, a progress redraw and the lines: the new judge has the pid, the process level
    and the last line as the old one saw them."""
    timeline: list[Observation] = [Started(T0, 100, "http://x", "generic", True),
                                   ProcessSample(T0 + 0.5, True, cpu_seconds=1.0, rss_bytes=1 << 30),
                                   line(1, TENSORS, 1), line(1.5, "Loading: 10%", 2, final=False),
                                   line(2, GENERIC_LINE, 2), line(3, CUDA_INIT, 3)]
    d = detecting()
    for obs in timeline:
        d.feed(obs)
    j = d.judge
    assert j.profile is LLAMA
    assert (j.tree.pid, j.tree.launched, j.tree.has_stillness_signal) == (100, True, True)
    assert j.ladder.level == Level.PROCESS
    assert j.tree.procs.prev == timeline[1]
    assert j.log.last == timeline[-1]
    assert j.log.count == 4  # three final lines and the redraw, each once


def test_no_observation_is_fed_twice_neither_at_the_swap_nor_after_it() -> None:
    d = detecting()
    d.feed(line(1, TENSORS, 1))
    d.feed(line(2, CUDA_INIT, 2))  # the detecting line is among the kept ones: fed with them, not again
    assert d.judge.log.count == 2
    for n in range(3, 6):
        step = d.feed(line(n, TENSORS if n == 3 else GENERIC_LINE, n))
        assert step.engine is None and all(e.type != "note" for e in step.events)
        assert d.judge.log.count == n
    assert phases(d) == [("process_start", 0.0, None), ("weights_loading", 1.0, 1)]


def test_lines_kept_up_to_keep_bytes_inclusive_are_judged_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drive, "KEEP_BYTES", len(TENSORS) + len(CONTEXT))
    d = detecting()
    generic_judge = d.judge
    d.feed(line(1, TENSORS, 1))
    d.feed(line(2, CONTEXT, 2))
    assert d.judge is not generic_judge
    assert phases(d) == [("process_start", 0.0, None), ("weights_loading", 1.0, 1), ("kv_cache", 2.0, 2)]


def test_past_keep_bytes_the_profile_is_swapped_in_place_and_earlier_lines_keep_their_generic_reading(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drive, "KEEP_BYTES", len(TENSORS) + len(CONTEXT) - 1)
    d = detecting()
    generic_judge = d.judge
    d.feed(line(1, TENSORS, 1))
    step = d.feed(line(2, CONTEXT, 2))
    assert step.engine == "llamacpp" and d.judge is generic_judge and generic_judge.profile is LLAMA
    # the detecting line itself is read with the engine's markers; the one before it is not read again
    assert phases(d) == [("process_start", 0.0, None), ("kv_cache", 2.0, 2)]
    assert [(e.type, e.message) for e in step.events] == [
        ("phase", "kv_cache"), ("note", "engine detected from its log lines: llamacpp")]
    assert d.judge.log.count == 2


def test_past_keep_bytes_an_engine_from_the_endpoints_is_swapped_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drive, "KEEP_BYTES", 10)
    d = detecting()
    generic_judge = d.judge
    d.feed(line(1, TENSORS, 1))
    assert d.detecting  # still learning the engine: only the re-reading is given up
    step = d.use_engine("llamacpp", T0 + 2, "endpoints")
    assert step.engine == "llamacpp" and d.judge is generic_judge and d.profile is LLAMA
    assert [(e.type, e.message, e.t) for e in step.events] == [("note", "endpoints", T0 + 2)]


def test_detection_gives_up_after_detect_lines_final_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drive, "DETECT_LINES", 3)
    d = detecting()
    d.feed(line(1, GENERIC_LINE, 1))
    d.feed(line(1.5, "Loading: 50%", 2, final=False))  # a redraw is no line read for the engine
    d.feed(line(2, GENERIC_LINE, 2))
    assert d.detecting
    d.feed(line(3, GENERIC_LINE, 3))
    assert not d.detecting
    later = [d.feed(line(4, TENSORS, 4)), d.feed(line(5, CONTEXT, 5))]
    assert [s.engine for s in later] == [None, None] and d.profile is GENERIC
    assert d.use_engine("llamacpp", T0 + 6, "endpoints").engine is None and d.profile is GENERIC


def test_an_engine_found_at_the_last_line_detection_reads_is_still_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drive, "DETECT_LINES", 2)
    d = detecting()
    d.feed(line(1, TENSORS, 1))
    assert d.feed(line(2, CONTEXT, 2)).engine == "llamacpp"
    assert phases(d)[1:] == [("weights_loading", 1.0, 1), ("kv_cache", 2.0, 2)]


def test_a_driver_that_is_not_detecting_keeps_nothing_and_never_swaps() -> None:
    d = Driver(RULES, GENERIC, T0)
    judge = d.judge
    steps = [d.feed(o) for o in lines(TENSORS, CONTEXT, CUDA_INIT)]
    assert not d.detecting and d._kept is None
    assert [s.engine for s in steps] == [None, None, None] and d.judge is judge and d.profile is GENERIC


# -- when it assesses ------------------------------------------------------------------------------------------
def test_each_step_is_assessed_at_its_observations_time() -> None:
    d = detecting()
    timeline: list[Observation] = [Started(T0, 100, "http://x", "generic", True),
                                   ProcessSample(T0 + 5, True, cpu_seconds=1.0), line(7, TENSORS, 1),
                                   line(30, CUDA_INIT, 2)]
    elapsed = [d.feed(o).assessment.elapsed_s for o in timeline]
    assert elapsed == [0.0, 5.0, 7.0, 30.0]
    assert d.use_engine("llamacpp", T0 + 40, "known already").assessment.elapsed_s == 40.0
    assert d.assess(T0 + 41).elapsed_s == 41.0


def test_an_observation_long_after_the_last_progress_is_judged_hung_at_its_own_time() -> None:
    """A process sample that shows nothing moving, stall_timeout after the last progress: hung at that step."""
    d = Driver(RULES, GENERIC, T0)
    d.feed(Started(T0, 100, "http://x", "generic", True))
    assert d.feed(line(1, GENERIC_LINE, 1)).assessment.verdict == STARTING  # the last progress
    assert d.feed(ProcessSample(T0 + RULES.stall_timeout, True)).assessment.verdict == STARTING
    a = d.feed(ProcessSample(T0 + 1 + RULES.stall_timeout, True)).assessment
    assert (a.verdict, a.elapsed_s) == (HUNG, 1 + RULES.stall_timeout)


def test_a_silence_is_judged_on_the_callers_clock_while_nothing_arrives() -> None:
    d = Driver(RULES, GENERIC, T0)
    d.feed(Started(T0, 100, "http://x", "generic", True))
    assert d.feed(line(1, GENERIC_LINE, 1)).assessment.verdict == STARTING  # the last progress
    assert d.assess(T0 + RULES.stall_timeout).verdict == STARTING  # 119 s of silence
    a = d.assess(T0 + 1 + RULES.stall_timeout)
    assert (a.verdict, a.elapsed_s) == (HUNG, 1 + RULES.stall_timeout)
    assert a.evidence[0].value.startswith(f"no progress for {RULES.stall_timeout:.0f}s")


def test_rejudging_assesses_each_kept_observation_at_its_time_so_a_verdict_keeps_the_moment_it_was_made() -> None:
    """The OOM settles at its third line (t = 1.02) under llama.cpp's reading, the loader's exit saying where it
    died; the engine is learnt at t = 3. The verdict is the one made at 1.02, as a judge that knew the engine from
    the start made it, not one made at 3."""
    timeline: list[Observation] = [Started(T0, 100, "http://x", "generic", True), *lines(*OOM, step=0.01)]
    d = detecting()
    for obs in timeline:
        d.feed(obs)
    step = d.use_engine("llamacpp", T0 + 3, "endpoints")
    assert (step.assessment.verdict, step.assessment.failure) == (FAILED, "oom")
    assert step.assessment.elapsed_s == pytest.approx(1.02)
    assert step.assessment == known_from_start(timeline)[1]


def test_a_verdict_final_among_the_kept_observations_stays_as_it_was_made() -> None:
    """A stop signal, then more lines, then the engine: interrupted in the phase it was in at the signal."""
    timeline: list[Observation] = [line(1, TENSORS, 1), Interrupted(T0 + 2, "SIGINT"), line(3, CONTEXT, 2)]
    d = detecting()
    steps = [d.feed(o) for o in timeline]
    a = steps[-1].assessment
    assert steps[-1].engine == "llamacpp"
    assert (a.verdict, a.phase, a.elapsed_s) == (INTERRUPTED, "weights_loading", 2.0)


def test_end_of_log_is_judged_at_its_time() -> None:
    d = Driver(RULES, LLAMA, T0)
    d.feed(line(1, TENSORS, 1))
    a = d.end_of_log(T0 + 4)
    assert a.elapsed_s == 4.0 and a.hint is not None and "loading weights" in a.hint


def test_judge_timeline_is_the_verdict_as_it_was_made_or_else_the_assessment_at_now() -> None:
    timeline: list[Observation] = [Started(T0, 100, "http://x", "llamacpp", True), *lines(*OOM, step=0.01),
                                   ProcessSample(T0 + 2, False, exit_code=1)]
    a = drive.judge_timeline(timeline, RULES, LLAMA, T0 + 500)
    assert (a.verdict, a.failure, a.elapsed_s) == (FAILED, "oom", pytest.approx(1.02))
    quiet: list[Observation] = [Started(T0, None, "http://x", "generic", False), line(1, GENERIC_LINE, 1)]
    assert drive.judge_timeline(quiet, RULES, GENERIC, T0 + 500).elapsed_s == 500.0
    with pytest.raises(ValueError, match="empty timeline"):
        drive.judge_timeline([], RULES, GENERIC, T0)


# -- phases read before detection (issue 35's survivor) -----------------------------------------------------
# vLLM's lines: the first reads as weights_loaded only to vLLM's profile (weights_loading to the generic
# one), and the detector is sure on the second.
VLLM_LINES = [
    "INFO 05-07 02:13:52 [loader.py:458] Loading weights took 0.10 seconds",
    "INFO 05-07 02:13:52 [gpu_model_runner.py:1347] Model loading took 0.2533 GiB and 0.907387 seconds",
]


def test_phases_read_before_the_engine_is_detected_are_reported_once_it_is():
    d = Driver(REPLAY_RULES, get_profile("generic"), 0.0, detect=True)
    first = d.feed(LogLine(1.0, VLLM_LINES[0], lineno=1))
    assert first.engine is None  # generic: at most "weights_loading", never vLLM's "weights_loaded"
    assert "weights_loaded" not in [e.message for e in first.events if e.type == "phase"]
    second = d.feed(LogLine(2.0, VLLM_LINES[1], lineno=2))
    assert second.engine == "vllm"
    phases = [(e.message, e.t, e.data.get("line")) for e in second.events if e.type == "phase"]
    assert ("weights_loaded", 1.0, 1) in phases, second.events
    assert second.events[-1].message == "engine detected from its log lines: vllm"
    assert d.assess(2.0).phase == "weights_loaded" and d.profile.name == "vllm"


def test_a_phase_the_generic_reading_already_reported_is_not_reported_twice():
    d = Driver(REPLAY_RULES, get_profile("generic"), 0.0, detect=True)
    told = []
    for i, text in enumerate(["Loading model weights", *VLLM_LINES], start=1):
        told += [(e.message, e.t) for e in d.feed(LogLine(float(i), text, lineno=i)).events if e.type == "phase"]
    assert len(told) == len(set(told)), told


# -- named by the mutation run of firstlight/drive.py ----------------------------------------------------------
def test_an_empty_timeline_is_refused_with_its_reason():
    with pytest.raises(ValueError, match=r"^empty timeline$"):
        drive.judge_timeline([], JudgeConfig(), get_profile("generic"), 0.0)


def test_the_history_estimate_reaches_the_judge_and_survives_a_swap_of_it():
    d = Driver(JudgeConfig(expected_total_s=100.0), get_profile("generic"), 0.0, detect=True)
    assert d.judge.progress_tracker.expected_total_s == 100.0
    d._swap("vllm", None, "engine named", t=1.0)  # judged again from the start: a new judge
    assert d.judge.profile.name == "vllm" and d.judge.progress_tracker.expected_total_s == 100.0
    d.expect_total(50.0)
    assert d.judge.progress_tracker.expected_total_s == 50.0


def test_a_swap_in_place_without_an_observation_feeds_nothing_and_notes_why():
    d = Driver(JudgeConfig(), get_profile("generic"), 0.0)
    assert d._swap("vllm", None, "engine named", t=1.0) == [Event(1.0, "note", "engine named")]


# -- an engine named by the log's words: provisional, for a pattern, the endpoints or more words to overrule ------
WORD_TABLE = {f"wrd{i}": {"tgi": 1.0, "llamacpp": 0.0, "generic": 0.0} for i in range(40)}
WORD_TABLE |= {f"gen{i}": {"tgi": 0.0, "llamacpp": 0.0, "generic": 1.0} for i in range(80)}
TGI_WORDS = " ".join(f"wrd{i}" for i in range(20))


@pytest.fixture
def word_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(words, "table", lambda: WORD_TABLE)


def test_words_name_an_engine_provisionally_and_say_why(word_table: None) -> None:
    """TGI: an engine no other embeds, so provisional for its words alone."""
    d = detecting()
    step = d.feed(line(1, TGI_WORDS, 1))
    assert step.engine == "tgi" and d.profile.name == "tgi" and not d.detecting
    assert step.events[-1].message == ("engine named by its log's words, no line a profile knows: tgi (tgi +20.0 "
                                       "over generic +0.0 from 20 known words (a lead of 5 names one))")


def test_a_pattern_line_takes_the_log_from_an_engine_its_words_named(word_table: None) -> None:
    d = detecting()
    d.feed(line(1, TGI_WORDS, 1))
    d.feed(line(2, TENSORS, 2))
    step = d.feed(line(3, CUDA_INIT, 3))
    assert step.engine == "llamacpp" and d.profile is LLAMA
    assert step.events[-1].message == "engine detected from its log lines: llamacpp"
    assert phases(d)[1:] == [("weights_loading", 2.0, 2)]  # the kept lines read again as llama.cpp's


def test_more_words_take_the_log_back_and_an_engine_a_pattern_named_is_kept(word_table: None) -> None:
    d = detecting()
    d.feed(line(1, TGI_WORDS, 1))
    step = d.feed(line(2, " ".join(f"gen{i}" for i in range(30)), 2))
    assert step.engine == "generic" and d.profile.name == "generic"
    d = detecting()
    d.feed(line(1, TENSORS, 1))
    d.feed(line(2, CUDA_INIT, 2))
    assert d.profile is LLAMA
    assert d.feed(line(3, " ".join(f"gen{i}" for i in range(40)), 3)).engine is None and d.profile is LLAMA


def test_the_endpoints_confirm_or_overrule_an_engine_its_words_named(word_table: None) -> None:
    d = detecting()
    d.feed(line(1, TGI_WORDS, 1))
    step = d.use_engine("tgi", T0 + 2, "engine identified by its endpoints (/info): tgi")
    assert step.engine is None and d.profile.name == "tgi" and d.detector is None
    assert step.events == [Event(T0 + 2, "note", "engine identified by its endpoints (/info): tgi")]
    d = detecting()
    d.feed(line(1, TGI_WORDS, 1))
    step = d.use_engine("lmdeploy", T0 + 2, "engine identified by its endpoints (/v1/models): lmdeploy")
    assert step.engine == "lmdeploy" and d.profile.name == "lmdeploy" and d.detector is None
    assert d.feed(line(3, " ".join(f"gen{i}" for i in range(40)), 3)).engine is None  # final now


def test_words_that_name_generic_leave_a_generic_reading_as_it_is(word_table: None) -> None:
    """No swap, no note: the generic judge reads on, and the endpoints or a pattern may still name the engine."""
    d = detecting()
    generic_judge = d.judge
    step = d.feed(line(1, " ".join(f"gen{i}" for i in range(30)), 1))
    assert step.engine is None and d.judge is generic_judge and d.detecting
    assert [e for e in step.events if e.type == "note"] == []
