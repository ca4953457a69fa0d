"""The phases of one start (firstlight/phases.py): forward only, each told to the phases' silences; the phases the
probes move where the log does not; the current phase against its learned budget (what status, /startupz and the
metrics carry) and the ETA by phase."""

from __future__ import annotations

import pytest

from firstlight.assessment import Event, Progress
from firstlight.budgets import Budgets, PhaseBudget, QuietTracker, learn
from firstlight.engines import get_profile
from firstlight.phases import PhaseTracker
from firstlight.timeline import Level, LogLine, Probe
from tests.support.budgets import history_of, judged, start

T0 = 1_700_000_000.0
VLLM, OLLAMA, LLAMA = get_profile("vllm"), get_profile("ollama"), get_profile("llamacpp")


def _tracker(spin_timeout: float = 900.0) -> tuple[PhaseTracker, QuietTracker]:
    quiet = QuietTracker()
    return PhaseTracker(T0, quiet, spin_timeout), quiet


def _phase(t: float, name: str, source: str = "probe", line: int | None = None) -> Event:
    return Event(T0 + t, "phase", name, {"source": source, "line": line})


def _held(t: float, level: Level) -> Probe:
    return Probe(T0 + t, level, True, "")


def _budgets(silence: float | None = 6.0, starts: int = 9) -> Budgets:
    b = PhaseBudget("cuda_graph", starts, "cold", 45.0, 50.0, 38.0, 52.0, silence, 1.0, starts)
    return Budgets("cold", starts, {"cuda_graph": b})


# -- the spans ---------------------------------------------------------------------------------------------------
def test_a_start_begins_in_process_start_and_its_phases_only_move_forward():
    ph, quiet = _tracker()
    assert [(s.name, s.start, s.end, s.source, s.line) for s in ph.spans] == [
        ("process_start", T0, None, "start", None)]
    assert ph.enter(T0 + 2, "weights_loading", "log", 7) == [_phase(2, "weights_loading", "log", 7)]
    assert ph.enter(T0 + 3, "weights_loading", "log", 8) == []  # the same phase again: nothing
    assert ph.enter(T0 + 4, "distributed_init", "log", 9) == []  # an earlier one: nothing
    assert ph.current.name == "weights_loading"
    assert ph.dicts() == [
        {"name": "process_start", "start": T0, "end": T0 + 2, "source": "start", "line": None},
        {"name": "weights_loading", "start": T0 + 2, "end": None, "source": "log", "line": 7}]
    assert quiet.phases["process_start"]["silence_s"] == 2.0  # each phase entered is told to the silences


def test_before_and_the_start_of_a_phase():
    ph, _ = _tracker()
    ph.enter(T0 + 5, "kv_cache", "log")
    assert ph.before("cuda_graph") and not ph.before("kv_cache") and not ph.before("compile")
    assert (ph.start_of("kv_cache", 0.0), ph.start_of("process_start", 0.0)) == (T0 + 5, T0)
    assert ph.start_of("weights_loading", -1.0) == -1.0  # never entered: the default


def test_a_final_verdict_closes_the_current_phase_once():
    ph, quiet = _tracker()
    ph.enter(T0 + 1, "warmup", "probe")
    ph.close(T0 + 4)
    assert ph.current.end == T0 + 4 and quiet.phases["warmup"]["silence_s"] == 3.0
    ph.close(T0 + 9)  # already ended: where it ended
    assert ph.current.end == T0 + 4 and quiet.phases["warmup"]["silence_s"] == 3.0


# -- the phases the probes move ------------------------------------------------------------------------------------
def test_a_healthy_health_probe_is_warmup_unless_the_engine_said_ready_or_its_health_lies_while_loading():
    ph, _ = _tracker()
    assert ph.probed(_held(1, Level.HEALTH), VLLM, "server", engine_ready=True) == []
    assert ph.probed(_held(1, Level.HEALTH), OLLAMA, "server", engine_ready=False) == []  # "/" answers while loading
    assert ph.probed(_held(2, Level.HEALTH), VLLM, "server", engine_ready=False) == [_phase(2, "warmup")]
    assert ph.probed(_held(3, Level.HEALTH), VLLM, "server", engine_ready=False) == []  # already there
    assert ph.probed(_held(3, Level.PORT), VLLM, "server", engine_ready=False) == []  # never back to http_listening


