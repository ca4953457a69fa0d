"""Logs never seen before (tests/fixtures/unseen/: excerpts pasted into the engines' public bug reports, each with its
source URL in INDEX.tsv): the engine told by its module paths and progress bars, the ``kv_cache`` failure with the
knobs that fix it, an access-log line of a generation that succeeded as evidence that the server served, and
Ollama's own and its runner's lines."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from firstlight.engines import get_profile
from firstlight.logreplay import replay_lines, replay_log
from firstlight.vocab import CATEGORY_RANK, FAILURE_CATEGORIES

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "unseen"
SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "logs"


def _rows() -> list[dict[str, str]]:
    with (FIXTURES / "INDEX.tsv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


ROWS = _rows()


def test_every_fixture_is_listed_with_its_source() -> None:
    listed = {r["file"] for r in ROWS}
    assert listed == {p.name for p in FIXTURES.glob("*.log")}
    assert all(r["source"].startswith("https://github.com/") for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_unseen_log(row: dict[str, str]) -> None:
    rep = replay_log(FIXTURES / row["file"])
    said = (rep.engine, rep.outcome, rep.phase, rep.failure)
    fields = ("engine", "outcome", "phase", "failure")
    # a label with a bar: two answers fit the text, and either is right
    assert all(got in row[f].split("|") for got, f in zip(said, fields, strict=True)), (said, rep.evidence)
    if rep.outcome == "failed":
        assert rep.hint and any(ev["what"] == "failure" for ev in rep.evidence)


def test_kv_cache_is_a_category_and_names_its_knobs() -> None:
    assert "kv_cache" in FAILURE_CATEGORIES
    assert CATEGORY_RANK["oom"] < CATEGORY_RANK["kv_cache"] < CATEGORY_RANK["gpu_occupied"]
    rep = replay_log(FIXTURES / "vllm-v1-negative-kv-cache-memory.log")
    assert rep.hint is not None and "--gpu-memory-utilization" in rep.hint and "--max-model-len" in rep.hint
    assert any("Available KV cache memory: -3.86 GiB" in ev["text"] for ev in rep.evidence), rep.evidence
    # SGLang, as quoted in https://github.com/sgl-project/sglang/issues/4330
    m = get_profile("sglang").classify("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    assert m.failure is not None and m.failure.category == "kv_cache" and m.failure.fatal
    assert "--mem-fraction-static" in m.failure.hint


@pytest.mark.parametrize("line", [
    "(Worker_TP0 pid=104298) INFO 12-10 03:24:48 [gpu_worker.py:298] Available KV cache memory: 9.90 GiB",
    "INFO 01-28 16:08:46 [gpu_worker.py:358] Available KV cache memory: 18.78 GiB",
    "INFO 01-28 16:08:46 [gpu_worker.py:358] Available KV cache memory: 0.50 GiB",
])
def test_a_positive_kv_cache_is_no_failure(line: str) -> None:
    m = get_profile("vllm").classify(line)
    assert m.failure is None and m.phase == "kv_cache"


def test_zero_kv_cache_memory_is_a_failure() -> None:
    m = get_profile("vllm").classify("INFO 12-10 03:24:48 [gpu_worker.py:298] Available KV cache memory: 0.00 GiB")
    assert m.failure is not None and m.failure.category == "kv_cache"


def _ready_log_without_its_ready_line(name: str, marker: str) -> list[str]:
    lines = (SHARED / name).read_text("utf-8", "replace").splitlines()
    kept = [ln for ln in lines if marker not in ln]
    assert len(kept) < len(lines)
    return kept


@pytest.mark.parametrize("name, marker", [
    ("sglang-eagle-llama2-specdec.log", "The server is fired up and ready to roll"),
    ("sglang-rocm-qwen3vl-32b-ready.log", "The server is fired up and ready to roll"),
])
def test_a_generation_answered_200_is_evidence_that_it_served(name: str, marker: str) -> None:
    """Real ready logs with the engine's own ready line taken out: the access line of a generation that
    succeeded ("POST /generate HTTP/1.1" 200) still says it served; the judge says READY with that line."""
    rep = replay_lines(_ready_log_without_its_ready_line(name, marker))
    assert rep.outcome == "ready", rep.evidence
    ready = [ev for ev in rep.evidence if ev["what"] == "ready"]
    assert ready and '" 200' in ready[0]["text"] and "POST /" in ready[0]["text"]


@pytest.mark.parametrize("engine, line, served", [
    ("vllm", 'INFO:     127.0.0.1:52822 - "POST /v1/chat/completions HTTP/1.1" 200 OK', True),
    ("tgi", 'INFO:     127.0.0.1:52822 - "POST /generate HTTP/1.1" 200 OK', True),
    ("generic", 'INFO:     127.0.0.1:49386 - "POST /v1/completions HTTP/1.1" 200 OK', True),
    ("llamacpp", "srv  log_server_r: request: POST /completion 127.0.0.1 200", True),
    ("ollama", '[GIN] 2024/07/21 - 15:52:51 | 200 |   1.2345s |       127.0.0.1 | POST     "/api/generate"', True),
    ("ollama", '[GIN] 2024/07/21 - 15:52:51 | 200 |   1.2345s |       127.0.0.1 | POST     "/api/chat"', True),
    # not a served generation: a refusal, an error, a listing, a health check
    ("ollama", '[GIN] 2024/07/21 - 15:52:51 | 403 |            0s |       127.0.0.1 | POST     "/api/generate"', False),
    ("vllm", 'INFO:     127.0.0.1:40178 - "GET /v1/models HTTP/1.1" 200 OK', False),
    ("vllm", 'INFO:     127.0.0.1:40178 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request', False),
    ("sglang", 'INFO:     127.0.0.1:40178 - "GET /health HTTP/1.1" 200 OK', False),
    ("sglang", 'INFO:     127.0.0.1:40178 - "POST /generate HTTP/1.1" 503 Service Unavailable', False),
])
def test_served_request_lines(engine: str, line: str, served: bool) -> None:
    assert get_profile(engine).classify(line).ready is served


def test_tgi_router_success_span_is_served() -> None:
    line = ('2024-05-01T10:00:00.000000Z  INFO generate{parameters=GenerateParameters { best_of: None, '
            'temperature: None } total_time="1.2s" validation_time="1ms"}: text_generation_router::server: '
            'router/src/server.rs:305: Success')
    assert get_profile("tgi").classify(line).ready


def test_served_patterns_stay_linear_on_a_hostile_line() -> None:
    import time

    hostile = ['"POST /generate' + "?" + "a" * 100_000, "[GIN] 2024/07/21 - 15:52:51 | 200 |" + "|" * 100_000,
               "generate{" + "}: " * 30_000]
    start = time.process_time()
    for engine in ("vllm", "ollama", "tgi", "llamacpp"):
        for line in hostile:
            get_profile(engine).classify(line)
    assert time.process_time() - start < 2.0


def test_ollama_runner_lines() -> None:
    """The embedded runner's own lines (a Go process of its own since 0.5) and the daemon's old format."""
    ollama = get_profile("ollama")
    runner = 'time=2025-01-20T10:11:13.200Z level=INFO source=runner.go:936 msg="starting go runner"'
    assert ollama.classify(runner).phase is None  # a process starting: the load begins with the model's lines
    assert ollama.asks_a_model('msg="starting llama server" cmd="/usr/bin/ollama runner --model /m"')
    assert ollama.classify("2023/10/06 13:38:58 routes.go:572: Listening on 127.0.0.1:11434").listening
    rep = replay_lines(['time=2025-01-20T10:11:13.200Z level=INFO source=runner.go:936 msg="starting go runner"',
                        "llm_load_tensors: offloading 32 repeating layers to GPU"])
    assert rep.engine == "ollama"
