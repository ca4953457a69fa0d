"""The one interpretation of a log line (``firstlight.interpret``), line by line: what each Reading says, where the
root cause comes from, and the edges of its limits. Written to kill the mutants scripts/mutation.sh found surviving
in interpret.py (the judge and replay tests exercise it only through their verdicts)."""

from __future__ import annotations

import pytest

from firstlight.engines import get_profile
from firstlight.engines.profile import Failure
from firstlight.interpret import (
    CUT_CAUSE_LINES,
    DEATH_LINES,
    EVIDENCE_TEXT_MAX,
    MAX_FAILURE_EVIDENCE,
    ROOT_WINDOW_LINES,
    UNCAUGHT,
    FailureHit,
    LineInterpreter,
    better,
    clip,
)

SGLANG = get_profile("sglang")
READY = "[2025-01-01 00:00:10] The server is fired up and ready to roll!"
LISTENING = "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"
ACCESS = 'INFO:     127.0.0.1:50000 - "GET /health HTTP/1.1" 200 OK'
SHARDS = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00it/s]"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."  # fatal oom
NCCL_WARN_OOM = "misc.cc:44 NCCL WARN Cuda failure 'out of memory'"  # non-fatal oom (80)
SIZE_MISMATCH = "size mismatch for lm_head.weight: copying a param with shape [2, 2]"  # non-fatal corrupt (75)
NCCL_FATAL = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error"
WRAPPER = "[2025-01-01 00:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):"


def test_clip_keeps_text_up_to_its_limit_and_marks_a_cut():
    assert clip("  abc  ", 3) == "abc"
    assert clip("abcd", 3) == "ab…" and len(clip("abcd", 3)) == 3
    assert clip("x" * EVIDENCE_TEXT_MAX) == "x" * EVIDENCE_TEXT_MAX


def test_better_prefers_the_higher_rank_then_the_earlier_line():
    low, high = Failure("nccl", "", True, 60), Failure("oom", "", True, 80)
    a, b = FailureHit(5, "a", high), FailureHit(3, "b", low)
    assert better(a, None) and better(a, b) and not better(b, a)
    same = FailureHit(7, "c", high)
    assert better(a, same) and not better(same, a)
    assert not better(a, a)  # never better than itself: the first of equals stays


def test_a_reading_says_its_line_text_and_whether_it_is_progress():
    it = LineInterpreter(SGLANG)
    r = it.feed("plain startup line " + "y" * 400, t=1.0)
    assert r.line == 1 and r.text == clip("plain startup line " + "y" * 400) and r.progress_line
    r = it.feed(ACCESS)
    assert r.line == 2 and not r.progress_line  # our own probe's answer, not progress
    r = it.feed(SHARDS, final=False)  # a redraw: counted with the next final line
    assert r.line == 3 and it.lines == 2 and r.progress_line
    assert it.progress is not None and it.progress.done == 1 and it.progress_at == 3
    assert it.feed("", final=True).line == 3


def test_listening_and_ready_are_said_once_with_their_line():
    it = LineInterpreter(SGLANG)
    it.feed("line one")
    r = it.feed(LISTENING)
    assert r.listening and it.listening_line == 2 and r.line == 2 and r.text == clip(LISTENING)
    r = it.feed(LISTENING)
    assert not r.listening and it.listening_line == 2
    r = it.feed(READY, t=12.5)
    assert r.ready and r.phase == "ready" and it.phase == "ready"
    assert it.ready_line == FailureHit(4, clip(READY), UNCAUGHT, 12.5)
    assert it.listening_line == 2  # the earlier listening line stays


def test_a_ready_line_alone_is_also_the_listening_line():
    it = LineInterpreter(SGLANG)
    it.feed("x")
    it.feed(READY)
    assert it.listening_line == 2


def test_after_ready_a_failure_is_a_serving_failure_with_its_reading():
    it = LineInterpreter(SGLANG)
    it.feed(READY)
    assert not it.feed(ACCESS).serving  # a line that means nothing is just a line
    r = it.feed(NCCL_FATAL, t=3.0)
    assert r.serving is True and r.line == 3 and r.text == clip(NCCL_FATAL) and r.progress_line is True
    assert r.failure is not None and r.failure.failure.category == "nccl" and r.failure.t == 3.0
    it.feed(OOM)
    assert it.serving_failure is not None and it.serving_failure.failure.category == "oom" and it.serving_fatal
    assert it.phase == "ready" and it.first_fatal is None


