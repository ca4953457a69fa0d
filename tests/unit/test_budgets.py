"""The learning rule of the phase budgets (firstlight/budgets.py): what a phase normally takes from a deployment's
good starts, at its boundaries, and the silences every start's anatomy now carries per phase."""

from __future__ import annotations

from typing import Any

import pytest

from firstlight.budgets import (
    BUDGET_FLOOR_S,
    MIN_STARTS,
    SILENCE_FLOOR_S,
    WINDOW,
    Budgets,
    PhaseBudget,
    QuietTracker,
    budgets_note,
    learn,
    p95,
    phase_eta,
)
from tests.support.budgets import history_of


def _anat(**phases: float | tuple[float, dict[str, Any]]) -> dict[str, Any]:
    out = []
    for name, v in phases.items():
        seconds, quiet = v if isinstance(v, tuple) else (v, None)
        out.append({"name": name, "seconds": seconds, **({"quiet": quiet} if quiet else {})})
    return {"phases": out}


def _quiet(silence: float, still: float = 1.0, moved: tuple[str, ...] = ("cpu", "log")) -> dict[str, Any]:
    return {"silence_s": silence, "still_s": still, "signals": dict.fromkeys(moved, silence), "moved": list(moved)}


def _budget(p95_s: float, silence: float | None = 5.0, starts: int = 5) -> PhaseBudget:
    return PhaseBudget("cuda_graph", starts, "cold", p95_s, p95_s, p95_s, p95_s, silence, 1.0,
                       starts if silence is not None else 0)


def test_p95_is_the_nearest_rank_and_the_largest_of_few():
    assert p95([3.0, 1.0, 2.0]) == 3.0
    assert p95([float(i) for i in range(1, 101)]) == 95.0
    assert p95([float(i) for i in range(1, 21)]) == 19.0


def test_the_budget_is_three_times_the_p95_or_the_p95_plus_thirty_seconds_whichever_is_larger():
    assert BUDGET_FLOOR_S == 30.0
    assert _budget(10.0).budget_s == 40.0  # 3 x 10 = 30 < 10 + 30
    assert _budget(15.0).budget_s == 45.0  # the two agree
    assert _budget(50.0).budget_s == 150.0  # 3 x 50 > 50 + 30


def test_the_silence_allowance_is_twice_the_usual_longest_or_thirty_seconds_more():
    assert SILENCE_FLOOR_S == 30.0
    assert _budget(50.0, silence=6.0).silence_limit_s == 36.0
    assert _budget(50.0, silence=40.0).silence_limit_s == 80.0
    assert _budget(50.0, silence=None).silence_limit_s is None  # not measured: the spin clock stays


def test_fewer_than_three_starts_learn_no_budget_and_say_so():
    assert MIN_STARTS == 3
    two = learn([("cold", _anat(cuda_graph=40.0))] * 2, "cold")
    assert two.get("cuda_graph") is None
    assert two.phases["cuda_graph"].starts == 2
    assert two.why_none("cuda_graph") == ("no learned budget for cuda_graph: 2 earlier good cold starts had it "
                                          "(3 needed); the fixed clocks apply")
    assert two.why_none("compile").startswith("no learned budget for compile: 0 earlier good cold starts")
    three = learn([("cold", _anat(cuda_graph=40.0))] * 3, "cold")
    b = three.get("cuda_graph")
    assert b is not None and b.learned and b.starts == 3


def test_duration_figures_of_a_phase():
    starts = [("cold", _anat(cuda_graph=s)) for s in (52.0, 38.0, 41.0, 45.0)]
    b = learn(starts, "cold").get("cuda_graph")
    assert b is not None
    assert (b.median_s, b.p95_s, b.min_s, b.max_s) == (43.0, 52.0, 38.0, 52.0)
    assert b.source == "the 4 earlier cold starts took 38s-52s in it"
    odd = learn(starts[:3], "cold").get("cuda_graph")
    assert odd is not None and odd.median_s == 41.0


def test_only_starts_of_the_same_type_are_learned_from():
    starts = [("warm_page_cache", _anat(weights_loading=2.0))] * 3 + [("cold+compile_cache_miss",
                                                                      _anat(weights_loading=60.0))] * 2
    cold = learn(starts, "cold")
    assert cold.starts == 2 and cold.get("weights_loading") is None  # two cold ones: not enough
    warm = learn(starts, "warm_page_cache+compile_cache_hit")  # compared by how the weights got there
    b = warm.get("weights_loading")
    assert b is not None and b.max_s == 2.0 and warm.start_type == "warm_page_cache"


def test_only_the_newest_window_of_starts_is_learned_from():
    starts = [("cold", _anat(kv_cache=5.0))] * WINDOW + [("cold", _anat(kv_cache=500.0))]
    b = learn(starts, "cold").get("kv_cache")
    assert b is not None and b.max_s == 5.0 and b.starts == WINDOW


