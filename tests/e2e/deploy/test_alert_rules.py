"""The alert rules (deploy/prometheus/firstlight-rules.yml) at the values the README states, run through
promtool with their real durations: NotServingAfterReady's `for` (1 m) and GroupMemberUnreachable's (60 s) fire
at exactly that long and not one evaluation before, the degraded alert at its 10th degraded evaluation of 30 s
(5 of the last 10 minutes), the slow-start factor (1.5) and the speculative-decoding drop factor (0.8) fire just
past the factor and not at it, the restart-loop and start-failed windows (15 m) hold an event 15 m and not 16 m.
Each value moved either way in a copy of the rules makes the edge tests fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.prometheus_rules import RULES, RULES_DIR, promtool

EDGES = RULES_DIR / "tests" / "firstlight-rules-edges.test.yml"
DAY = RULES_DIR / "tests" / "firstlight-rules-day.test.yml"  # the 1 d window, evaluated hourly

# (what the rules file says, a moved value): each must make the edge tests fail
MOVED = [
    ("for: 1m", "for: 30s"), ("for: 1m", "for: 90s"), ("for: 1m", "for: 2m"),
    ("for: 60s", "for: 30s"), ("for: 60s", "for: 90s"),
    ("[10m:30s]) >= 10)", "[10m:30s]) >= 9)"), ("[10m:30s]) >= 10)", "[10m:30s]) >= 11)"),
    ("vector(1.5)", "vector(1.49)"), ("vector(1.5)", "vector(1.51)"),
    ("vector(0.8)", "vector(0.79)"), ("vector(0.8)", "vector(0.81)"),
    ('{verdict!="interrupted"}[15m]', '{verdict!="interrupted"}[14m]'),
    ('{verdict!="interrupted"}[15m]', '{verdict!="interrupted"}[16m]'),
    ('{verdict="failed"}[15m]', '{verdict="failed"}[14m]'),
    ('{verdict="failed"}[15m]', '{verdict="failed"}[16m]'),
]


def test_the_alerts_fire_at_their_stated_durations_and_factors_exactly():
    p = promtool("test", "rules", str(EDGES.relative_to(RULES_DIR)), str(DAY.relative_to(RULES_DIR)))
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("stated, moved", MOVED, ids=[f"{a}->{b}" for a, b in MOVED])
def test_the_edge_tests_fail_when_a_stated_value_moves(tmp_path: Path, stated: str, moved: str):
    text = RULES.read_text()
    assert text.count(stated) == 1, stated
    (tmp_path / "tests").mkdir()
    shutil.copy(EDGES, tmp_path / "tests" / EDGES.name)
    (tmp_path / RULES.name).write_text(text.replace(stated, moved))
    p = promtool("test", "rules", f"tests/{EDGES.name}", cwd=tmp_path)
    assert p.returncode != 0, f"the edge tests pass with {stated!r} moved to {moved!r}"