def test_a_phase_line_for_the_phase_already_held_is_no_move():
    it = LineInterpreter(SGLANG)
    assert it.feed("[2024-10-31 21:57:05 TP0] Init torch distributed begin.").phase == "distributed_init"
    assert it.feed("[2024-10-31 21:57:05 TP1] Init torch distributed begin.").phase is None
    assert len(it.phase_evidence) == 1
    frame = '  File "/sgl/srt/model_executor/model_runner.py", line 99, in init_torch_distributed'
    assert it.feed(frame).phase is None and len(it.phase_evidence) == 1


def test_failure_evidence_is_capped_at_its_maximum():
    it = LineInterpreter(SGLANG)
    for _ in range(MAX_FAILURE_EVIDENCE + 5):
        it.feed(NCCL_WARN_OOM)
    assert len(it.failure_evidence) == MAX_FAILURE_EVIDENCE


def test_after_the_first_fatal_line_a_more_specific_one_becomes_the_root_cause():
    it = LineInterpreter(SGLANG)
    r = it.feed(WRAPPER)
    assert r.first_fatal and it.first_fatal is not None
    r = it.feed(OOM)
    assert not r.first_fatal  # only the first fatal line is
    r = it.feed(NCCL_FATAL)  # later and less specific: the root cause stays
    assert not r.first_fatal
    cause = it.root_cause(ended=False)
    assert cause is not None and cause.failure.category == "oom" and cause.line == 2


def test_of_several_non_fatal_lines_before_the_fatal_one_the_best_is_the_root_cause():
    it = LineInterpreter(SGLANG)
    assert not it.feed(NCCL_WARN_OOM).first_fatal  # oom, rank 80
    it.feed(SIZE_MISMATCH)  # corrupt_weights, rank 75: later, but less specific
    it.feed(NCCL_FATAL)
    cause = it.root_cause(ended=True)
    assert cause is not None and cause.failure.category == "oom" and cause.line == 1


def test_the_root_traceback_closes_at_its_exception_line_or_plain_text():
    it = LineInterpreter(SGLANG)
    it.feed(WRAPPER)
    assert it.root_traceback_open
    it.feed('  File "/x/scheduler.py", line 1, in run')
    assert it.root_traceback_open is True
    it.feed("RuntimeError: boom")
    assert it.root_traceback_open is False
    it = LineInterpreter(SGLANG)
    it.feed(WRAPPER)
    it.feed("some later plain log line")
    assert it.root_traceback_open is False


def test_frames_after_the_root_tracebacks_exception_line_never_move_the_phase():
    it = LineInterpreter(SGLANG)
    it.feed(WRAPPER)
    assert it.feed('  File "/sgl/model_runner.py", line 9, in init_memory_pool').phase == "kv_cache"
    it.feed("RuntimeError: boom")  # the root traceback ends here
    it.feed("Traceback (most recent call last):")  # another one (a second rank, a shutdown error)
    assert it.feed('  File "/sgl/model_runner.py", line 20, in init_cuda_graphs').phase is None
    assert it.phase == "kv_cache"


def test_of_the_exceptions_a_log_ends_in_the_most_specific_is_the_cause():
    it = LineInterpreter(SGLANG)
    it.feed("Traceback (most recent call last):")
    it.feed("KeyError: 'model.layers.0.mlp.weight'", t=2.0)  # corrupt_weights, rank 75
    it.feed("During handling of the above exception, another exception occurred:")
    it.feed("Traceback (most recent call last):")
    it.feed("ModuleNotFoundError: No module named 'flash_attn'", t=3.0)  # import_error, rank 70: later, less
    cause = it.root_cause(ended=True)
    assert cause is not None and cause.failure.category == "corrupt_weights" and cause.line == 2
    assert cause.t == 2.0


def test_a_log_ending_in_an_uncaught_traceback_names_its_best_line_once_ended():
    it = LineInterpreter(SGLANG)
    it.feed("Traceback (most recent call last):")
    it.feed('  File "/x/y.py", line 3, in main')
    it.feed("ValueError: something odd", t=4.0)
    assert it.root_cause(ended=False) is None  # still running: not yet a cause
    cause = it.root_cause(ended=True)
    assert cause is not None and cause.failure is UNCAUGHT and cause.line == 3 and cause.t == 4.0
    it.feed("KeyboardInterrupt")
    assert it.root_cause(ended=True) is None  # a Ctrl+C is a stop