def test_usual_silences_are_the_longest_over_the_starts_and_the_signals_that_moved_in_each():
    starts = [("cold", _anat(cuda_graph=(40.0, _quiet(s, still=s / 2, moved=m))))
              for s, m in ((3.0, ("cpu", "log")), (6.0, ("cpu", "log", "gpu")), (4.0, ("cpu", "log")))]
    b = learn(starts, "cold").get("cuda_graph")
    assert b is not None
    assert (b.silence_s, b.still_s, b.quiet_starts) == (6.0, 3.0, 3)
    assert b.moved == ("cpu", "log")  # gpu moved in one start only
    assert dict(b.per_signal) == {"cpu": 6.0, "log": 6.0}
    assert b.silence_limit_s == 36.0 and b.still_limit_s == 33.0


def test_silences_measured_in_fewer_than_three_starts_give_no_silence_allowance():
    starts = [("cold", _anat(cuda_graph=(40.0, _quiet(3.0))))] * 2 + [("cold", _anat(cuda_graph=40.0))]
    b = learn(starts, "cold").get("cuda_graph")
    assert b is not None and b.quiet_starts == 2 and b.silence_limit_s is None and b.still_limit_s is None


@pytest.mark.parametrize("bad", ["x", -1.0, float("nan"), float("inf"), True, None])
def test_a_damaged_phase_figure_is_left_out(bad: object):
    starts = [("cold", {"phases": [{"name": "kv_cache", "seconds": bad}]})] + [("cold", _anat(kv_cache=5.0))] * 2
    assert learn(starts, "cold").get("kv_cache") is None  # two good figures: not enough
    assert learn([("cold", None), ("cold", {"phases": "x"}), *starts], "cold").phases["kv_cache"].starts == 2


def test_quiet_tracker_counts_silences_within_the_phase():
    q = QuietTracker()
    q.enter("kv_cache", 100.0)
    q.mark(99.0, "log", strong=True)  # before the phase: not counted in it
    q.mark(104.0, "log", strong=True)  # 4 s after the phase began
    q.mark(105.0, "cpu", strong=False)
    q.mark(110.0, "cpu", strong=False)
    q.mark(111.0, "probe:health", strong=True)  # 7 s without strong progress
    assert q.silence(113.0) == 2.0
    q.enter("cuda_graph", 120.0)  # 9 s of silence up to the phase's end
    kv = q.phases["kv_cache"]
    assert kv["silence_s"] == 9.0
    assert kv["still_s"] == 9.0  # 111 -> 120: nothing moved
    assert kv["signals"] == {"cpu": 10.0, "log": 16.0, "probe": 11.0}
    assert kv["moved"] == ["cpu", "log", "probe"]
    assert q.of("cuda_graph", 125.0) == {"silence_s": 5.0, "still_s": 5.0, "signals": {}, "moved": []}
    q.close(130.0)
    assert q.phases["cuda_graph"]["silence_s"] == 10.0
    assert q.silence(131.0) == 0.0  # no phase open


def test_a_start_summary_carries_each_phase_silences():
    _, anat = history_of(1)[0]
    by = {p["name"]: p for p in anat["phases"]}
    assert "quiet" in by["cuda_graph"]
    # distributed init: the CPU busy and nothing else after its first line (20 s x 0.85 in this start)
    assert by["distributed_init"]["quiet"]["silence_s"] == pytest.approx(17.0, abs=1.5)
    assert by["distributed_init"]["quiet"]["moved"] == ["cpu", "log"]
    # the weights: reads every second
    assert by["weights_loading"]["quiet"]["silence_s"] <= 1.5 and "disk" in by["weights_loading"]["quiet"]["moved"]


def test_budgets_note_says_which_phases_have_a_budget():
    none = Budgets("cold", 2, {})
    assert budgets_note(none) == ("no learned phase budgets: 2 earlier good cold starts (3 needed); the fixed "
                                  "clocks apply")
    b = learn([("cold", _anat(cuda_graph=40.0, kv_cache=5.0))] * 3, "cold")
    assert budgets_note(b) == "phase budgets from 3 earlier good cold starts: cuda_graph 2m00s, kv_cache 35s"


def _b(**medians: tuple[float, int]) -> Budgets:
    return Budgets("cold", 4, {n: PhaseBudget(n, k, "cold", m, m, m, m, None, None) for n, (m, k) in medians.items()})


def test_the_eta_by_phase_is_whats_left_of_this_phase_and_the_medians_of_those_after_it():
    b = _b(weights_loading=(40.0, 4), kv_cache=(6.0, 4), cuda_graph=(45.0, 2), warmup=(3.0, 1))
    # 30 s into the load: 10 s left of it, then the KV cache and the graphs (had by half the starts); not warmup
    # (one start in four), not what came before
    assert phase_eta(b, "weights_loading", 30.0) == 10.0 + 6.0 + 45.0
    assert phase_eta(b, "weights_loading", 60.0) == 6.0 + 45.0  # past its median: none of it is left
    assert phase_eta(b, "cuda_graph", 0.0) == 45.0
    assert phase_eta(b, "compile", 1.0) is None  # no earlier start had the phase: the whole start's ETA applies
    assert phase_eta(None, "weights_loading", 1.0) is None
