"""Run-time state of one watch, owned by the session: what was learnt while running.

Configuration is read-only once a run starts (``firstlight.config``). What the run learns on the way (the
engine, once its log lines or endpoints tell it; the endpoints that engine serves; the whole-start estimate
from history) lives here, changed only by the session's own thread, and handed to the components that need
it through their own methods, never by writing into their configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from firstlight.config import Config
from firstlight.engines import get_profile, new_detector
from firstlight.engines.detect import EngineDetector
from firstlight.engines.profile import EngineProfile

DETECT_MAX_LINES = 2000


@dataclass
class RunState:
    profile: EngineProfile
    detector: EngineDetector | None = None  # engine not named and not told by the command: learn it
    expected_total_s: float | None = None

    @classmethod
    def for_config(cls, cfg: Config, profile: EngineProfile) -> RunState:
        detect = cfg.engine is None and profile.name == "generic"
        return cls(profile, new_detector() if detect else None, cfg.judge.expected_total_s)

    def learn_from_line(self, text: str) -> str | None:
        """Feed a log line to the detector; the engine's name once it is sure."""
        if self.detector is None:
            return None
        self.detector.feed(text)
        name = self.detector.best()
        if name is None and self.detector.lines > DETECT_MAX_LINES:
            self.detector = None
        return name

    def use_engine(self, name: str) -> EngineProfile:
        self.detector = None
        self.profile = get_profile(name)
        return self.profile