FRAME_KV = '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 412, in init_memory_pool'


FRAME_LOAD = '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 230, in load_model'


def test_a_traceback_frame_never_moves_the_phase_backwards():
    it = LineInterpreter(SGLANG)
    it.feed("Traceback (most recent call last):")
    assert it.feed(FRAME_KV).phase == "kv_cache"
    assert it.feed(FRAME_LOAD).phase is None  # an outer frame (weights) is earlier: the phase stays
    assert it.phase == "kv_cache"


def test_a_root_traceback_frame_never_moves_the_phase_backwards_after_the_fatal_line():
    it = LineInterpreter(SGLANG)
    it.feed("[2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):")
    assert it.first_fatal is not None
    assert it.feed(FRAME_KV).phase == "kv_cache"
    assert it.feed(FRAME_LOAD).phase is None and it.phase == "kv_cache"


NCCL_OOM = "misc.cc:44 NCCL WARN Cuda failure 'out of memory'"  # non-fatal, an oom


@pytest.mark.parametrize("gap, root", [(1, "oom"), (ROOT_WINDOW_LINES, "oom"), (ROOT_WINDOW_LINES + 1, "nccl")])
def test_a_non_fatal_root_cause_just_before_the_first_fatal_line_is_kept(gap: int, root: str):
    it = LineInterpreter(SGLANG)
    it.feed(NCCL_OOM)
    for _ in range(gap - 1):
        it.feed("plain line")
    it.feed(NCCL_FATAL)
    cause = it.root_cause(ended=True)
    assert cause is not None and cause.failure.category == root, cause


KV_LINE = "[2025-01-01 00:00:04 TP0] KV Cache is allocated. #tokens: 100000, K size: 1.0 GB, V size: 1.0 GB"


COMPILE_FRAME = '  File "/usr/lib/python3/site-packages/torch/_dynamo/eval_frame.py", line 655, in _fn'


GRAPH_FRAME = '  File "/sgl/model_runner.py", line 20, in init_cuda_graphs'


def test_a_traceback_frame_never_moves_the_phase_back_from_kv_cache_to_compile():
    it = LineInterpreter(SGLANG)
    assert it.feed(KV_LINE).phase == "kv_cache"
    it.feed(WRAPPER)  # the root traceback: its frames may still move the phase, forward only
    r = it.feed(COMPILE_FRAME)
    assert r.phase is None and it.phase == "kv_cache"
    assert it.feed(GRAPH_FRAME).phase == "cuda_graph"  # forward: where the crash happened
    assert it.feed(COMPILE_FRAME).phase is None and it.phase == "cuda_graph"


def test_a_frame_before_any_fatal_line_never_moves_the_phase_back():
    it = LineInterpreter(SGLANG)
    it.feed(KV_LINE)
    it.feed("Traceback (most recent call last):")
    assert it.feed(COMPILE_FRAME).phase is None and it.phase == "kv_cache"


# -- a daemon that loads models on demand (EngineProfile.on_demand: Ollama) -------------------------------------
OLLAMA = get_profile("ollama")
DAEMON_LISTENING = 'time=2024-05-27T12:32:31.493Z level=INFO source=routes.go:1074 msg="Listening on 127.0.0.1:11434 ' \
                   '(version 0.1.39)"'
RUNNER_START = 'time=2024-05-27T12:33:00.000Z level=INFO source=server.go:376 msg="starting llama server" cmd="x"'


def _daemon(*lines: str) -> LineInterpreter:
    it = LineInterpreter(OLLAMA)
    for n, text in enumerate(lines, 1):
        it.feed(text, t=100.0 + n)
    return it


def test_a_daemon_left_listening_with_no_model_asked_for_is_ready_at_its_listening_line():
    it = _daemon("total blobs: 11", DAEMON_LISTENING,
                 '[GIN] 2024/05/27 - 12:32:40 | 200 | 36.1µs | 127.0.0.1 | HEAD "/"')
    hit = it.idle_ready()
    assert hit is not None and (hit.line, hit.t) == (2, 102.0) and "Listening on" in hit.text
    assert it.ready_line is hit and it.phase == "ready"
    assert it.idle_ready() is None  # once: the ready line is there now


