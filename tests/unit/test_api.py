"""The Python API (firstlight.api, re-exported from firstlight): its names, ``up`` against the real llama-server,
a crash, ``watch`` of a running server, the preflight and the replay of real logs.

The in-process tests of this subject; the others: ``tests/e2e/test_api.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import firstlight
from firstlight.result import RunResult
from firstlight.sim.server import free_port
from tests.support.api import _crash_cmd
from tests.support.llama_server import llama, server_cmd  # noqa: F401  (llama: the fixture)

# Pinned, as httpx pins its own: a name added or dropped is a decision, made here too.
EXPORTED = [
    "FAILED", "HUNG", "INTERRUPTED", "READY", "REGRESSION", "STARTING", "TIMEOUT",
    "Config", "NotReady", "PreflightReport", "RunResult", "Server",
    "__version__", "replay", "run_preflight", "up", "watch",
]


def test_the_exported_names_are_pinned_and_each_one_resolves():
    assert firstlight.__all__ == EXPORTED
    for name in firstlight.__all__:
        assert getattr(firstlight, name) is not None, name
    assert set(EXPORTED) <= set(dir(firstlight))
    assert firstlight.RunResult is RunResult and firstlight.READY == "ready"
    assert issubclass(firstlight.NotReady, Exception)
    with pytest.raises(AttributeError):
        _ = firstlight.Session  # type: ignore[attr-defined]


def test_up_with_bad_input_raises_a_one_line_value_error_and_starts_nothing():
    for kwargs, what in (({"url": "http://no such host:80"}, "url"), ({"timeout": -1}, "timeout"),
                         ({"url": "http://127.0.0.1:1", "port": 2}, "port"), ({"expect": "("}, "expect")):
        with pytest.raises(ValueError, match=what) as caught:
            firstlight.up(_crash_cmd(), **{"port": free_port(), **kwargs})
        assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="no command"):
        firstlight.up([])


def test_replay_of_real_logs_gives_their_verdicts(shared_logs: Path):
    ready = firstlight.replay(shared_logs / "llamacpp-ready-serving.log")
    assert (ready.outcome, ready.engine, ready.phase) == ("ready", "llamacpp", "ready")
    oom = firstlight.replay(str(shared_logs / "tgi-oom-cuda-graph-during-warmup.log"))
    assert (oom.outcome, oom.failure) == ("failed", "oom") and oom.phase in ("warmup", "cuda_graph")
    lines = (shared_logs / "sglang-cuda-graph-capture-exception-deepseek-v25.log").read_text().splitlines()
    from_lines = firstlight.replay(lines)
    assert (from_lines.outcome, from_lines.engine, from_lines.phase) == ("failed", "sglang", "cuda_graph")
    with pytest.raises(ValueError):
        firstlight.replay(lines, engine="no-such-engine")


def test_run_preflight_returns_typed_checks_and_fails_a_missing_model(tmp_path: Path):
    report = firstlight.run_preflight(["llama-server", "-m", str(tmp_path / "missing.gguf"), "--port",
                                       str(free_port())], disk_sample=False)
    assert isinstance(report, firstlight.PreflightReport)
    assert [c.name for c in report.checks] == ["checkpoint", "quantization", "pip", "gpus", "port", "stale_server",
                                               "memory_disk"]
    assert report.verdict == "fail" and report.failure is not None and report.failure.name == "checkpoint"
    with pytest.raises(ValueError):
        firstlight.run_preflight([])
