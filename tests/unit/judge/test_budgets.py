"""The judge's verdict per phase against this deployment's learned budgets (firstlight/budgets.py), at its
boundaries: a spinning hang named past the phase's budget long before spin_timeout; a phase long but within its
history never hung by the spin clock; fewer than three starts: the fixed clocks, said; total stillness still hung
at stall_timeout; the evidence names the budget and where it came from."""

from __future__ import annotations

import dataclasses

from firstlight.budgets import Budgets, PhaseBudget, learn
from firstlight.config import JudgeConfig
from firstlight.judge import Judge
from firstlight.timeline import LogLine, ProcessSample, ProcInfo, Started
from tests.support.budgets import RULES, SGLANG, T0, history_of, judged, learned, start

GRAPH = "Capture cuda graph begin. This can take up to several minutes. avail mem=11.20 GB"


def _phase_start(obs: list, name_line: str) -> float:
    return next(o.t for o in obs if isinstance(o, LogLine) and o.text == name_line)


def _budgets(p95_s: float = 50.0, silence: float = 6.0, starts: int = 9, still: float = 1.0) -> Budgets:
    b = PhaseBudget("cuda_graph", starts, "cold", 45.0, p95_s, 38.0, 52.0, silence, still, starts)
    return Budgets("cold", starts, {"cuda_graph": b})


def _judge(budgets: Budgets | None, rules: JudgeConfig = RULES) -> Judge:
    j = Judge(rules, SGLANG, T0)
    j.use_budgets(budgets)
    j.feed(Started(T0, 100, "http://x", "sglang", True))
    j.feed(LogLine(T0 + 1, GRAPH, "stderr", 1))
    return j


def _spin(j: Judge, until: float, read_every: float | None = None) -> float | None:
    """One core busy from the graphs' start (T0 + 1) for ``until`` s, a sample a second (reads every
    ``read_every`` s), assessed after each as live; returns the seconds into the phase of the first ``hung``."""
    read = 0
    hung = None
    for i in range(0, int(until) + 1):
        if read_every is not None and i % int(read_every) == 0:
            read += 2 << 20
        j.feed(ProcessSample(T0 + 1 + i, alive=True, exit_code=None, cpu_seconds=float(i), rss_bytes=100 << 20,
                             read_bytes=read, procs=(ProcInfo(100, "server", "running", float(i), 100 << 20, T0),)))
        if hung is None and j._verdict(T0 + 1 + i).verdict == "hung":
            hung = float(i)
    return hung


def test_a_spinning_hang_is_named_past_its_budget_long_before_the_spin_timeout():
    j = _judge(_budgets())  # budget max(3 x 50, 80) = 150 s; silence allowance max(12, 36) = 36 s
    _spin(j, 200)
    assert j.assess(T0 + 1 + 150).verdict == "starting"  # exactly at the budget: not past it
    a = j.assess(T0 + 1 + 151)
    assert a.verdict == "hung" and a.detail == "past its learned budget"
    assert a.t - (T0 + 1) < RULES.spin_timeout / 5


def test_past_the_budget_a_phase_whose_strong_signals_move_as_usual_is_not_hung():
    assert _spin(_judge(_budgets()), 400, read_every=30) is None  # reads every 30 s: within the 36 s allowance
    assert _spin(_judge(_budgets()), 400, read_every=40) == 157  # past the budget, 37 s after the read at 120 s


def test_the_silence_allowance_boundary():
    j = _judge(_budgets(p95_s=1.0, silence=6.0))  # budget 31 s, allowance 36 s
    _spin(j, 60)
    assert j.assess(T0 + 1 + 36).verdict == "starting"  # silent exactly the allowance
    assert j.assess(T0 + 1 + 37).verdict == "hung"


def test_a_long_but_usual_phase_is_never_hung_by_the_spin_clock():
    rules = dataclasses.replace(RULES, spin_timeout=300)
    # this deployment's graphs take 20 minutes of CPU without a line (silences as long as the phase)
    b = PhaseBudget("cuda_graph", 5, "cold", 1200.0, 1300.0, 1100.0, 1300.0, 1300.0, 1.0, 5)
    j = _judge(Budgets("cold", 5, {"cuda_graph": b}), rules)
    _spin(j, 1500)
    a = j.assess(T0 + 1 + 1500)
    assert a.verdict == "starting"  # 25 minutes of spinning: past spin_timeout, within its budget (3900 s)
    assert a.progress.phase_budget is not None and a.progress.phase_budget["used"] < 1
    j0 = _judge(None, rules)  # without the history the same start is hung by the spin clock
    _spin(j0, 1500)
    assert j0.assess(T0 + 1 + 1500).verdict == "hung"