@pytest.mark.parametrize("lines", [
    (RUNNER_START, DAEMON_LISTENING),  # a model asked for (before or after it listens): the start is the model's
    (DAEMON_LISTENING, RUNNER_START),
    (DAEMON_LISTENING, 'msg="waiting for llama runner to start responding"'),
    ("total blobs: 11",),  # never listened
    (DAEMON_LISTENING, "llama_model_loader: loaded meta data with 34 key-value pairs"),  # a load begun
    (DAEMON_LISTENING, "panic: runtime error: invalid memory address or nil pointer dereference"),  # a failure
])
def test_a_daemon_asked_for_a_model_or_not_listening_or_failed_is_not_idle_ready(lines: tuple[str, ...]):
    it = _daemon(*lines)
    assert it.idle_ready() is None and it.ready_line is None


def test_an_engine_that_loads_at_start_is_never_idle_ready():
    # llama-server listens before it loads, its phase still process_start: only on_demand tells the two apart
    it = LineInterpreter(get_profile("llamacpp"))
    it.feed("main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 15", t=1.0)
    assert it.listening_line == 1 and it.phase == "process_start"
    assert it.idle_ready() is None and it.ready_line is None


TB_HEAD = "Traceback (most recent call last):"
TB_FRAME = '  File "/usr/lib/python3/site-packages/app/server.py", line 10, in main'


@pytest.mark.parametrize("gap, died", [(1, True), (CUT_CAUSE_LINES, True), (CUT_CAUSE_LINES + 1, False)])
def test_a_log_cut_inside_a_traceback_died_only_where_an_exception_came_just_before(gap: int, died: bool):
    it = LineInterpreter(SGLANG)
    it.feed("ValueError: the engine core's own exception")
    for _ in range(gap - 1):
        it.feed("plain line")
    it.feed(TB_HEAD)
    it.feed(TB_FRAME)
    assert (it.root_cause(ended=True) is not None) is died


def test_a_traceback_cut_with_no_exception_before_it_is_no_death_but_a_logged_exceptions_is():
    it = LineInterpreter(SGLANG)
    it.feed("INFO 05-26 00:17:40 [api_server.py:1] starting")
    it.feed(TB_HEAD)
    it.feed(TB_FRAME)
    assert it.root_cause(ended=True) is None
    logged = LineInterpreter(SGLANG)  # an ERROR line, then the traceback at once: that exception's message
    logged.feed("ERROR 05-26 00:17:47 [engine.py:448] 'ColumnParallelLinear' object has no attribute 'input_scale'")
    logged.feed("ERROR 05-26 00:17:47 [engine.py:448] " + TB_HEAD)
    logged.feed("ERROR 05-26 00:17:47 [engine.py:448] " + TB_FRAME)
    assert logged.root_cause(ended=True) is not None
    apart = LineInterpreter(SGLANG)  # ... not when a line stands between them
    apart.feed("ERROR 05-26 00:17:47 [engine.py:448] a logged error")
    apart.feed("INFO 05-26 00:17:47 [engine.py:450] something else")
    apart.feed(TB_HEAD)
    apart.feed(TB_FRAME)
    assert apart.root_cause(ended=True) is None


def test_an_error_line_after_the_exception_leaves_the_log_ending_in_it():
    it = LineInterpreter(SGLANG)
    for line in (TB_HEAD, TB_FRAME, "RuntimeError: NPU function error",
                 "[ERROR] 2025-12-05-07:51:00 (PID:626) ERR00100 PTA call acl api failed"):
        it.feed(line)
    assert it.root_cause(ended=True) is not None
    it.feed("INFO: plain text after it")  # any other line is what came after the death
    assert it.root_cause(ended=True) is None


LLAMA = get_profile("llamacpp")
LLAMA_OOM = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4507.00 MiB on device 0: cudaMalloc failed: out "
             "of memory")
NO_CONTEXT = "llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers"


@pytest.mark.parametrize("gap, phase", [(1, "kv_cache"), (DEATH_LINES, "kv_cache"), (DEATH_LINES + 1, "process_start")])
def test_the_lines_just_after_the_first_fatal_one_say_where_the_start_died(gap: int, phase: str):
    it = LineInterpreter(LLAMA)
    it.feed(LLAMA_OOM)
    for _ in range(gap - 1):
        it.feed("plain line")
    it.feed(NO_CONTEXT)
    assert it.phase == phase
