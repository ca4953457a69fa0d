"""Slow or hung, with evidence: the simulated server reading a real file, on real processes (time-compressed).

The in-process tests of this subject; the others: ``tests/e2e/sim/test_progress.py``.
"""

from __future__ import annotations


def test_eta_of_a_constant_rate_load_is_within_ten_percent_after_a_quarter():
    from firstlight.config import JudgeConfig
    from firstlight.engines import get_profile
    from firstlight.judge import Judge
    from firstlight.timeline import ProcessSample, Started, WeightsTotal

    t0, total, rate = 1_700_000_000.0, 10 << 30, 200 << 20  # 10 GiB at 200 MiB/s: 51.2 s
    j = Judge(JudgeConfig(), get_profile("generic"), t0)
    j.feed(Started(t0, 1, "http://x", "generic", True))
    j.feed(WeightsTotal(t0, total, 8, "/m"))
    checked = 0
    for i in range(0, 52):
        t = t0 + i
        j.feed(ProcessSample(t, True, cpu_seconds=i * 0.5, rss_bytes=1 << 30, read_bytes=min(total, i * rate)))
        p = j.progress(t)
        if p.weights_fraction is not None and 0.25 <= p.weights_fraction < 0.9:
            actual = total / rate - i
            assert p.eta_weights_s is not None and abs(p.eta_weights_s - actual) <= 0.10 * actual, (i, p)
            checked += 1
    assert checked >= 20
