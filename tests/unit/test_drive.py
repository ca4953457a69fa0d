"""The driver (firstlight/drive.py): phases read in lines that came before the engine was detected are reported
when it is, with their own line numbers and times (the reporters heard only the generic reading)."""

from __future__ import annotations

from firstlight.drive import Driver
from firstlight.engines import get_profile
from firstlight.logreplay import REPLAY_RULES
from firstlight.timeline import LogLine

# vLLM's lines: the first reads as weights_loaded only to vLLM's profile (weights_loading to the generic
# one), and the detector is sure on the second.
LINES = [
    "INFO 05-07 02:13:52 [loader.py:458] Loading weights took 0.10 seconds",
    "INFO 05-07 02:13:52 [gpu_model_runner.py:1347] Model loading took 0.2533 GiB and 0.907387 seconds",
]


def test_phases_read_before_the_engine_is_detected_are_reported_once_it_is():
    d = Driver(REPLAY_RULES, get_profile("generic"), 0.0, detect=True)
    first = d.feed(LogLine(1.0, LINES[0], lineno=1))
    assert first.engine is None  # generic: at most "weights_loading", never vLLM's "weights_loaded"
    assert "weights_loaded" not in [e.message for e in first.events if e.type == "phase"]
    second = d.feed(LogLine(2.0, LINES[1], lineno=2))
    assert second.engine == "vllm"
    phases = [(e.message, e.t, e.data.get("line")) for e in second.events if e.type == "phase"]
    assert ("weights_loaded", 1.0, 1) in phases, second.events
    assert second.events[-1].message == "engine detected from its log lines: vllm"
    assert d.assess(2.0).phase == "weights_loaded" and d.profile.name == "vllm"


def test_a_phase_the_generic_reading_already_reported_is_not_reported_twice():
    d = Driver(REPLAY_RULES, get_profile("generic"), 0.0, detect=True)
    told = []
    for i, text in enumerate(["Loading model weights", *LINES], start=1):
        told += [(e.message, e.t) for e in d.feed(LogLine(float(i), text, lineno=i)).events if e.type == "phase"]
    assert len(told) == len(set(told)), told
