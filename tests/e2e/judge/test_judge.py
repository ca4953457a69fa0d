"""The judge replays recorded timelines: no clocks, no I/O, the same verdict every time.

The process-starting tests of this subject; the others: ``tests/unit/judge/test_judge.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from firstlight.drive import judge_timeline
from firstlight.engines import get_profile
from firstlight.timeline import (
    from_dict,
)
from tests.support.judge import RULES

SGLANG = get_profile("sglang")


def test_a_recorded_real_run_replays_to_its_verdict(tmp_path: Path):
    """--record writes the observations of a real run; replayed through a fresh judge they give its verdict."""
    import subprocess
    import sys

    from firstlight.sim.fixtures import free_port, make_weights

    model = tmp_path / "model"
    make_weights(model, 16 << 20)
    record = tmp_path / "run.jsonl"
    port = free_port()
    p = subprocess.run([sys.executable, "-m", "firstlight", "up", "--json", "--stop-when-ready", "--record",
                        str(record), "--engine", "sglang", "--poll-min", "0.05", "--", sys.executable, "-m",
                        "firstlight.sim", "--scenario", "normal", "--port", str(port), "--model-path", str(model)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    observations = [from_dict(json.loads(line)) for line in record.read_text().splitlines()]
    a = judge_timeline(observations, RULES, SGLANG, observations[-1].t)
    assert a.verdict == "ready" and a.phase == "ready"
    assert json.loads(p.stdout.splitlines()[-1])["phase"] == a.phase
