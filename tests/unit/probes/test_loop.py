"""The ladder's polling period (firstlight/probes/loop.py): the minimum right after a change, then x1.5 per
quiet round, up to the maximum."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from firstlight.probes.loop import BACKOFF, EngineIdentified, LadderLoop, next_interval
from firstlight.timeline import Level, Observation, Probe


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


# -- the engine asked first (LadderLoop._identify_first): in process, with a ladder that climbs as told ---------
class _Ladder:
    """Answers each climb with the probes given for its levels (up to its top), and identify() with `found`."""

    def __init__(self, ok_to: Level, found: tuple[str, str] | Exception | None = ("vllm", "/version")) -> None:
        self.ok_to, self.found = ok_to, found
        self.tops: list[Level] = []
        self.identified = 0

    def clock(self) -> float:
        return 5.0

    def climb(self, top: Level, sink: Callable[[Probe], None]) -> list[Probe]:
        self.tops.append(top)
        out = [Probe(1.0, lv, lv <= self.ok_to, f"rung {int(lv)}") for lv in Level if Level.NONE < lv <= top]
        for p in out:
            sink(p)
        return out

    def identify(self) -> tuple[str, str] | None:
        self.identified += 1
        if isinstance(self.found, Exception):
            raise self.found
        return self.found


def _loop(ladder: _Ladder) -> tuple[LadderLoop, list[Observation]]:
    seen: list[Observation] = []
    return LadderLoop(ladder, seen.append, 0.01, 0.05, identify=True), seen  # type: ignore[arg-type]


def test_engine_unknown_climbs_no_higher_than_http_and_asks_nothing_until_http_answers():
    ladder = _Ladder(ok_to=Level.PORT)
    loop, seen = _loop(ladder)
    results = loop._identify_first()
    assert ladder.tops == [Level.HTTP] and ladder.identified == 0 and loop.identify
    assert [p.level for p in results] == [Level.PROCESS, Level.PORT, Level.HTTP]
    assert not any(isinstance(o, EngineIdentified) for o in seen)


def test_once_http_answers_the_engine_is_asked_once_and_named_with_how():
    ladder = _Ladder(ok_to=Level.HTTP)
    loop, seen = _loop(ladder)
    loop._identify_first()
    assert ladder.identified == 1 and not loop.identify
    assert [o for o in seen if isinstance(o, EngineIdentified)] == [EngineIdentified(5.0, "vllm", "/version")]
    assert [o for o in seen if isinstance(o, Probe)][-1].level == Level.HTTP  # the probes went to the sink


@pytest.mark.parametrize("found", [None, RuntimeError("boom")])
def test_an_engine_that_cannot_be_named_stays_generic_and_the_loop_climbs_on(found: object):
    ladder = _Ladder(ok_to=Level.HTTP, found=found)  # type: ignore[arg-type]
    loop, seen = _loop(ladder)
    loop._identify_first()
    assert not loop.identify and not any(isinstance(o, EngineIdentified) for o in seen)


def test_a_stopped_loop_sinks_no_engine_and_no_probe():
    ladder = _Ladder(ok_to=Level.HTTP)
    loop, seen = _loop(ladder)
    loop.stop.set()
    loop._identify_first()
    assert seen == []
