"""One log line can't freeze firstlight (issue 15, item 8): every per-line pattern is linear and sees a bounded
prefix of the line. Asserted on the work done (the length of what each pattern is given), never on wall time;
and replay reads a non-seekable file (a ``<(zcat log.gz)`` process substitution).

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_lines.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from firstlight import interpret, logtext
from firstlight import timestamps as replay_mod
from firstlight.engines import PROFILES, get_profile, new_detector
from firstlight.engines import lines as lines_mod
from firstlight.engines import profile as profile_mod
from firstlight.judge import is_access_line as judge_is_access_line
from firstlight.logtext import CLASSIFY_CHARS, LineSplitter, is_access_line

MIB = 1 << 20


class Recording:
    """A compiled pattern that records the length of every string it is applied to."""

    def __init__(self, rx: re.Pattern[str], seen: list[int]) -> None:
        self.rx, self.seen = rx, seen

    def _rec(self, name: str, s: str, *a: Any) -> Any:
        self.seen.append(len(s))
        return getattr(self.rx, name)(s, *a)

    def search(self, s: str, *a: Any) -> Any:
        return self._rec("search", s, *a)

    def match(self, s: str, *a: Any) -> Any:
        return self._rec("match", s, *a)

    def sub(self, repl: Any, s: str, *a: Any) -> Any:
        self.seen.append(len(s))
        return self.rx.sub(repl, s, *a)

    def findall(self, s: str, *a: Any) -> Any:
        return self._rec("findall", s, *a)

    def finditer(self, s: str, *a: Any) -> Any:
        return self._rec("finditer", s, *a)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rx, name)


def _hostile_lines() -> list[str]:
    """1 MiB lines built to make backtracking patterns work hard: a path that never ends in a status, words
    full of dots, long runs of the literals engine patterns look for."""
    return [
        "GET /" + "a" * MIB,
        "[2025-01-01 00:00:00] " + "Error." * (MIB // 6),
        "INFO 01-01 00:00:00 [x.py:1] " + "Loading safetensors checkpoint shards: " * (MIB // 40),
        '{"timestamp": "' + "9" * MIB,
        "(EngineCore pid=1 " + "x=" * (MIB // 2),
        "\x1b[31m" * (MIB // 5),
        "out of memory " * (MIB // 14),
    ]


def test_the_access_line_pattern_is_linear_and_bounded(monkeypatch: pytest.MonkeyPatch):
    seen: list[int] = []
    monkeypatch.setattr(logtext, "_ACCESS_REQUEST", Recording(logtext._ACCESS_REQUEST, seen))
    monkeypatch.setattr(logtext, "_ACCESS_STATUS", Recording(logtext._ACCESS_STATUS, seen))
    assert not is_access_line("GET /" + "a" * MIB)  # the line that took an hour
    assert not is_access_line("GET /" + "a" * 56_000 + " 200")  # a status beyond the prefix is not looked for
    assert seen and max(seen) <= CLASSIFY_CHARS
    assert judge_is_access_line is is_access_line  # the judge uses this one
    # same answers as before on real lines
    assert is_access_line('INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK')
    assert is_access_line("srv  log_server_r: request: POST /v1/completions 127.0.0.1 503")
    assert not is_access_line("Loading weights took 3.2 s")
    assert not is_access_line("GET / with no status")


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_engine_pattern_sees_a_bounded_prefix_of_a_1mib_line(name: str, monkeypatch: pytest.MonkeyPatch):
    seen: list[int] = []
    profile = get_profile(name)
    matcher = profile._matcher
    monkeypatch.setattr(matcher, "rules", tuple(r._replace(regex=Recording(r.regex, seen)) for r in matcher.rules))
    monkeypatch.setattr(lines_mod, "_PREFIX_RE", Recording(lines_mod._PREFIX_RE, seen))
    monkeypatch.setattr(lines_mod, "_ANSI_RE", Recording(lines_mod._ANSI_RE, seen))
    monkeypatch.setattr(profile_mod, "WORD", Recording(profile_mod.WORD, seen))
    for line in _hostile_lines():
        profile.classify(line)
    assert seen and max(seen) <= CLASSIFY_CHARS


def test_engine_detection_patterns_see_a_bounded_prefix(monkeypatch: pytest.MonkeyPatch):
    seen: list[int] = []
    det = new_detector()
    monkeypatch.setattr(det, "_rules", [(name, r._replace(regex=Recording(r.regex, seen))) for name, r in det._rules])
    for line in _hostile_lines():
        det.feed(line)
    assert seen and max(seen) <= CLASSIFY_CHARS


def test_timestamp_and_traceback_patterns_see_a_bounded_prefix(monkeypatch: pytest.MonkeyPatch):
    seen: list[int] = []
    for attr in ("_TS_PREFIX", "_EMBEDDED_TS", "_JSON_TS"):
        monkeypatch.setattr(replay_mod, attr, Recording(getattr(replay_mod, attr), seen))
    for attr in ("_EXC_LINE", "_TB_LINE"):
        monkeypatch.setattr(interpret, attr, Recording(getattr(interpret, attr), seen))
    monkeypatch.setattr(replay_mod, "_TS_PATTERNS",
                        tuple((k, Recording(rx, seen)) for k, rx in replay_mod._TS_PATTERNS))
    parser = replay_mod.TimestampParser()
    reader = interpret.LineInterpreter(get_profile("vllm"))
    for line in _hostile_lines():
        parser.parse(line)
        reader.feed(line)
    assert seen and max(seen) <= CLASSIFY_CHARS


def test_a_long_line_inside_a_journal_export_record_is_cut_like_any_line():
    """After a ``__CURSOR=`` line (an export record), a line without its newline still goes out in pieces of the
    cut: a 300 MB line once cost 1.19 GB held whole."""
    s = LineSplitter(max_line_bytes=1024)
    assert s.feed_lines(b"__CURSOR=s=1\n__REALTIME_TIMESTAMP=1700000000000000\n") == []
    out = s.feed_lines(b"MESSAGE=" + b"x" * 10 * 1024)
    assert len([e for e in out if e.final]) >= 9  # before any newline: the buffer holds at most one piece
    out += s.feed_lines(b"\n\n") + s.flush_lines()
    assert sum(e.text.count("x") for e in out if e.final) == 10 * 1024


@pytest.mark.parametrize("text, redraws, final", [
    # a tqdm bar the next line was glued to where its carriage return was lost in a paste
    ("  0%|          | 0/23 [00:00<?, ?it/s][2025-03-03 18:46:44 TP3] Capture cuda graph begin.",
     ["  0%|          | 0/23 [00:00<?, ?it/s]"], "[2025-03-03 18:46:44 TP3] Capture cuda graph begin."),
    ("Loading: 50%|█████     | 1/2 [00:01<00:01,  1.20s/it]", [],
     "Loading: 50%|█████     | 1/2 [00:01<00:01,  1.20s/it]"),
    ("a\rb |##| 3/4 [00:01<00:00, 2.0it/s]next", ["a", "b |##| 3/4 [00:01<00:00, 2.0it/s]"], "next"),
    ("x < y [00:00<?] plain", [], "x < y [00:00<?] plain"),
])
def test_a_progress_bar_glued_to_the_next_line_is_a_redraw(text: str, redraws: list[str], final: str) -> None:
    assert logtext.split_redraws(text) == (redraws, final)
    events = LineSplitter().feed_text(text + "\n")
    assert [e.text for e in events if e.final] == [final]
