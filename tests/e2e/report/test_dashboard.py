"""The live dashboard, drawn from a recorded run into a recording rich Console of a fixed size: checks of what
it must show (phase, percentage, ETA, GPU bars, levels, the last log line), no snapshots.

The process-starting tests of this subject; the others: ``tests/unit/report/test_dashboard.py``.
"""

from __future__ import annotations

from pathlib import Path

from firstlight.config import JudgeConfig
from firstlight.engines import get_profile
from firstlight.judge import Judge
from firstlight.report.dashboard import DashboardState
from firstlight.report.record import read_record
from firstlight.sim.fixtures import free_port
from firstlight.timeline import GpuDevice, GpuSample
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import run_firstlight, sim_cmd
from tests.support.dashboard import draw

GB = 1_000_000_000


def recorded_run(tmp_path: Path, weights: Path) -> Path:
    record = tmp_path / "run.jsonl"
    r = run_firstlight("up", "--json", "--stop-when-ready", "--record", str(record), "--engine", "sglang",
                       "--poll-min", "0.05", "--sample-interval", "0.2", "--quiet-server", "--no-history", "--",
                       *sim_cmd("normal", free_port()), "--model-path", str(weights), "--load-seconds", "3")
    assert r.rc == 0, r.stderr[-2000:]
    return record


def state_mid_load(record: Path) -> DashboardState:
    """Replay the record through the judge into the dashboard's state, as the session does, and stop while the
    weights are being read. The machine has no GPU: two devices' samples are added, as NVML would give them."""
    obs = read_record(record).observations
    judge = Judge(JudgeConfig(), get_profile("sglang"), obs[0].t)
    state = DashboardState()
    state.started({"started_at": obs[0].t, "engine": "sglang", "url": "http://127.0.0.1:8000", "pid": 4242})
    for o in obs:
        for ev in judge.feed(o):
            state.event(ev)
        state.observe(o)
        state.assessment = a = judge.assess(o.t)
        frac = a.progress.weights_fraction
        if frac is not None and 0.3 < frac < 0.95 and a.progress.eta_weights_s:
            break
    else:
        raise AssertionError("the record never showed weights half read")
    state.observe(GpuSample(o.t, (GpuDevice(0, "H100", 41 * GB, 80 * GB, 97.0), GpuDevice(1, "H100", 20 * GB, 80 * GB,
                                                                                        None))))
    return state


def test_dashboard_shows_phase_weights_percentage_eta_gpu_bars_levels_and_last_log(tmp_path: Path, weights: Path):
    state = state_mid_load(recorded_run(tmp_path, weights))
    a = state.assessment
    assert a is not None
    text = draw(state)
    lines = text.splitlines()
    assert len(lines) <= 30 and all(len(line) <= 100 for line in lines)
    phases = next(line for line in lines if line.startswith("phases"))
    assert phases.rstrip().endswith("…") and "weights_loading" in phases.split(">")[-1]
    weights = next(line for line in lines if line.startswith("weights"))
    assert f"{a.progress.weights_fraction * 100:.0f}%" in weights and "ETA" in weights and "━" in weights
    gpu0 = next(line for line in lines if line.startswith("GPU 0"))
    gpu1 = next(line for line in lines if line.startswith("GPU 1"))
    assert "41.0 GB / 80.0 GB" in gpu0 and "util 97%" in gpu0 and "━" in gpu0 and "util" not in gpu1
    assert any(line.startswith("tree") and "CPU" in line and "RSS" in line for line in lines)
    assert "✓ process" in text and "· generation" in text
    assert any(line.startswith("log") and "ago]" in line for line in lines)


def test_dashboard_fits_a_narrow_terminal(tmp_path: Path, weights: Path):
    state = state_mid_load(recorded_run(tmp_path, weights))
    lines = draw(state, width=60).splitlines()
    assert all(len(line) <= 60 for line in lines)
    assert any(line.startswith("weights") and "%" in line for line in lines)


def run_on_a_terminal(weights: Path, *opts: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``firstlight up`` with its stderr on a pseudo-terminal (as in a shell): what the terminal received."""
    import os
    import pty
    import subprocess
    import threading

    from tests.support.common import firstlight_cmd

    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    cmd = firstlight_cmd("up", "--stop-when-ready", "--quiet-server", "--no-history", "--engine", "sglang",
                         "--poll-min", "0.05", "--sample-interval", "0.2", *opts, "--",
                         *sim_cmd("normal", free_port()), "--model-path", str(weights), "--load-seconds", "2")
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL, timeout=120,
                           env={**os.environ, "COLUMNS": "100", "LINES": "30", "TERM": "xterm-256color",
                                **(env or {})})
    finally:
        os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    return p.returncode, b"".join(chunks).decode("utf-8", "replace")


def test_up_on_a_terminal_shows_the_dashboard_and_plain_lines_with_plain(weights: Path, tmp_path: Path):
    import json

    # No GPU here: the GPU sampler reads the recorded NVML snapshot of an 8-GPU node (tests/fixtures).
    data = json.loads((_FIXTURES / "nvml_8gpu_stale_process.json").read_text())
    for d in data["devices"]:
        d["processes"] = []
    snap = tmp_path / "nvml.json"
    snap.write_text(json.dumps(data))
    rc, shown = run_on_a_terminal(weights, env={"FIRSTLIGHT_NVML_SNAPSHOT": str(snap)})
    assert rc == 0
    assert "GPU 0" in shown and "GPU 7" in shown and "/ 102.6 GB" in shown  # a memory bar per device
    assert "weights_loading" in shown and "✓ port" in shown and "\x1b[" in shown  # the live part, drawn
    assert "workers)" in shown and " ago] " in shown  # the tree and the last line (--quiet-server: observed)
    assert "READY" in shown  # the verdict lines stay
    rc, plain = run_on_a_terminal(weights, "--plain")
    assert rc == 0 and "READY" in plain
    assert "✓ port" not in plain and "\x1b[" not in plain
