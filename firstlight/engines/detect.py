"""Engine detection from log lines and from one HTTP response (from a launch command: ``command.py``), each by one
matcher over the registered profiles' data: no engine is named in this code, so a plugin's profile is detected as
a built-in one is."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from firstlight.logtext import classify_prefix
from firstlight.wire.content import NotJSON, parse_json

from .lines import clean_line
from .prefilter import Rule, may_match
from .profile import EndpointRule, EngineProfile, JsonValue, strip_ansi
from .words import WordScore

DETECT_THRESHOLD = 4


class EngineDetector:
    """Incremental log-based detection: feed lines, then ask :meth:`best`.

    Each profile's ``detect_patterns`` carry a weight; a pattern counts once however often it matches. An
    engine needs ``DETECT_THRESHOLD``; when an engine that ``embeds`` another (SGLang prints vLLM-style
    loader lines, Ollama runs llama.cpp) is detected, the embedded one is dropped. While no pattern names an
    engine, the log's words may (``words.py``: the learned table); ``by_words`` then says so, and a driver
    takes that engine provisionally, for a pattern to overrule.
    """

    def __init__(self, profiles: Sequence[EngineProfile]) -> None:
        self._words = WordScore([p.name for p in profiles])
        self.by_words = False
        self._profiles = [p for p in profiles if p.detect_patterns]
        self._order = {p.name: i for i, p in enumerate(self._profiles)}
        self._rules: list[tuple[str, Rule]] = []
        for p in self._profiles:
            for rule in p.detect_rules:
                self._rules.append((p.name, rule))
        self._seen: set[int] = set()
        self.scores: dict[str, int] = {p.name: 0 for p in self._profiles}
        self.lines = 0

    def feed(self, line: str, count: bool = True) -> None:
        """One line's words; ``count`` False for a progress redraw, which is no line of the log."""
        self.lines += count
        raw = detected_text(line)
        cleaned = clean_line(raw)
        lower_raw: list[str] = []
        lower_clean: list[str] = []
        for idx, (name, rule) in enumerate(self._rules):
            if idx in self._seen:
                continue
            hit = may_match(rule, raw, lower_raw) and rule.regex.search(raw) is not None
            if not hit and cleaned != raw:
                hit = may_match(rule, cleaned, lower_clean) and rule.regex.search(cleaned) is not None
            if hit:
                self._seen.add(idx)
                self.scores[name] += int(rule.payload)
        self._words.feed(raw)

    def evidence(self, name: str) -> str:
        """Why ``name`` was detected: its patterns' weight, or the words' lead (a note's text)."""
        if self.by_words:
            return f"engine named by its log's words, no line a profile knows: {name} ({self._words.lead()})"
        return f"engine detected from its log lines: {name}"

    def embedded(self, name: str) -> bool:
        """Whether another engine embeds ``name`` (Ollama runs llama.cpp): its lines may yet claim the log."""
        return any(name in p.embeds for p in self._profiles)

    def claims(self, wrapper: str, inner: str) -> bool:
        """Whether ``wrapper`` embeds ``inner``: the only engine that may take a log from one learnt already."""
        return any(p.name == wrapper and inner in p.embeds for p in self._profiles)

    def best(self) -> str | None:
        detected = {n: s for n, s in self.scores.items() if s >= DETECT_THRESHOLD}
        self.by_words = not detected
        if not detected:
            return self._words.best()
        for p in self._profiles:
            if p.name in detected:
                for inner in p.embeds:
                    detected.pop(inner, None)
        return max(detected, key=lambda n: (detected[n], -self._order[n]))


def detected_text(line: str) -> str:
    """What the detector reads of a line (the learned word table too): its engine's words, frame and ANSI
    codes peeled; bounded work per line, whatever its length."""
    return strip_ansi(classify_prefix(line)).rstrip("\r\n")


