"""The frame learned from a log's own lines (``firstlight.learnedframe``), on real lines of the corpus's dev half
(``tests/fixtures/corpus/``): what is peeled, what is kept as the line's time, source and stream, and the engine's
own heads that are never taken for a frame."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlight.framing import parse_rfc3339
from firstlight.learnedframe import MIN_LINES, WINDOW, FrameLearner, drop_spinner
from firstlight.logreplay import replay_log
from firstlight.logtext import LEARNED, LineSplitter, understood
from tests.support.common import REPO

CORPUS = REPO / "tests" / "fixtures" / "corpus"


def corpus_lines(name: str) -> list[str]:
    return (CORPUS / name).read_text(encoding="utf-8").splitlines()


def learner(lines: list[str]) -> FrameLearner:
    fl = FrameLearner(understood)
    for line in lines:
        fl.observe(line)
    return fl


def test_a_k9s_box_border_is_learned_and_peeled_and_the_vllm_head_after_it_is_left_to_the_profiles() -> None:
    lines = corpus_lines("a-vllm-k9s-routes-box-border.log")
    fl = learner(lines)
    assert fl.frame == r"│\s+"  # not "│ INFO 03-21 20:19:24 [launcher.py:34] ": vLLM's own head, the profiles read it
    p = fl.peel(lines[0])
    assert p is not None and p.text.startswith("INFO 03-21 20:19:24 [launcher.py:34] Route: /v1/models")


def test_the_frame_is_learned_from_the_first_lines_and_the_lines_before_it_are_read_as_they_are() -> None:
    lines = corpus_lines("a-vllm-k9s-routes-box-border.log")
    sp = LineSplitter()
    events = [e for e in sp.feed_lines("\n".join(lines).encode() + b"\n") if e.final]
    assert [e.framing for e in events] == [None] * (MIN_LINES - 1) + [LEARNED] * (len(lines) - MIN_LINES + 1)
    assert events[-1].text.startswith("INFO 03-21 20:19:24 [launcher.py:34] Route: /v1/embeddings")
    assert replay_log(CORPUS / "a-vllm-k9s-routes-box-border.log").engine == "vllm"  # "generic" unpeeled


def test_a_bracketed_pid_is_peeled_and_kept_as_the_source() -> None:
    lines = corpus_lines("c-llamacpp-router-child-loading-progress.log")  # llama-server's router: "[38957] "
    p = learner(lines).peel(lines[-1])
    assert p is not None and p.text.startswith("cmd_child_to_router:state:{") and p.source == "[38957]"


def test_a_platforms_logger_with_a_stream_word_is_peeled_and_a_line_that_does_not_fit_is_read_as_it_is() -> None:
    lines = corpus_lines("c-llamacpp-localai-grpc-loads-ok.log")  # LocalAI relaying llama.cpp's streams
    fl = learner(lines)
    p = fl.peel(lines[0])
    assert p is not None and p.stream == "stderr"
    assert p.text.startswith("common_init_from_params: setting dry_penalty_last_n")
    p = fl.peel(lines[2])
    assert p is not None and p.stream == "stdout" and p.text.startswith('{"timestamp":1745071171')
    assert lines[-1] == "1:59PM INF [llama-cpp] Loads OK" and fl.peel(lines[-1]) is None


def test_nccls_host_pid_tid_and_rank_are_peeled_and_the_rank_is_the_source() -> None:
    lines = corpus_lines("c-sglang-nccl-socket-connect-abort-tp0.log")
    fl = learner(lines)
    p = fl.peel("h100-15:139:1092 [7] NCCL INFO transport/net.cc:687 -> 2")
    assert p is not None and p.text == "NCCL INFO transport/net.cc:687 -> 2"  # NCCL's own words stay
    assert p.source == "h100-15:139:1092 [7]"
    q = fl.peel("h100-15:132:132 [0] NCCL INFO transport.cc:183 -> 2")
    assert q is not None and q.source == "h100-15:132:132 [0]"  # ranks stay apart


def test_a_frames_date_and_time_is_the_lines_time() -> None:
    lines = corpus_lines("c-llamacpp-docker-model-runner-install-backend.log")  # "[2026-...Z][inference] "
    p = learner(lines).peel(lines[0])
    assert p is not None and p.text == "Running on system with 32485 MB RAM"
    assert p.ts == parse_rfc3339("2026-02-05T07:15:17.898245000Z")


@pytest.mark.parametrize("name, first", [
    # the engines' own heads, which the profiles read: never a frame
    ("b-sglang-tp8-piecewise-load.log", "[2025-10-16 09:06:09 TP5] "),
    # a progress bar's words and a number before its "| "
    ("a-vllm-v1-rocm-worker-prefix-split-shard-bars.log", "Loading safetensors checkpoint shards:"),
    ("a-vllm-gpustack-cuda-graph-bars-full.log", "Capturing CUDA graphs (decode, FULL):"),
    # a run of one message ("llama_model_loader: - kv  0: ..."), TensorRT-LLM's tags (no number: no frame)
    ("c-llamacpp-json-2024-listen-before-load.log", None),
    ("b-trtllm-triton-tp4-engines-loaded.log", "[TensorRT-LLM][INFO] "),
])
def test_an_engines_own_head_or_a_run_of_one_message_is_no_frame(name: str, first: str | None) -> None:
    lines = corpus_lines(name)
    if first is not None:
        assert any(line.startswith(first) for line in lines[:WINDOW])
    fl = learner(lines)
    assert fl.frame is None, fl.frame
    assert all(fl.peel(line) is None for line in lines)


def test_the_kv_dump_of_llama_cpp_alone_teaches_no_frame() -> None:
    kv = [line for line in corpus_lines("c-llamacpp-json-2024-listen-before-load.log")
          if line.startswith("llama_model_loader: - kv")]
    assert len(kv) >= MIN_LINES
    assert learner(kv).frame is None


def test_no_frame_is_learned_after_the_window() -> None:
    fl = FrameLearner(understood)
    for i in range(WINDOW):
        fl.observe(f"plain line {i}")
    for i in range(10):
        fl.observe(f"[{i}] framed")
    assert fl.frame is None


def test_a_spinners_glyph_is_dropped() -> None:
    line = next(line for line in corpus_lines("c-llamacpp-cli-spinner-mixed-metadata.log")
                if "llm_load_vocab: special tokens" in line)
    assert drop_spinner(line).startswith("llm_load_vocab: special tokens definition check successful")
    assert drop_spinner("llm_load_vocab: x") == "llm_load_vocab: x"


def test_bytes_in_any_cut_read_the_same_as_one_read(tmp_path: Path) -> None:
    data = (CORPUS / "c-llamacpp-localai-grpc-loads-ok.log").read_bytes()
    whole = LineSplitter()
    one = [e for e in whole.feed_lines(data) + whole.flush_lines() if e.final]
    bytewise = LineSplitter()
    events = []
    for i in range(len(data)):
        events += bytewise.feed_lines(data[i:i + 1])
    events += bytewise.flush_lines()
    assert [e for e in events if e.final] == one
    assert sum(e.framing == LEARNED for e in one) >= 3
