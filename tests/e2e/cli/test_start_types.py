"""Start types through `firstlight up` against the simulated server: a restored start is READY with the type
``restored`` (never ``hung``), and a warm page-cache start gets its ETA from earlier warm starts of the same
deployment, on any port (the history keys a deployment without its port).

The simulated server reads real weight files; the page cache is emptied with ``posix_fadvise(DONTNEED)``
(``tests/support/slow_disk.evict``) and filled by reading them. ``$FIRSTLIGHT_SIM_LOAD_SECONDS`` makes a cold start
slower without changing its command line (as a slower disk would).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from firstlight.history import History
from firstlight.preflight.pagecache import cached_bytes
from firstlight.sim.fixtures import free_port, make_weights
from tests.support.common import require, run_firstlight, sim_cmd
from tests.support.slow_disk import evict

COLD_S, WARM_S = "4", "0.3"  # seconds the simulated read of the weights takes, cold and warm


def _up(history: Path, weights: Path, port: int, load_s: str, scenario: str = "normal") -> dict[str, Any]:
    # --margin 10: what is under test is the ETA by start type; a 1.5 s start 20 % slower than the one before (any
    # busy machine) would be a `regression`, not a good start, and leave the ETA one start short (a hunt run:
    # from_types {'warm_page_cache': 1}).
    r = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), "--margin", "10", "--",
                       *sim_cmd(scenario, port, "--dialect", "vllm", "--model-path", str(weights)),
                       timeout=180, env={"FIRSTLIGHT_SIM_LOAD_SECONDS": load_s})
    assert r.rc == 0, r.stderr[-3000:]
    summary: dict[str, Any] = r.summary
    assert summary["verdict"] == "ready", summary.get("regression")
    summary["_stderr"] = r.stderr
    return summary


def _warm(weights: Path) -> None:
    for f in weights.iterdir():
        f.read_bytes()
    assert all(cached_bytes(f) == f.stat().st_size for f in weights.iterdir())


def test_a_silent_start_that_serves_quickly_is_ready_restored_and_the_stall_rules_say_why(tmp_path: Path):
    r = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(tmp_path / "h.db"), "--",
                       *sim_cmd("restored", free_port(), "--dialect", "vllm"), timeout=120)
    assert r.rc == 0, r.stderr[-3000:]
    s = r.summary
    assert s["verdict"] == "ready"
    assert s["start_type"]["type"] == "restored", s["start_type"]
    signals = {e["signal"] for e in s["evidence"]}
    assert {"phases", "ready", "stall_rules"} <= signals, s["evidence"]
    stall = next(e for e in s["evidence"] if e["signal"] == "stall_rules")
    assert "did not fire" in stall["value"] and "stall_timeout 120s" in stall["value"]
    assert "start type: restored" in r.stderr  # the console says it too
    with History(tmp_path / "h.db", readonly=True) as h:
        assert h.runs(limit=1)[0].start_type == "restored"
    e = run_firstlight("explain", "--last", "--history", str(tmp_path / "h.db"))
    assert e.rc == 0 and "start type: restored" in e.stderr, e.stderr


def test_a_warm_start_on_another_port_gets_its_eta_from_the_earlier_warm_starts(tmp_path: Path):
    weights = tmp_path / "w"
    make_weights(weights, 40_000_000)
    require(evict(weights) == 0, "a filesystem whose page cache posix_fadvise(DONTNEED) empties (not tmpfs)")
    history, port_a, port_b = tmp_path / "h.db", free_port(), free_port()
    cold = []
    for _ in range(2):
        assert evict(weights) == 0
        s = _up(history, weights, port_a, COLD_S)
        assert s["start_type"]["type"] == "cold", s["start_type"]
        cold.append(s["cold_start_s"])
    warm = []
    for _ in range(2):
        _warm(weights)
        s = _up(history, weights, port_a, WARM_S)
        assert s["start_type"]["type"] == "warm_page_cache", s["start_type"]
        warm.append(s["cold_start_s"])
    assert max(warm) < min(cold)  # the fixture: warm starts are the faster ones
    # on port B: the same deployment, and the ETA of a warm start is the median of the warm ones
    _warm(weights)
    s = _up(history, weights, port_b, WARM_S)
    assert s["start_type"]["type"] == "warm_page_cache"
    eta = s["eta"]
    assert eta["start_type"] == "warm_page_cache" and eta["from_types"] == {"warm_page_cache": 2}, eta
    assert eta["seconds"] == sorted(warm)[0] + (sorted(warm)[1] - sorted(warm)[0]) / 2
    assert eta["note"] == "ETA from 2 warm_page_cache starts"
    assert "ETA from 2 warm_page_cache starts" in s["_stderr"]
    # and a cold start on port B: from the cold ones
    assert evict(weights) == 0
    s = _up(history, weights, port_b, COLD_S)
    assert s["eta"]["from_types"] == {"cold": 2}, s["eta"]
    assert s["eta"]["seconds"] > max(warm)
    h = run_firstlight("history", "--history", str(history))
    assert h.rc == 0, h.stderr
    assert "cold" in h.stdout and "warm_page_cache" in h.stdout


def test_a_woken_start_is_named_by_vllms_wake_line(tmp_path: Path):
    r = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(tmp_path / "h.db"), "--",
                       *sim_cmd("woken", free_port(), "--dialect", "vllm"), timeout=120)
    assert r.rc == 0, r.stderr[-3000:]
    kind = r.summary["start_type"]
    assert kind["type"] == "woken" and "seconds to wake up tags" in kind["evidence"]["woken"][0]["value"], kind


def test_an_attached_start_is_named_by_its_command_and_gets_its_eta_from_attached_starts_only(tmp_path: Path):
    """vLLM ``--load-format ipc_cache``: weights from a weight-cache daemon. A cold start of the same deployment
    before it gives it no ETA: its own kind's starts do."""
    history, weights = tmp_path / "h.db", tmp_path / "w"
    make_weights(weights, 8_000_000)
    _up(history, weights, free_port(), COLD_S)  # a cold start of this model (another command: another deployment)

    def attached() -> dict[str, Any]:
        # --engine vllm: the command names the simulator, not vLLM; the engine's flags read --load-format
        r = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), "--margin", "10",
                           "--engine", "vllm", "--",
                           *sim_cmd("attached", free_port(), "--dialect", "vllm", "--model-path", str(weights),
                                    "--load-format", "ipc_cache"), timeout=180)
        assert r.rc == 0, r.stderr[-3000:]
        summary: dict[str, Any] = r.summary
        summary["_stderr"] = r.stderr
        return summary

    first = attached()
    assert first["start_type"]["labels"] == ["attached"], first["start_type"]
    assert first["start_type"]["evidence"]["attached"] == [
        {"signal": "command", "value": "--load-format ipc_cache", "since": None}]
    second = attached()
    assert second["start_type"]["type"] == "attached"
    assert second["eta"] is not None and second["eta"]["from_types"] == {"attached": 1}, second["eta"]
    assert "forecast: nothing to forecast from yet: no earlier attached start" in first["_stderr"]
    assert "forecast: about" in second["_stderr"] and "ETA from 1 attached start" in second["_stderr"]