def test_past_its_budget_the_spin_clock_is_the_ceiling_of_the_silence_allowance():
    rules = dataclasses.replace(RULES, spin_timeout=300)
    b = PhaseBudget("cuda_graph", 5, "cold", 10.0, 10.0, 10.0, 10.0, 1000.0, 1.0, 5)  # allowance 2000 s
    j = _judge(Budgets("cold", 5, {"cuda_graph": b}), rules)
    _spin(j, 400)
    assert j.assess(T0 + 1 + 300).verdict == "starting"
    assert j.assess(T0 + 1 + 301).verdict == "hung"


def test_fewer_than_three_starts_the_fixed_clocks_apply_and_the_verdict_says_so():
    j = _judge(_budgets(starts=2))
    _spin(j, 950)
    assert j.assess(T0 + 1 + 600).verdict == "starting"
    a = j.assess(T0 + 1 + 900)
    assert a.verdict == "hung" and a.detail == "busy-wait suspected"
    assert any(e.signal == "budget" and e.value == "no learned budget for cuda_graph: 2 earlier good cold starts "
               "had it (3 needed); the fixed clocks apply" for e in a.evidence)
    assert a.progress.phase_budget is not None and a.progress.phase_budget["learned"] is False


def test_total_stillness_is_hung_at_the_stall_timeout_unless_the_phase_is_usually_that_still():
    rules = dataclasses.replace(RULES, stall_timeout=60)
    j = _judge(_budgets(p95_s=1000.0, silence=1000.0, still=5.0), rules)  # a long phase, never still long
    j.feed(ProcessSample(T0 + 1, alive=True, exit_code=None, cpu_seconds=0.0, rss_bytes=100 << 20, read_bytes=0))
    assert j.assess(T0 + 1 + 59).verdict == "starting"
    a = j.assess(T0 + 1 + 60)
    assert a.verdict == "hung" and a.detail == "no progress"
    # usually still for 100 s in this phase: the floor moves to max(2 x 100, 100 + 30) = 200 s
    j2 = _judge(_budgets(p95_s=1000.0, silence=1000.0, still=100.0), rules)
    j2.feed(ProcessSample(T0 + 1, alive=True, exit_code=None, cpu_seconds=0.0, rss_bytes=100 << 20, read_bytes=0))
    assert j2.assess(T0 + 1 + 199).verdict == "starting"
    assert j2.assess(T0 + 1 + 200).verdict == "hung"


def test_the_evidence_names_the_budget_and_where_it_came_from():
    j = _judge(_budgets())
    _spin(j, 250)
    a = j.assess(T0 + 1 + 250)
    assert a.verdict == "hung"
    assert a.evidence[0].signal == "budget"
    assert a.evidence[0].value == ("cuda_graph has run 4m10s; the 9 earlier cold starts took 38s-52s in it (budget "
                                   "2m30s); no strong progress for 4m10s, usual at most 6.0s")
    assert a.evidence[0].since == T0 + 1
    assert any(e.value == "meanwhile: CPU busy at 100% of a core" for e in a.evidence), a.evidence


def test_the_current_phase_budget_and_its_use_are_in_the_progress():
    j = _judge(_budgets())
    _spin(j, 75)
    pb = j.assess(T0 + 1 + 75).progress.phase_budget
    assert pb is not None
    assert pb["phase"] == "cuda_graph" and pb["learned"] is True and pb["budget_s"] == 150.0
    assert pb["used_s"] == 75.0 and pb["used"] == 0.5 and pb["usual_s"] == [38.0, 52.0]
    assert pb["silence_limit_s"] == 36.0 and pb["starts"] == 9
    assert _judge(None).assess(T0 + 5).progress.phase_budget is None  # no history read


def test_learned_from_recorded_starts_a_spinning_hang_is_named_and_no_good_start_is():
    hist = history_of(5)
    b = learn(hist, hist[0][0])
    for i in range(3):  # the good starts themselves replay READY with their budgets
        _, a = judged(start(t0=T0 + 100_000 * i), budgets=b)
        assert a.verdict == "ready"
    obs = start(hang=("cuda_graph", "spinning"))
    _, a = judged(obs, budgets=b)
    began = _phase_start(obs, GRAPH)
    assert a.verdict == "hung" and a.detail == "past its learned budget"
    assert a.t - began < 200  # budget 3 x p95 (about 52 s); the spin clock would wait 900 s
    _, a0 = judged(obs)
    assert a0.verdict == "hung" and a0.t - began >= RULES.spin_timeout


def test_the_budgets_survive_the_engine_being_learnt_from_the_log():
    from firstlight.drive import Driver
    from firstlight.engines import get_profile

    d = Driver(RULES, get_profile("generic"), T0, detect=True)
    b = learned()
    d.use_budgets(b)
    for o in start(hang=("kv_cache", "spinning"), hang_for=60):
        d.feed(o)
    assert d.judge.profile.name == "sglang" and d.judge.phases.budgets is b