def detect_from_lines(
    lines: Iterable[str], profiles: Sequence[EngineProfile], max_lines: int = 5000
) -> str | None:
    det = EngineDetector(profiles)
    for i, line in enumerate(lines):
        if i >= max_lines:
            break
        det.feed(line)
    return det.best()


# --- endpoint detection -----------------------------------------------------------------------------
# One matcher over the profiles' ``endpoint_rules``: which engine answers is data in each engine's module.


def endpoint_rules(profiles: Sequence[EngineProfile]) -> list[tuple[str, EndpointRule]]:
    """(engine, rule) in the order they are weighed: highest priority first, then the profiles' order, then each
    profile's own."""
    ranked = [(-rule.priority, i, k, p.name, rule)
              for i, p in enumerate(profiles) for k, rule in enumerate(p.endpoint_rules)]
    return [(name, rule) for *_, name, rule in sorted(ranked, key=lambda r: r[:3])]


def detection_paths(profiles: Sequence[EngineProfile]) -> list[str]:
    """The paths the identification asks, each once, in the order their rules are weighed."""
    return list(dict.fromkeys(path for _, rule in endpoint_rules(profiles) for path in rule.asked))


def detect_from_endpoint(path: str, status: int, body: str, profiles: Sequence[EngineProfile]) -> str | None:
    """Decide the engine from one HTTP response (pure): the engine of the first rule it meets, ``None`` when the
    response says nothing."""
    path = "/" + path.split("?", 1)[0].strip("/")
    if status in (404, 405) or (status >= 500 and status != 503):  # no route, or a failure: no engine's word
        return None
    answer = _Answer(body)
    for name, rule in endpoint_rules(profiles):
        if path in rule.paths and _holds(rule, status, answer):
            return name
    return None


class _Answer:
    """A body, parsed as JSON once and only when a rule asks."""

    def __init__(self, body: str) -> None:
        self.text = body
        self._parsed = False
        self._data: Any = None

    @property
    def data(self) -> Any:
        if not self._parsed:
            self._parsed = True
            try:
                self._data = parse_json(self.text)
            except NotJSON:  # deeply nested JSON included
                self._data = None
        return self._data


def _holds(rule: EndpointRule, status: int, answer: _Answer) -> bool:
    if rule.status and status not in rule.status:
        return False
    if rule.body_contains and rule.body_contains not in answer.text:
        return False
    if rule.metric_prefix and not _metric_line(rule.metric_prefix).search(answer.text):
        return False
    if rule.json_list and not isinstance(answer.data, list):
        return False
    if rule.json_any or rule.json_all or rule.json:
        data = answer.data
        if not isinstance(data, dict):
            return False
        if rule.json_any and not any(k in data for k in rule.json_any):
            return False
        if not all(k in data for k in rule.json_all):
            return False
        if not all(any(_value_is(v, test) for v in _values(data, test.key)) for test in rule.json):
            return False
    return True


def _values(data: Any, key: str) -> Iterator[Any]:
    """The values at a dotted path; ``name[]`` steps into every item of the list ``name``."""
    found = [data]
    for part in key.split("."):
        step, each = (part[:-2], True) if part.endswith("[]") else (part, False)
        nxt: list[Any] = []
        for d in found:
            if isinstance(d, dict) and step in d:
                v = d[step]
                if not each:
                    nxt.append(v)
                elif isinstance(v, list):
                    nxt.extend(v)
        found = nxt
    yield from found


def _value_is(value: Any, test: JsonValue) -> bool:
    if test.is_list and not isinstance(value, list):
        return False
    if test.equals is not None:
        if not isinstance(value, str):
            return False
        if value != test.equals and not (test.nocase and value.lower() == test.equals.lower()):
            return False
    return not test.contains or test.contains in str(value)


@functools.lru_cache(maxsize=64)
def _metric_line(prefix: str) -> re.Pattern[str]:
    return re.compile(r"(?m)^(?:# (?:HELP|TYPE) )?" + re.escape(prefix))