@pytest.mark.parametrize("level", [Level.PORT, Level.HTTP])
def test_an_answering_port_is_http_listening_only_where_the_port_opens_late_and_never_for_a_worker(level: Level):
    ph, _ = _tracker()
    assert ph.probed(_held(1, level), LLAMA, "server", engine_ready=False) == []  # its port opens before it loads
    assert ph.probed(_held(1, level), VLLM, "worker", engine_ready=False) == []
    assert ph.probed(_held(2, level), VLLM, "server", engine_ready=True) == [_phase(2, "http_listening")]
    assert ph.probed(_held(3, level), VLLM, "server", engine_ready=False) == []  # already there


def test_the_other_rungs_move_no_phase():
    ph, _ = _tracker()
    for level in (Level.PROCESS, Level.MODELS, Level.GENERATION):
        assert ph.probed(_held(1, level), VLLM, "server", engine_ready=False) == []
    assert [s.name for s in ph.spans] == ["process_start"]


# -- the current phase against its budget ------------------------------------------------------------------------
def test_without_a_history_there_is_no_budget_and_no_budget_use():
    ph, _ = _tracker()
    assert ph.budget() is None and ph.budget_use(T0 + 5) is None


def test_the_budget_use_of_a_phase_with_a_learned_budget():
    ph, _ = _tracker()
    ph.budgets = b = _budgets()
    ph.enter(T0 + 1, "cuda_graph", "log")
    assert ph.budget() is b.phases["cuda_graph"]
    assert ph.budget_use(T0 + 76) == {
        "phase": "cuda_graph", "learned": True, "starts": 9, "start_type": "cold", "used_s": 75.0, "budget_s": 150.0,
        "used": 0.5, "median_s": 45.0, "usual_s": [38.0, 52.0], "silence_s": 75.0, "silence_limit_s": 36.0,
        "note": "the 9 earlier cold starts took 38s-52s in it"}
    use = ph.budget_use(T0)  # a clock before the phase began: nothing used yet
    assert use is not None and (use["used_s"], use["used"]) == (0.0, 0.0)


def test_the_budget_use_of_a_phase_without_one_says_why():
    ph, _ = _tracker()
    ph.budgets = b = _budgets(starts=2)  # two earlier starts had it: too few to learn from
    ph.enter(T0 + 1, "cuda_graph", "log")
    assert ph.budget() is None
    assert ph.budget_use(T0 + 11) == {"phase": "cuda_graph", "learned": False, "starts": 2, "start_type": "cold",
                                      "used_s": 10.0, "note": b.why_none("cuda_graph")}
    ph.enter(T0 + 12, "http_listening", "log")  # no earlier start had it
    use = ph.budget_use(T0 + 13)
    assert use is not None and (use["learned"], use["starts"], use["used_s"]) == (False, 0, 1.0)


def test_the_silence_allowed_past_the_budget_is_the_usual_longest_silence_at_most_the_spin_timeout():
    budget = _budgets().phases["cuda_graph"]
    assert _tracker(900.0)[0].silence_allowed(budget) == 36.0  # 6 s usual: 6 s + 30 s
    assert _tracker(20.0)[0].silence_allowed(budget) == 20.0  # the spin timeout is the ceiling
    unmeasured = _budgets(silence=None).phases["cuda_graph"]
    assert _tracker(900.0)[0].silence_allowed(unmeasured) == 900.0  # no silences measured: the spin timeout


# -- the ETA by phase --------------------------------------------------------------------------------------------
def test_before_ready_the_eta_by_phase_replaces_the_whole_starts():
    ph, _ = _tracker()
    ph.budgets = _budgets()
    ph.enter(T0 + 1, "cuda_graph", "log")
    p = ph.weigh(T0 + 11, Progress(eta_total_s=500.0), ready=False)
    assert p.eta_total_s == 35.0 and p.phase_budget is not None and p.phase_budget["used_s"] == 10.0
    assert ph.weigh(T0 + 11, Progress(eta_total_s=500.0), ready=True).eta_total_s == 500.0  # READY: left as it is
    ph.enter(T0 + 12, "http_listening", "log")  # no earlier start had it: the whole start's ETA
    assert ph.weigh(T0 + 13, Progress(eta_total_s=500.0), ready=False).eta_total_s == 500.0


def test_without_a_history_the_progress_is_left_as_it_is():
    ph, _ = _tracker()
    p = ph.weigh(T0 + 5, Progress(eta_total_s=7.0), ready=False)
    assert (p.eta_total_s, p.phase_budget) == (7.0, None)


