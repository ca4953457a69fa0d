"""The Python API (firstlight.api, re-exported from firstlight): its names, ``up`` against the real llama-server,
a crash, ``watch`` of a running server, the preflight and the replay of real logs.

The in-process tests of this subject; the others: ``tests/e2e/api/test_api.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import firstlight
from firstlight.result import RunResult
from firstlight.runner.serving import serving_config
from firstlight.sim.fixtures import free_port
from tests.support.api import _crash_cmd
from tests.support.llama_server import llama, server_cmd  # noqa: F401  (llama: the fixture)

# Pinned, as httpx pins its own: a name added or dropped is a decision, made here too.
EXPORTED = [
    "FAILED", "HUNG", "INTERRUPTED", "READY", "REGRESSION", "STARTING", "TIMEOUT",
    "Config", "FirstlightError", "NotReady", "PreflightReport", "RunResult", "Server",
    "__version__", "replay", "run_preflight", "up", "watch",
]


def test_the_exported_names_are_pinned_and_each_one_resolves():
    assert firstlight.__all__ == EXPORTED
    for name in firstlight.__all__:
        assert getattr(firstlight, name) is not None, name
    assert set(EXPORTED) <= set(dir(firstlight))
    assert firstlight.RunResult is RunResult and firstlight.READY == "ready"
    assert issubclass(firstlight.NotReady, firstlight.FirstlightError)
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
                                               "memory_disk", "fit"]
    assert report.verdict == "fail" and report.failure is not None and report.failure.name == "checkpoint"
    with pytest.raises(ValueError):
        firstlight.run_preflight([])


KEY = "k3y-5ec2e7-f1a9"  # no token shape (not sk-/hf_): only the known-secret rule can mask it


def _run(ctx: Any) -> Any:
    return ctx._run  # the run the context manager will start: its Config and its Session (not started)


def _up(**kw: Any) -> Any:
    return firstlight.up([sys.executable, "-c", "pass"], port=free_port(), no_preflight=True, history=False, **kw)


def _watch(**kw: Any) -> Any:
    return firstlight.watch(f"http://127.0.0.1:{free_port()}", history=False, **kw)


@pytest.mark.parametrize("make", [_up, _watch], ids=["up", "watch"])
def test_the_api_key_is_masked_by_the_runs_redactor(make: Any):
    run = _run(make(api_key=KEY))
    assert run.cfg.probe.api_key == KEY  # sent as the bearer token
    for red in (run.redactor, run.session.redactor):
        shown = red.text(f"401 Unauthorized: invalid key {KEY} (got 'Authorization: {KEY}')")
        assert KEY not in shown and "***" in shown, shown


def test_up_serving_interval_0_turns_the_serving_checks_off():
    cfg = _run(_up(serving_interval=0)).cfg
    assert cfg.serving_interval == 0 and not serving_config(cfg).enabled
    assert _run(_up(serving_interval=2.5)).cfg.serving_interval == 2.5
    assert _run(_up()).cfg.serving_interval == 10.0


@pytest.mark.parametrize("make", [_up, _watch], ids=["up", "watch"])
def test_the_stall_and_spin_timeouts_reach_the_judge_unswapped(make: Any):
    judge = _run(make(stall_timeout=111.0, spin_timeout=999.0, timeout=1234.0)).cfg.judge
    assert (judge.stall_timeout, judge.spin_timeout, judge.timeout) == (111.0, 999.0, 1234.0)
    judge = _run(make()).cfg.judge
    assert (judge.stall_timeout, judge.spin_timeout, judge.timeout) == (120.0, 900.0, 3600.0)
