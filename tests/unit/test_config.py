"""The Config's own defaults (``firstlight.config``), where the docs state them: the judge's warnings (D state,
zombie, a worker's age) and the benchmark after READY. The other defaults are pinned where they are stated: the
README's numbers (``tests/unit/test_readme_numbers.py``) and the settings' ranges (``tests/unit/test_settings.py``).
``scripts/mutation.sh config`` (``scripts/mutate_defaults.py``) changes each default in turn against these tests."""

from __future__ import annotations

import re

from firstlight.config import DEFAULT_CHAT_PROMPT, DEFAULT_PROMPT, AfterReadyConfig, Config, JudgeConfig
from tests.support.common import REPO

READINESS = (REPO / "docs" / "readiness.md").read_text()


def _said(pattern: str) -> float:
    m = re.search(pattern, " ".join(READINESS.split()))
    assert m, pattern
    return float(m.group(1))


def test_the_judges_warnings_wait_as_long_as_the_docs_say():
    judge = JudgeConfig()
    assert judge.d_state_seconds == _said(r"state D for (\d+) s")
    assert judge.zombie_seconds == _said(r"a zombie left unreaped for (\d+) s")
    assert judge.worker_min_age_s == _said(r"a worker that lived (\d+) s and died")


def test_the_benchmark_after_ready_is_the_one_the_docs_describe():
    after = AfterReadyConfig()
    assert after.bench_requests == _said(r"`--bench-requests` (\d+)")
    assert after.bench_concurrency == _said(r"`--bench-concurrency` (\d+)")
    assert after.bench_duration == _said(r"`--bench-duration` (\d+) s at most")
    assert after.bench_output_len == _said(r"`--bench-output-len` (\d+) tokens")
    assert after.bench_prompt_len == _said(r"on (\d+)-token prompts")
    assert (after.warmup, after.bench) == (0, False)  # nothing after READY unless asked


def test_a_run_by_default_supervises_echoes_the_server_and_stops_it_on_failure():
    cfg = Config()
    assert (cfg.after_ready, cfg.keep_on_failure, cfg.echo_server_output, cfg.log_from_start) == (
        "supervise", False, True, False)


def test_the_default_prompts_ask_for_a_short_known_answer():
    # deterministic at temperature 0 on any model: the answer is one word, Paris
    assert DEFAULT_PROMPT == "The capital of France is"
    assert DEFAULT_CHAT_PROMPT == "What is the capital of France? Answer in one word."
