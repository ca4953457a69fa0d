"""The anatomy of a start (firstlight.anatomy): each phase's time and bound, with its numbers.

Pure cases feed a Judge the observations a start would produce (the same path as live and replay); the live cases
run `firstlight up` against the simulated server with injected phase durations and a reader throttled to a known
rate (a fixture: the real engines' cases are in test_anatomy_llama.py and test_vllm_server.py).

The process-starting tests of this subject; the others: ``tests/unit/anatomy/test_anatomy.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from firstlight.history import History
from firstlight.preflight.pagecache import cached_bytes
from firstlight.result import summary_schema
from firstlight.sim.fixtures import free_port
from tests.support.anatomy import (
    _phase,
    weights,  # noqa: F401 (a fixture)
)
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import require, run_firstlight, sim_cmd
from tests.support.slow_disk import Throttle, evict, why_no_throttle

# -- live: `firstlight up` against the simulated server -----------------------------------------------------
LOAD_S = 4.0


def _live(scenario: str, weights: Path, record: Path) -> dict[str, Any]:  # noqa: F811
    evict(weights)  # cold: the throttled reader, not the page cache, sets the pace
    r = run_firstlight("up", "--json", "--stop-when-ready", "--no-history", "--record", str(record),
                       "--poll-min", "0.05", "--sample-interval", "0.2", "--",
                       *sim_cmd(scenario, free_port(), "--dialect", "vllm", "--model-path", str(weights),
                                "--load-seconds", str(LOAD_S)), timeout=180)
    assert r.rc == 0, r.stderr[-3000:]
    assert "anatomy" in r.stderr and "weights_loading" in r.stderr  # the human block at READY
    jsonschema.validate(r.summary, summary_schema(), cls=jsonschema.Draft202012Validator)  # a real run's summary
    anat: dict[str, Any] = r.summary["anatomy"]
    return anat


@pytest.mark.parametrize(("scenario", "weights_bound"), [("anatomy_disk", "disk"), ("anatomy_cpu", "loader_cpu")])
def test_live_phases_are_attributed_within_5_percent_and_bound_right(scenario: str, weights_bound: str,
                                                                     weights: Path, tmp_path: Path):  # noqa: F811
    anat = _live(scenario, weights, tmp_path / "run.jsonl")
    idle, w, kv = (_phase(anat, n) for n in ("distributed_init", "weights_loading", "kv_cache"))
    assert idle["seconds"] == pytest.approx(3.0, rel=0.05) and idle["bound"] == "idle", idle
    assert w["seconds"] == pytest.approx(LOAD_S, rel=0.05) and w["bound"] == weights_bound, w
    assert w["read_rate"] == pytest.approx(200e6 / LOAD_S, rel=0.15)
    assert kv["seconds"] == pytest.approx(2.0, rel=0.05) and kv["bound"] == "cpu", kv
    # the recorded timeline explains the same start the same way (one function over the same observations)
    e = run_firstlight("explain", "--json", str(tmp_path / "run.jsonl"))
    assert e.rc == 0, e.stderr
    again = {p["name"]: p for p in json.loads(e.stdout)["phases"]}
    assert again["weights_loading"]["bound"] == weights_bound
    assert again["weights_loading"]["seconds"] == pytest.approx(w["seconds"], abs=0.01)


def test_real_vllm_logs_say_miss_on_the_cold_and_on_the_failed_warm_load():
    """vLLM 0.32's own AOT lines (tests/fixtures/engines: real logs): the cold start saved a compiled function, the
    'warm' one failed to load it and compiled again; both are misses, with vLLM's own figure."""
    fixtures = _FIXTURES / "engines"
    for name, seconds in (("vllm-0.32-ready-cold.log", 79.21), ("vllm-0.32-ready-warm.log", 184.91)):
        r = run_firstlight("explain", "--json", str(fixtures / name))
        assert r.rc == 0, r.stderr
        anat = json.loads(r.stdout)
        c = _phase(anat, "compile")
        assert c["compile"]["cache"] == "miss" and c["compile"]["engine_seconds"] == seconds, c
        assert "idle" not in {p["bound"] for p in anat["phases"]}  # a log alone never says idle
        assert "compile cache miss" in r.stderr


