"""The simulator's scenarios as steps (firstlight/sim/scenarios.py): a multi-node start's worker nodes."""

from __future__ import annotations

from firstlight.sim.scenarios import DummyHealth, Join, Listen, Log, Ready, scenario


def test_an_sglang_worker_node_runs_to_its_schedulers_then_serves_only_a_dummy_health() -> None:
    steps = scenario("normal", node_rank=1)
    assert steps[-2:] == [Log("dummy_health"), DummyHealth()]
    assert not any(isinstance(s, (Listen, Ready)) for s in steps) and Log("http_start") not in steps


def test_a_vllm_headless_node_says_so_joins_its_head_and_ends_at_its_engines_end_of_start() -> None:
    steps = scenario("normal", headless=True)
    assert steps[:3] == [Log("args"), Log("headless"), Join()]
    assert steps[-1] == Log("scheduler_ready")  # vLLM's "init engine ... took": its worker-ready line
    assert not any(isinstance(s, (Listen, Ready, DummyHealth)) for s in steps)


def test_a_headless_node_that_hangs_or_crashes_does_so_after_joining() -> None:
    for name in ("hang", "crash_oom"):
        steps = scenario(name, headless=True)
        assert steps[:3] == [Log("args"), Log("headless"), Join()]
        assert steps[3:] == scenario(name)[1:], name


def test_a_leader_runs_the_scenario_unchanged() -> None:
    assert scenario("normal", node_rank=0) == scenario("normal")
