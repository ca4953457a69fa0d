"""One analysis of a judged start (``firstlight.analysis``): the result, the replay of a log and the report of a
record read the same anatomy, start type and engine clock from it; "warm vs cold" is one rule."""

from __future__ import annotations

import ast

import pytest

from firstlight.analysis import analyse
from firstlight.anatomy import RESIDENT_WARM, warm_page_cache
from firstlight.config import JudgeConfig
from firstlight.drive import Driver
from firstlight.engines import get_profile
from firstlight.logreplay import Replayer
from firstlight.report.series import build_view
from firstlight.result import RunFacts, RunResult
from firstlight.starts import predicted_type
from firstlight.timeline import LogLine, Observation, Started, WeightsTotal
from tests.support.common import REPO

T0 = 1_000_000.0
GB = 1_000_000_000
VLLM = "INFO 12-01 10:00:{:02d} [x.py:1] "
LINES = ["Starting to load model /models/m...",
         "Loading weights took 4.00 seconds",
         "Directly load the compiled graph(s) for dynamic shape from the cache, took 0.4 s",
         "Available KV cache memory: 1.00 GiB",
         "Graph capturing finished in 3 secs",
         "Application startup complete."]


def _timeline() -> list[Observation]:
    obs: list[Observation] = [Started(T0, pid=None, launched=False, engine="vllm"),
                              WeightsTotal(T0 + 0.1, 4 * GB, 2, "/models/m", 4 * GB, "ext4")]
    obs += [LogLine(T0 + 2 * i + 1, VLLM.format(i) + text, lineno=i + 1) for i, text in enumerate(LINES)]
    return obs


def test_the_result_carries_the_analysis_of_its_judge():
    rules = JudgeConfig(ready_from_log=True)
    driver = Driver(rules, get_profile("vllm"), T0)
    for o in _timeline():
        a = driver.feed(o).assessment
    assert a.final and a.t == T0 + 2 * (len(LINES) - 1) + 1
    found = analyse(driver.judge, a, cold_start_s=a.elapsed_s)
    result = RunResult.from_judge(driver.judge, a, RunFacts(T0, "vllm", "", cold_start_s=a.elapsed_s))
    assert result.anatomy == found.summary_anatomy and result.start_type == found.start_type
    assert result.engine_clock == found.engine_clock
    assert found.start_type["type"] == "warm_page_cache+compile_cache_hit"
    assert found.anatomy["phases"] and "start_type" not in found.anatomy


def test_the_replay_and_the_report_give_the_anatomy_the_result_gives():
    replayer = Replayer("vllm")
    for i, text in enumerate(LINES):
        replayer.feed(VLLM.format(i) + text)
    report = replayer.report()
    final = replayer.driver.assess(T0)  # the ready line settled it: its verdict, whenever asked
    assert final.final
    found = analyse(replayer.judge, final)
    assert report.anatomy == found.anatomy and report.engine_clock == found.engine_clock
    view = build_view(_timeline(), rules=JudgeConfig(ready_from_log=True))
    result = RunResult.from_judge(*_judged(), RunFacts(T0, "vllm", ""))
    assert view.anatomy == result.anatomy and view.engine_clock == result.engine_clock


def _judged() -> tuple:  # type: ignore[type-arg]
    driver = Driver(JudgeConfig(ready_from_log=True), get_profile("vllm"), T0)
    for o in _timeline():
        a = driver.feed(o).assessment
        if a.final:
            break
    return driver.judge, a


def test_each_assessment_carries_its_time_and_the_weights_once_measured():
    driver = Driver(JudgeConfig(), get_profile("vllm"), T0)
    first = driver.feed(Started(T0, pid=None, launched=False)).assessment
    assert first.t == T0 and first.weights is None
    w = WeightsTotal(T0 + 1, 4 * GB, 2, "/models/m", GB, "ext4")
    a = driver.feed(w).assessment
    assert a.t == T0 + 1 and a.weights == w and a.clocks == ()


@pytest.mark.parametrize(("resident", "label"), [(0.9, "warm_page_cache"), (0.8999, "cold"), (None, None)])
def test_warm_versus_cold_is_one_rule(resident: float | None, label: str | None):
    w = None if resident is None else WeightsTotal(T0, 10_000, 1, "/m", int(10_000 * resident))
    assert predicted_type(w) == label
    if resident is not None:
        assert warm_page_cache(resident) == (resident >= RESIDENT_WARM)


def test_the_anatomy_and_the_start_type_are_computed_in_one_place_and_no_caller_reads_the_judges_signals():
    package = REPO / "firstlight"
    calls: dict[str, set[str]] = {"anatomy": set(), "classify": set(), "signals": set(), "RESIDENT_WARM": set()}
    for path in package.rglob("*.py"):
        name = str(path.relative_to(package))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls:
                calls[node.func.id].add(name)
            if isinstance(node, ast.Attribute) and node.attr == "signals":
                calls["signals"].add(name)
            if isinstance(node, ast.Name) and node.id == "RESIDENT_WARM":
                calls["RESIDENT_WARM"].add(name)
    assert calls["anatomy"] == {"analysis.py"} and calls["classify"] == {"analysis.py"}
    assert calls["signals"] <= {"judge.py", "analysis.py", "trackers.py"}, calls["signals"]
    assert calls["RESIDENT_WARM"] <= {"anatomy.py", "starts.py"}  # the rule is anatomy.warm_page_cache
