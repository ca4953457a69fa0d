"""`firstlight up` with a history file on the simulator: three good warm starts recorded, then the same deployment
spinning in one phase is named hung by its learned budget, long before the spin timeout, with the budget in its
evidence (docs/history.md, Phase budgets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from firstlight.sim.fixtures import free_port
from tests.support.common import pids_in_group, run_firstlight, sim_cmd

FAST = ["--poll-min", "0.05", "--sample-interval", "0.2"]


def _up(history: Path, weights: Path, port: int, env: dict[str, str] | None = None, timeout: float = 120):
    # --margin 10 (the most): a start of seconds on a busy machine may take half again its baseline, which would be
    # a `regression` (serving, exit 0), not `ready`; these tests are about the phase budgets
    return run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), "--margin", "10", *FAST, "--",
                          *sim_cmd("normal", port, "--model-path", str(weights)), env=env, timeout=timeout)


def _read_through(weights: Path) -> None:
    """Put the weights in the page cache: a busy machine may reclaim the clean pages of an earlier start's read
    before the next start measures them, and a warm start is this test's premise, not its subject."""
    for f in sorted(weights.iterdir()):
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                pass


def _base_type(r: Any) -> str | None:
    st = r.summary.get("start_type") or {}
    return str(st.get("type") or "").split("+")[0] or None


def test_a_spinning_start_is_hung_by_its_learned_budget_before_the_spin_timeout(tmp_path: Path, weights: Path):
    history = tmp_path / "h.sqlite3"
    port = free_port()
    for i in range(4):  # the first reads the weights cold; the three after it are the warm starts learned from
        if i:
            _read_through(weights)
        r = _up(history, weights, port)
        assert r.rc == 0 and r.summary["verdict"] == "ready", r.stderr[-3000:]
        assert any("quiet" in p for p in r.summary["anatomy"]["phases"])
        assert i == 0 or _base_type(r) == "warm_page_cache", r.summary.get("start_type")
    _read_through(weights)
    r = _up(history, weights, port, env={"FIRSTLIGHT_SIM_SPIN_AFTER": "kv_cache"}, timeout=240)
    s = r.summary
    assert r.rc == 2 and s["verdict"] == "hung", r.stderr[-3000:]
    assert s["phase"] == "kv_cache" and s["detail"] == "past its learned budget"
    assert s["elapsed_s"] < 900 / 5  # the spin clock (900 s) would have waited
    budget = s["evidence"][0]
    assert budget["signal"] == "budget" and "kv_cache has run" in budget["value"]
    assert "the 3 earlier warm_page_cache starts" in budget["value"] and "(budget " in budget["value"]
    assert s["progress"]["phase_budget"]["learned"] is True
    assert not pids_in_group(s["pid"])
