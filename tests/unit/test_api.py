"""The Python API's arguments reach the run as given (firstlight/api.py), checked on the run ``up`` and
``watch`` build before anything starts: ``api_key=`` is masked by the run's redactor, ``serving_interval=0``
turns the serving checks off, and the stall and spin timeouts are not swapped."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import firstlight
from firstlight.runner.serving import serving_config
from firstlight.sim.server import free_port

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
