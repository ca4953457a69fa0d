"""A replay's memory is bounded, not proportional to the log (firstlight.logreplay): measured under tracemalloc,
which costs about a minute of CPU on the 2-core machine, so it runs with the slow tests."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

from firstlight.logreplay import replay_log
from tests.support.common import FIXTURES as _FIXTURES

FIXTURES = _FIXTURES / "engines"


def _write_big_log(path: Path, target: int) -> None:
    head = (FIXTURES / "vllm-v1-ready.log").read_bytes()
    ready_at = head.index(b"(APIServer pid=4120) INFO:     Application startup complete.")
    body = [
        b"(APIServer pid=4120) INFO 07-21 09:10:00 [loggers.py:118] Engine 000: Avg prompt throughput: 10.2 "
        b"tokens/s"
        b", Avg generation throughput: 98.1 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: "
        b"1.2%\n",
        b'(APIServer pid=4120) INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
        b"Processed prompts:  40%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88      | 4/10 "
        b"[00:01<00:02]\r"
        b"Processed prompts: 100%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88 | "
        b"10/10\n",
        b"\x1b[33mWARNING 07-21 09:10:00 [x.py:1] noisy \xff line\x1b[0m\n",
    ]
    block = b"".join(body) * 200
    with path.open("wb") as fh:
        fh.write(head[:ready_at])
        written = ready_at
        while written < target:
            fh.write(block)
            written += len(block)
        fh.write(head[ready_at:])


def _replay_peak(log: Path) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        rep = replay_log(log)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return rep, peak


def test_replay_memory_does_not_grow_with_the_logs_length(tmp_path: Path) -> None:
    """A replay's memory is bounded, not proportional to the log: 3 MB more log (about 26,000 more lines) add
    less than a third of that to the peak. (A 20 MB log took 60 s of CPU under tracemalloc, over pytest's
    timeout on a loaded machine; the growth between two sizes is what bounded means.)"""
    small, large = tmp_path / "small.log", tmp_path / "large.log"
    _write_big_log(small, 1_000_000)
    _write_big_log(large, 4_000_000)
    grown = large.stat().st_size - small.stat().st_size
    assert grown >= 3_000_000
    rep_small, peak_small = _replay_peak(small)
    rep, peak = _replay_peak(large)
    assert rep.engine == "vllm" and rep.outcome == "ready" and rep_small.outcome == "ready"
    assert rep.lines > rep_small.lines + 20_000
    assert peak - peak_small < grown / 3, f"peak {peak_small / 1e6:.2f} MB -> {peak / 1e6:.2f} MB"
    assert peak < 16 * 1024 * 1024, f"peak traced memory {peak / 1e6:.1f} MB"
