"""No stop signal is lost, and stderr nobody reads never blocks the run (issue 20).

- A real SIGTERM delivered the moment the READY probe's result is queued (the race the field saw: the judge,
  READY already final, ignored it and firstlight supervised on until a second SIGTERM).
- stderr into a real pipe that nobody reads and that is already full: the verdict, ``/readyz`` and a stop
  signal do not wait for it, and what was dropped is counted.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_signals.py``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from firstlight.runner.output import BoundedOutput
from tests.support.hostile_signals import _full_pipe

CHECK_S = 60  # far above the rule's seconds: reached only when the defect is back


def test_a_bounded_output_drops_and_counts_while_its_reader_stalls_and_says_so_after(tmp_path: Path):
    r, w = _full_pipe()
    raw = os.fdopen(w, "w")
    out = BoundedOutput(raw, limit=4096)
    t0 = time.monotonic()
    for i in range(1000):
        out.write(f"line {i} " + "y" * 100 + "\n")  # never blocks: the pipe is full
    assert time.monotonic() - t0 < CHECK_S
    assert out.dropped_writes > 900 and out.dropped_lines == out.dropped_writes
    got = bytearray()
    reader = threading.Thread(target=lambda: got.extend(_read_all(r)), daemon=True)
    reader.start()
    assert out.drain(CHECK_S)  # the reader reads again: what was kept is out
    out.write("after\n")
    out.say_dropped()
    assert out.drain(CHECK_S)
    raw.close()
    reader.join(CHECK_S)
    text = got.decode(errors="replace")
    assert f"{out.dropped_lines} lines" in text and "were dropped" in text and "after" in text


def _read_all(fd: int) -> bytes:
    chunks = []
    while data := os.read(fd, 65536):
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks)
