"""The anatomy against the real llama-server: its model evicted from the page cache (checked with
cachestat/mincore before the start), then warm; the anatomy names the page-cache state of each start, and the warm
start is compared with the cold one from the history. ``preflight --disk`` measures the device first and the cold
start's weights are judged against that figure.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from firstlight.anatomy import RESIDENT_WARM
from firstlight.preflight.pagecache import cached_bytes
from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight
from tests.support.llama_server import FAST, llama, server_cmd  # noqa: F401  (llama: the fixture)
from tests.support.slow_disk import evict

pytestmark = pytest.mark.llama


def test_cold_and_warm_page_cache_starts_are_named_and_compared(llama: dict[str, str], tmp_path: Path):  # noqa: F811
    model = tmp_path / "model.gguf"  # a private copy: another test's server may hold the cached one mapped
    shutil.copyfile(llama["model"], model)
    size = model.stat().st_size
    history = tmp_path / "history.db"
    evict(model)
    d = run_firstlight("preflight", "--disk", "--json", "--model", str(model), "--history", str(history))
    assert d.rc == 0, d.stderr
    assert "MB/s sequential" in d.stderr and cached_bytes(model) == 0  # measured, and evicted again

    port = free_port()  # one deployment (the port is part of its command): the warm start's baseline is the cold one
    cold = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), *FAST, "--",
                          *server_cmd(llama, port, model=str(model)), timeout=300)
    assert cold.rc == 0, cold.stderr[-3000:]
    a = cold.summary["anatomy"]
    # only what the preflight's checks read (the GGUF header and vocabulary: 8.5 % of this model when they run
    # alone, 16.9 % once on a loaded machine) is resident at start: far from the 90 % of a warm start
    assert a["cache"]["page_cache_resident"] <= 0.25 and a["cache"]["device_rate"] > 0, a["cache"]
    w = next(p for p in a["phases"] if p["name"] == "weights_loading")
    assert w["bound"] not in ("page_cache", "idle", "unmeasured"), w
    assert "anatomy" in cold.stderr and "weights_loading" in cold.stderr

    with open(model, "rb") as f:  # warm: the whole file in the page cache
        while f.read(8 << 20):
            pass
    assert cached_bytes(model) == size
    warm = run_firstlight("up", "--json", "--stop-when-ready", "--history", str(history), *FAST, "--",
                          *server_cmd(llama, port, model=str(model)), timeout=300)
    assert warm.rc == 0, warm.stderr[-3000:]
    b = warm.summary["anatomy"]
    # the whole file was resident a moment before; on a busy machine the kernel may reclaim some pages before the
    # start is sampled (CI saw 99 %, and 97.8 % beside other test runs): the rule's bound, a warm start's 90 %, is
    # what holds, and every view must name the same measured share, not a literal 100 %
    assert b["cache"]["page_cache_resident"] >= RESIDENT_WARM, b["cache"]
    warm_share = f"{b['cache']['page_cache_resident']:.0%}"
    wb = next(p for p in b["phases"] if p["name"] == "weights_loading")
    assert wb["bound"] == "page_cache" and f"{warm_share} of the weights resident" in wb["evidence"][0]["value"], wb
    vs = b["vs_baseline"]
    assert vs["run"] == cold.summary["history_run"]
    weights = next(x for x in vs["phases"] if x["phase"] == "weights_loading")
    why = rf"{warm_share} of the weights resident at start vs \d{{1,2}}%"  # the cold start's share: up to 25 %
    assert re.search(why, weights["why"]), weights
    assert "vs baseline" in warm.stderr
    # the history keeps both: its listing's columns, and `explain --last`
    h = run_firstlight("history", "--history", str(history))
    assert h.rc == 0 and f"page_cache {warm_share}" in h.stdout, h.stdout
    assert re.search(rf"{w['bound']} +\d{{1,2}}%", h.stdout), h.stdout
    e = run_firstlight("explain", "--last", "--history", str(history))
    assert e.rc == 0 and "page_cache" in e.stderr and "vs baseline run" in e.stderr, e.stderr
