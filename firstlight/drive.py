"""The one driver of the judge: observations in, in arrival order; events and assessments out.

Every path that judges a start goes through a :class:`Driver`: the live session (``up``, ``watch``, ``--unit``),
the replay of a log or a journal, the report of a recorded run, and the tests' ``judge_timeline``. So they all
detect the engine by the same rule, swap the profile the same way and assess at the same moments, and a log
judged live gives the phases, verdict, failure and hints its replay gives.

Engine detection: while the engine is unknown (not named, not told by the command), each final log line is
fed to the detector, for at most ``DETECT_LINES`` lines (a long pip or container preamble included). The
observations seen meanwhile are kept (up to ``KEEP_BYTES`` of line text): once the engine is known, a fresh
judge with its profile is fed them again, so lines printed before the detector was sure (a six-line llama.cpp
OOM) are read with the engine's own markers, exactly as a replay that knew the engine from the start reads
them. An engine another embeds (llama.cpp, which Ollama runs; vLLM, whose loader lines SGLang prints) is
provisional: the detector reads on for ``PROVISIONAL_LINES`` more lines, and the embedding engine's own lines, when
they come then, judge the start again as that engine's; after that the provisional engine is final and the kept
lines are let go. Past the bound the profile is swapped in place (the lines already read keep their generic
reading).
A verdict already final under the generic reading is judged again too (its lines meant something else): a
caller that has acted on it has stopped feeding the driver.

The driver assesses after every observation (at the observation's time); a live caller also assesses on its
own clock (``assess``), so a silence or the timeout are judged while nothing arrives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from firstlight.assessment import Assessment, Event
from firstlight.budgets import Budgets
from firstlight.config import JudgeConfig
from firstlight.engines import get_profile, new_detector
from firstlight.engines.detect import EngineDetector
from firstlight.engines.profile import EngineProfile
from firstlight.judge import Judge
from firstlight.timeline import LogLine, Observation

DETECT_LINES = 50_000  # final log lines read for the engine before it is left generic
KEEP_BYTES = 16 << 20  # line text kept for the re-judging once the engine is known
# final lines read, once an engine another embeds is learnt, for the embedding one's: what is kept meanwhile
# stays bounded whatever the log's length (a plain vLLM log is read on as vLLM's, not kept to KEEP_BYTES)
PROVISIONAL_LINES = 2_000
_BAR_HEAD = re.compile(r"\D{0,64}")  # a bar's words before its first figure: the same on every redraw


@dataclass(frozen=True)
class Step:
    """What one observation (or an engine learnt) did: the events worth a line, the assessment after it, and
    the engine learnt with it, if any."""

    events: list[Event]
    assessment: Assessment
    engine: str | None = None


class Driver:
    """Feed it observations in order; it keeps the judge, the engine detection and the assessments."""

    def __init__(self, rules: JudgeConfig, profile: EngineProfile, started_at: float, detect: bool = False) -> None:
        self.judge = Judge(rules, profile, started_at)
        self.detector: EngineDetector | None = new_detector() if detect else None
        self._kept: list[Observation] | None = [] if detect else None
        self._kept_bytes = 0
        self._provisional: str | None = None  # the engine learnt, while an engine that embeds it may yet claim the log
        self._provisional_until = 0  # the detector's line count at which the provisional engine is final
        self._expected_total_s = rules.expected_total_s
        self._budgets: Budgets | None = None
        self._bar_head: str | None = None  # the last redraw's words the detector read
        self._by_words = False  # the provisional engine was named by the log's words, no pattern

    @property
    def profile(self) -> EngineProfile:
        return self.judge.profile

    @property
    def detecting(self) -> bool:
        """The engine is still unknown and may yet be learnt (from lines or endpoints)."""
        return self.detector is not None and self._provisional is None

    def feed(self, obs: Observation) -> Step:
        name = self._detect(obs)
        if self._kept is not None:
            self._keep(obs)
        if name is not None:
            assert self.detector is not None
            events = self._swap(name, obs, self.detector.evidence(name), by_words=self.detector.by_words)
        else:
            events = self.judge.feed(obs)
        return Step(events, self.judge.assess(obs.t), name)

    def use_engine(self, name: str, t: float, why: str) -> Step:
        """The engine became known another way (its endpoints answered as that engine's do): final, over an
        engine the log's words named too."""
        if self._by_words and name == self._provisional:
            self._stop_detecting()  # what the words said, confirmed
            return Step([Event(t, "note", why)], self.judge.assess(t))
        if not (self.detecting or self._by_words):
            return Step([], self.judge.assess(t))
        return Step(self._swap(name, None, why, t), self.judge.assess(t), name)

    def expect_total(self, seconds: float | None) -> None:
        """The whole-start estimate (this deployment's history), kept across a swap of the judge."""
        self._expected_total_s = seconds
        self.judge.expect_total(seconds)

    def use_budgets(self, budgets: Budgets | None) -> None:
        """The phase budgets learned from this deployment's history, kept across a swap of the judge."""
        self._budgets = budgets
        self.judge.use_budgets(budgets)

    def assess(self, now: float) -> Assessment:
        return self.judge.assess(now)

    def end_of_log(self, t: float) -> Assessment:
        """Replay: the log is over (what a process exit is live)."""
        self.judge.end_of_log(t)
        return self.judge.assess(t)

    # -- the engine -----------------------------------------------------------------------------------------
    def _detect(self, obs: Observation) -> str | None:
        if self.detector is None or not isinstance(obs, LogLine):
            return None
        if not obs.final:
            # a progress bar's redraw is the engine's words too (its last state may be glued to a crash's line):
            # read once per bar, by the words before its figures, and counted as no line
            m = _BAR_HEAD.match(obs.text)
            head = m.group() if m else ""
            if head == self._bar_head:
                return None
            self._bar_head = head
            self.detector.feed(obs.text, count=False)
            return self._detected()
        self._bar_head = None
        self.detector.feed(obs.text)
        return self._detected()

    def _detected(self) -> str | None:
        assert self.detector is not None
        name = self.detector.best()
        if name is not None and not self._takes(name):
            name = None
        if name is None and (self.detector.lines >= DETECT_LINES or (
                self._provisional is not None and self.detector.lines >= self._provisional_until)):
            self._stop_detecting()
        return name

    def _takes(self, name: str) -> bool:
        """Whether the engine named now takes the log: while none is learnt, any but the one read already;
        from a provisional engine, one that embeds it, or any other when the words alone named it (as they
        weigh more words, or as a pattern's line comes)."""
        assert self.detector is not None
        if self._provisional is None:
            return name != self.judge.profile.name
        if name == self._provisional:
            return False
        return self._by_words or self.detector.claims(name, self._provisional)

    def _keep(self, obs: Observation) -> None:
        assert self._kept is not None
        if isinstance(obs, LogLine):
            self._kept_bytes += len(obs.text)
            if self._kept_bytes > KEEP_BYTES:
                self._kept = None
                return
        self._kept.append(obs)

    def _stop_detecting(self) -> None:
        self.detector = None
        self._kept = None
        self._provisional = None
        self._by_words = False

    def _swap(self, name: str, obs: Observation | None, why: str, t: float | None = None,
              by_words: bool = False) -> list[Event]:
        """The engine is known: judge again from the start with its profile (``obs``, already kept, included),
        or, past the kept bound, swap the profile in place and feed ``obs``. ``by_words``: the log's words
        named it, no pattern."""
        profile = get_profile(name)
        old, kept = self.judge, self._kept
        detector = self.detector
        self._stop_detecting()
        # a wrapper's lines may follow, or, for an engine named by its words, a line a pattern knows
        if detector is not None and kept is not None and (detector.embedded(name) or by_words):
            self.detector, self._kept, self._provisional = detector, kept, name
            self._by_words = by_words
            self._provisional_until = detector.lines + PROVISIONAL_LINES
        when = obs.t if obs is not None else t
        assert when is not None
        if kept is None:
            old.use_profile(profile)
            events = old.feed(obs) if obs is not None else []
        else:
            self.judge = Judge(old.rules, profile, old.started_at)
            self.judge.expect_total(self._expected_total_s)
            self.judge.use_budgets(self._budgets)
            for o in kept:
                self.judge.feed(o)
                self.judge.assess(o.t)
            had = {(s.name, s.start) for s in old.phases.spans}
            # what the old reading missed (the reporters heard the rest already)
            events = [Event(s.start, "phase", s.name, {"source": s.source, "line": s.line})
                      for s in self.judge.phases.spans if (s.name, s.start) not in had]
        return [*events, Event(when, "note", why)]


def judge_timeline(observations: list[Observation], rules: JudgeConfig, profile: EngineProfile,
                   now: float) -> Assessment:
    """Judge a whole recorded timeline and assess it at ``now``: the verdict of the first step that was final,
    or the assessment at ``now``."""
    if not observations:
        raise ValueError("empty timeline")
    driver = Driver(rules, profile, observations[0].t)
    for obs in observations:
        a = driver.feed(obs).assessment
        if a.final:
            return a
    return driver.assess(now)


__all__ = ["DETECT_LINES", "KEEP_BYTES", "PROVISIONAL_LINES", "Driver", "Step", "judge_timeline"]