def test_preflight_disk_with_too_little_uncached_data_is_one_line_and_exit_1(tmp_path: Path):
    (tmp_path / "m.gguf").write_bytes(b"x" * 4096)
    r = run_firstlight("preflight", "--disk", "--model", str(tmp_path / "m.gguf"), "--history",
                       str(tmp_path / "h.db"))
    assert r.rc == 1 and "too little uncached data" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    u = run_firstlight("preflight", "--disk", "--history", str(tmp_path / "h.db"))
    assert u.rc == 64 and "--disk needs the weights' local path" in u.stderr


def test_preflight_disk_measures_reads_and_evicts_what_it_read(tmp_path: Path):
    f = tmp_path / "big.bin"
    with open(f, "wb") as fh:
        for _ in range(8):
            fh.write(os.urandom(8 << 20))
        fh.flush()
        os.fsync(fh.fileno())
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    assert cached_bytes(f) == 0
    r = run_firstlight("preflight", "--disk", "--json", "--model", str(f), "--history", str(tmp_path / "h.db"))
    assert r.rc == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["event"] == "disk" and got["bytes"] == 64 << 20 and got["rate"] > 0 and got["fstype"]
    assert cached_bytes(f) == 0  # evicted: the measurement leaves the page cache as it found it
    with History(tmp_path / "h.db") as h:
        assert h.disk(got["device"])["rate"] == got["rate"]  # type: ignore[index]


def test_preflight_disk_on_a_slow_disk_leaves_no_read_ahead_behind(tmp_path: Path):
    """Cut off by its 5 s bound mid-file on a slow disk (the kernel's block throttle, 16 MB/s), the measurement
    still leaves nothing of the file in the page cache: the read-ahead past the bytes it read, some of it still in
    flight when it ends, is dropped too, or the next start reads as partly warm."""
    require(why_no_throttle(tmp_path) is None, f"a block throttle on the disk under {tmp_path} "
            f"({why_no_throttle(tmp_path)})")
    f = tmp_path / "big.bin"
    with open(f, "wb") as fh:
        for _ in range(24):
            fh.write(os.urandom(8 << 20))
    assert evict(f) == 0
    with Throttle(tmp_path, 16_000_000) as slow:
        r = run_firstlight("preflight", "--disk", "--json", "--model", str(f), "--history", str(tmp_path / "h.db"),
                           preexec_fn=slow.enter)
    assert r.rc == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["bytes"] < 192 << 20  # cut off mid-file by the time bound
    assert cached_bytes(f) == 0


def test_a_failed_start_says_how_far_each_phase_got(weights: Path):  # noqa: F811
    r = run_firstlight("up", "--json", "--no-history", "--poll-min", "0.05", "--sample-interval", "0.2", "--",
                       *sim_cmd("crash_oom", free_port(), "--model-path", str(weights), "--load-seconds", "1"),
                       timeout=180)
    assert r.rc == 1, r.stderr[-3000:]
    jsonschema.validate(r.summary, summary_schema(), cls=jsonschema.Draft202012Validator)  # a failed run's summary
    anat = r.summary["anatomy"]
    assert anat["reached"] == r.summary["phase"] and anat["phases"][-1]["name"] == r.summary["phase"]
    assert f"anatomy (reached {anat['reached']}; how far each phase got)" in r.stderr
    assert _phase(anat, "weights_loading")["read_bytes"] > 0


def test_explain_of_a_file_that_is_not_a_startup_log_says_there_is_no_anatomy(tmp_path: Path):
    """Exit 1 'the source holds none', as the help says: a file in which replay recognises no phase and no end."""
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\neggs\nmilk\n")
    r = run_firstlight("explain", str(notes))
    assert r.rc == 1 and "no anatomy in it" in r.stderr, (r.rc, r.stderr)
    # a log that ended in a failure before any phase marker still has one: how far it got
    crash = tmp_path / "crash.log"
    crash.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    c = run_firstlight("explain", "--json", str(crash))
    assert c.rc == 0, c.stderr
