"""Speculative decoding on a real llama-server (b11434, SmolLM2-135M as its own draft model).

Whether a server drafts at all is decided from what it says about itself (``/slots``: each slot's
``speculative`` flag; ``/props``' ``speculative.types`` is always "none" in b11434) or its command line,
never from the responses alone: b11434 puts ``draft_n`` in a response's timings only when something was
drafted, so an n-gram drafter that finds no n-gram to reuse looks, from the responses, exactly like no
drafter at all.

The first tests check that logic against canned answers (no server); the rest run the real server through
``firstlight up --bench`` and ``firstlight bench URL``.

The process-starting tests of this subject; the others: ``tests/unit/bench/test_spec.py``.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight, wait_for
from tests.support.llama_server import FAST, llama, server_cmd  # noqa: F401  (llama is a fixture)

BENCH = ["--bench", "--bench-requests", "3", "--bench-concurrency", "1", "--bench-output-len", "32",
         "--bench-duration", "300"]


# ngram-simple that can never match: its lookup n-gram is longer than any context these prompts make.
NGRAM_NO_HITS = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "1024"]


# --- the real server ---------------------------------------------------------------------------------------
# A start, three benchmark requests with a draft model drafting for itself: 135 s on an idle 2-core machine, over
# 300 s (pytest's default limit) beside two busy processes (flake hunt E). The subprocess's limit is the test's
# bound, and pytest's is above it, so a slow run fails with firstlight's output, not with a stack of select().
UP_BENCH_S = 800
slow = pytest.mark.timeout(UP_BENCH_S + 100)


def _up_bench(llama: dict[str, str], *extra: str) -> dict[str, Any]:  # noqa: F811
    port = free_port()
    r = run_firstlight("up", "--json", "--stop-when-ready", "--no-history", *FAST, *BENCH, "--",
                       *server_cmd(llama, port, "-c", "2048", *extra), timeout=UP_BENCH_S)
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["bench"]["completed"] == 3 and s["bench"]["errors"] == 0, s["bench"]
    return s["spec_decoding"]


@pytest.mark.llama
@slow
def test_draft_model_is_ok_with_the_acceptance_length(llama: dict[str, str]):  # noqa: F811
    spec = _up_bench(llama, "-md", llama["model"], "--spec-type", "draft-simple")
    # The model drafts for itself at temperature 0: nearly every draft token is accepted.
    assert spec["status"] == "ok", spec
    assert spec["mean_acceptance_length"] > 1.5 and spec["acceptance_rate"] > 0.5, spec
    assert spec["window"]["draft_tokens"] > 0


@pytest.mark.llama
@slow
def test_ngram_drafter_with_no_hits_is_no_data_not_off(llama: dict[str, str]):  # noqa: F811
    spec = _up_bench(llama, *NGRAM_NO_HITS)
    assert spec["status"] == "no_data", spec
    assert "ngram-simple" in spec["message"]


@pytest.mark.llama
@slow
def test_draft_model_without_spec_type_is_not_configured(llama: dict[str, str]):  # noqa: F811
    # b11434's default --spec-type is none: a draft model alone drafts nothing, and /slots says so.
    spec = _up_bench(llama, "-md", llama["model"])
    assert spec["status"] == "not_configured", spec


@pytest.mark.llama
@slow
def test_bench_url_reads_the_servers_own_configuration(llama: dict[str, str]):  # noqa: F811
    # `bench URL` has no command line: "configured" comes from /slots alone.
    port = free_port()
    server = subprocess.Popen(server_cmd(llama, port, "-c", "2048", *NGRAM_NO_HITS), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ok(url + "/health"), 60, "llama-server loaded")
        r = run_firstlight("bench", url, "--requests", "3", "--concurrency", "1", "--output-len", "32", "--json",
                           "--no-history", timeout=180)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert r.rc == 0, r.stderr[-3000:]
    spec = json.loads(r.stdout.splitlines()[-1])["spec_decoding"]
    assert spec["status"] == "no_data", spec


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
