"""The ladder's polling period (firstlight/probes/loop.py): the minimum right after a change, then x1.5 per
quiet round, up to the maximum."""

from __future__ import annotations

import threading
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
        self.closed = 0

    def clock(self) -> float:
        return 5.0

    def close(self) -> None:
        self.closed += 1

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


def _sinking(sink: Callable[[Observation], None], loop: LadderLoop) -> LadderLoop:
    """The loop with its sink, for a test that drives it on this thread (``start`` gives it one on its own)."""
    loop.sink = sink
    return loop


def _loop(ladder: _Ladder) -> tuple[LadderLoop, list[Observation]]:
    seen: list[Observation] = []
    return _sinking(seen.append, LadderLoop(ladder, 0.01, 0.05, identify=True)), seen  # type: ignore[arg-type]


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
    loop.stop()
    loop._identify_first()
    assert seen == []


# -- the loop itself (LadderLoop._run), in process: a scripted ladder, and the waits it asks for recorded ----
class _Scripted(_Ladder):
    """Each climb answers the next list of (level, ok) of its script."""

    def __init__(self, script: list[list[tuple[Level, bool]]]) -> None:
        super().__init__(ok_to=Level.NONE)
        self.script = script
        self.endpoints: list[object] = []

    def climb(self, top: Level, sink: Callable[[Probe], None]) -> list[Probe]:
        self.tops.append(top)
        out = [Probe(1.0, lv, ok) for lv, ok in self.script.pop(0)]
        for p in out:
            sink(p)
        return out

    def use_endpoints(self, endpoints: object) -> None:
        self.endpoints.append(endpoints)


class _Waits(threading.Event):
    """The loop's wake event: records each wait's period and returns at once."""

    def __init__(self) -> None:
        super().__init__()
        self.periods: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.periods.append(round(timeout or 0.0, 6))
        return False


P, H, G = Level.PORT, Level.HTTP, Level.GENERATION


def test_the_loop_polls_at_the_minimum_after_a_change_backs_off_when_quiet_and_ends_at_generation():
    ladder = _Scripted([
        [(Level.PROCESS, True), (P, True), (H, False)],  # new: the minimum
        [(Level.PROCESS, True), (P, True), (H, False)],  # quiet: x1.5
        [(Level.PROCESS, True), (P, True)],  # the same top, but its last rung now answers: a change
        [(G, True)],
    ])
    seen: list[Observation] = []
    loop = _sinking(seen.append, LadderLoop(ladder, 0.01, 0.05))  # type: ignore[arg-type]
    loop.wake = _Waits()
    loop._run()
    assert loop.wake.periods == [0.01, 0.015, 0.01]
    assert ladder.tops == [G, G, G, G] and ladder.script == []
    assert ladder.closed == 1  # READY: the ladder's connections closed with the loop


def test_the_loop_asks_the_engine_first_then_climbs_on_at_once():
    ladder = _Scripted([[(P, True), (H, True)], [(G, True)]])
    seen: list[Observation] = []
    loop = _sinking(seen.append, LadderLoop(ladder, 0.01, 0.05, identify=True))  # type: ignore[arg-type]
    loop.wake = _Waits()
    loop._run()
    assert ladder.tops == [H, G] and loop.wake.periods == [] and ladder.identified == 1
    assert EngineIdentified(5.0, "vllm", "/version") in seen


def test_endpoints_learnt_by_the_session_reach_the_ladder_before_the_next_climb():
    ladder = _Scripted([[(G, True)]])
    loop = _sinking(lambda o: None, LadderLoop(ladder, 0.01, 0.05))  # type: ignore[arg-type]
    marker = object()
    loop.use_endpoints(marker)  # type: ignore[arg-type]
    loop._run()
    assert ladder.endpoints == [marker]


def test_a_failure_inside_a_climb_is_a_note_with_its_first_160_characters_and_the_climb_sinks_probes():
    from firstlight.timeline import SourceNote
    from firstlight.wire import clean_text

    class _Broken(_Ladder):
        def climb(self, top: Level, sink: Callable[[Probe], None]) -> list[Probe]:
            raise RuntimeError("x" * 300)

    seen: list[Observation] = []
    assert _sinking(seen.append, LadderLoop(_Broken(Level.NONE), 0.01, 0.05))._climb() == []  # type: ignore[arg-type]
    assert seen == [SourceNote(5.0, "probe", f"probe failed inside firstlight: RuntimeError: {'x' * 160}…")]
    assert clean_text("x" * 300, 160) == "x" * 160 + "…"
    ladder = _Ladder(ok_to=Level.HTTP)
    seen.clear()
    _sinking(seen.append, LadderLoop(ladder, 0.01, 0.05))._climb()  # type: ignore[arg-type]
    assert ladder.tops == [G] and [type(o) for o in seen] == [Probe] * 6


def test_the_loop_thread_is_a_named_daemon_and_asks_no_engine_unless_told():
    loop = _sinking(lambda o: None, LadderLoop(_Ladder(Level.NONE), 0.01, 0.05))  # type: ignore[arg-type]
    assert loop.identify is False
    assert loop.thread.name == "firstlight-ladder" and loop.thread.daemon is True


def test_a_stopped_loop_closes_the_ladders_connections():
    """The loop is the ladder's one user: when it ends (READY, or stopped) the ladder's ``Wire`` is closed."""
    from firstlight.config import ProbeConfig
    from firstlight.probes.ladder import Ladder
    from firstlight.sim.fixtures import free_port

    ladder = Ladder(ProbeConfig(url=f"http://127.0.0.1:{free_port()}"))  # nothing listens: it climbs on
    loop = LadderLoop(ladder, 0.01, 0.05)
    loop.start(lambda o: None)
    loop.stop()
    loop.thread.join(10)
    assert not loop.thread.is_alive() and ladder.wire._client.is_closed


def test_what_escapes_the_loop_outside_a_climb_is_a_failed_note_and_the_loop_goes_on():
    from firstlight.timeline import SourceNote

    ladder = _Scripted([[(P, True)], [(G, True)]])
    seen: list[Observation] = []
    loop = _sinking(seen.append, LadderLoop(ladder, 0.01, 0.0))  # type: ignore[arg-type]
    calls: list[int] = []

    def breaks_once() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug between climbs")

    loop._take_endpoints = breaks_once  # type: ignore[method-assign]
    loop._run()
    (note,) = [o for o in seen if isinstance(o, SourceNote)]
    assert note.failed and note.source == "probe" and "RuntimeError: a bug between climbs" in note.message
    assert ladder.tops == [G, G] and ladder.closed == 1