def test_a_judged_start_with_budgets_gives_the_eta_of_the_phases_left():
    hist = history_of(3)
    budgets = learn(hist, hist[0][0])
    obs = start()
    load = next(o.t for o in obs if isinstance(o, LogLine) and o.text.startswith("Load weight begin"))
    driver, _ = judged([o for o in obs if o.t <= load + 10.0], budgets=budgets)
    p = driver.judge.progress(load + 10.0)
    after = sum(budgets.phases[n].median_s for n in ("weights_loaded", "kv_cache", "cuda_graph", "http_listening",
                                                     "warmup"))  # warmup: the generation probe's time before READY
    assert p.eta_total_s == pytest.approx(budgets.phases["weights_loading"].median_s - 10.0 + after, abs=0.01)


# -- a relabel: a download found while the load it precedes shows no progress yet ----------------------------------
@pytest.mark.parametrize("source", ["log", "hub_cache"])
def test_a_download_renames_the_load_it_was_found_in_keeping_its_start_source_and_line(source: str):
    ph, quiet = _tracker()
    ph.enter(T0 + 2, "weights_loading", "log", 7)
    assert ph.enter(T0 + 5, "download", source, 9) == [
        Event(T0 + 5, "phase", "download", {"source": source, "line": 9, "relabel": "weights_loading"})]
    assert [(s.name, s.start, s.source, s.line) for s in ph.spans] == [
        ("process_start", T0, "start", None), ("download", T0 + 2, "log", 7)]
    assert quiet.phases["weights_loading"]["silence_s"] == 3.0  # the silences count the download from now
    assert quiet.of("download", T0 + 6) is not None and quiet.of("download", T0 + 6)["silence_s"] == 1.0
    assert ph.enter(T0 + 9, "weights_loading", "log", 12) == [_phase(9, "weights_loading", "log", 12)]  # then on
    assert ph.dicts()[-2:] == [
        {"name": "download", "start": T0 + 2, "end": T0 + 9, "source": "log", "line": 7},
        {"name": "weights_loading", "start": T0 + 9, "end": None, "source": "log", "line": 12}]


def test_a_download_entered_before_the_load_is_a_new_span():
    ph, _ = _tracker()
    assert ph.enter(T0 + 1, "download", "log", 3) == [_phase(1, "download", "log", 3)]  # no relabel key
    assert [s.name for s in ph.spans] == ["process_start", "download"]


def test_a_probe_never_renames_and_nothing_renames_back_past_an_earlier_phase():
    ph, _ = _tracker()
    ph.enter(T0 + 2, "weights_loading", "log")
    assert ph.enter(T0 + 3, "download", "probe") == [] and ph.current.name == "weights_loading"
    # a start whose phase before the load was already past download (a download after it cannot be)
    later, _ = _tracker()
    later.spans[0].name = "weights_loaded"  # as if the span before were later than download
    later.spans.append(type(later.spans[0])("weights_loading", T0 + 4, source="log"))
    assert later.enter(T0 + 5, "download", "log") == [] and later.current.name == "weights_loading"
    equal, _ = _tracker()
    equal.spans[0].name = "download"  # the span before is download itself: not renamed twice
    equal.spans.append(type(equal.spans[0])("weights_loading", T0 + 4, source="log"))
    assert equal.enter(T0 + 5, "download", "log") == [] and [s.name for s in equal.spans] == ["download",
                                                                                            "weights_loading"]


def test_the_budget_use_is_rounded_to_the_millisecond():
    ph, _ = _tracker()
    b = PhaseBudget("cuda_graph", 9, "cold", 45.12345, 50.0, 38.12345, 52.12345, 6.0, 1.0, 9)
    ph.budgets = Budgets("cold", 9, {"cuda_graph": b})
    ph.enter(T0 + 1, "cuda_graph", "log")
    use = ph.budget_use(T0 + 76.1234567)
    assert use is not None
    assert (use["used_s"], use["median_s"], use["usual_s"], use["used"]) == (
        75.123, 45.123, [38.123, 52.123], round(75.1234567 / b.budget_s, 4))
    assert use["budget_s"] == round(b.budget_s, 3) and use["silence_s"] == 75.123
    assert use["silence_limit_s"] == round(ph.silence_allowed(b), 3)
