"""The live dashboard, drawn from a recorded run into a recording rich Console of a fixed size: checks of what
it must show (phase, percentage, ETA, GPU bars, levels, the last log line), no snapshots.

The in-process tests of this subject; the others: ``tests/e2e/report/test_dashboard.py``.
"""

from __future__ import annotations

import io

from firstlight.config import JudgeConfig
from firstlight.engines import get_profile
from firstlight.judge import Judge
from firstlight.report.dashboard import REFRESH_PER_SECOND, DashboardReporter, DashboardState
from tests.support.dashboard import draw


def test_dashboard_reporter_redraws_at_most_twice_a_second_and_leaves_plain_verdict_lines():
    out = io.StringIO()
    rep = DashboardReporter(out, echo_server=False)
    assert REFRESH_PER_SECOND <= 2 and rep.period >= 0.5 and rep._live is not None and not rep._live.auto_refresh
    rep.started({"started_at": 1.0, "pid": 1, "launched": True, "engine": "vllm", "url": "http://x", "command": None})
    rep.close()
    assert "launched pid 1" in out.getvalue()
    assert rep.board.renders >= 1


def test_once_the_engine_says_weights_are_loaded_the_bar_is_full_without_an_eta():
    from tests.support.report import T0, proc, ready_timeline

    obs = [*ready_timeline()[:5], proc(2.2, 100 << 20, 1.5, 3)]  # up to "Load weight end", then a sample
    judge = Judge(JudgeConfig(), get_profile("sglang"), T0)
    state = DashboardState()
    state.started({"started_at": T0, "engine": "sglang", "url": "http://x", "pid": 1})
    from firstlight.timeline import WeightsTotal

    for o in [obs[0], WeightsTotal(T0, 10 << 30, 4, "/m"), *obs[1:]]:  # 100 MB of 10 GB read: 1 % by disk
        for ev in judge.feed(o):
            state.event(ev)
        state.observe(o)
        state.assessment = judge.assess(o.t)
    weights = next(line for line in draw(state).splitlines() if line.startswith("weights"))
    assert "loaded" in weights and "ETA" not in weights and "read from disk" in weights


def test_a_load_renamed_download_is_one_span_from_where_it_began():
    from firstlight.assessment import Event

    state = DashboardState()
    state.started({"started_at": 10.0, "engine": "vllm", "url": "http://x", "pid": 1})
    state.event(Event(12.0, "phase", "weights_loading"))
    state.event(Event(15.0, "phase", "download", {"relabel": "weights_loading"}))
    state.event(Event(30.0, "phase", "weights_loading"))
    assert state.phases == [("process_start", 10.0), ("download", 12.0), ("weights_loading", 30.0)]
