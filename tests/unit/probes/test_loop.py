"""The ladder's polling period (firstlight/probes/loop.py): the minimum right after a change, then x1.5 per
quiet round, up to the maximum."""

from __future__ import annotations

import pytest

from firstlight.probes.loop import BACKOFF, next_interval


def test_each_quiet_round_backs_off_by_1_5_up_to_the_maximum():
    seen, interval = [], 0.1
    for _ in range(8):
        interval = next_interval(interval, False, 0.1, 1.0)
        seen.append(round(interval, 6))
    assert seen == [0.15, 0.225, 0.3375, 0.50625, 0.759375, 1.0, 1.0, 1.0]
    assert BACKOFF == 1.5


@pytest.mark.parametrize("interval", [0.1, 0.5, 1.0])
def test_a_change_polls_at_the_minimum_again(interval: float):
    assert next_interval(interval, True, 0.1, 1.0) == 0.1
