"""Hostile input, measured. Run by hand:

    .venv/bin/python bench/bench_hostile.py [--runs 5]

1. One long log line: the cost of judging one line of 8 KiB and of 1 MiB (every engine profile's
   classification plus the access-line test; median of --runs), and, for contrast, the single-regex access
   pattern firstlight used before (``METHOD /\\S*.*?STATUS``) on 8, 16 and 32 KiB lines (it is quadratic).
2. A log flood: a real process writes 100 MB of 100-byte lines as fast as it can into a PipeReader whose
   consumer takes every line; the writer's time (firstlight must not slow it) and the lines dropped.
"""

from __future__ import annotations

import argparse
import queue
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.engines import PROFILES  # noqa: E402
from firstlight.logtext import is_access_line  # noqa: E402
from firstlight.samplers.logs import PipeReader  # noqa: E402
from firstlight.timeline import Observation  # noqa: E402

OLD_ACCESS = re.compile(r"\b(?:GET|POST|HEAD|OPTIONS|PUT) /\S*.*?\b[1-5]\d\d\b")


def _median_s(fn: object, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def long_lines(runs: int) -> None:
    profiles = list(PROFILES.values())

    def judge_line(line: str) -> None:
        for p in profiles:
            p.classify(line)
        is_access_line(line)

    for size in (8 << 10, 1 << 20):
        line = "GET /" + "a" * size
        print(f"one {size >> 10:>5} KiB line through every profile + access test: "
              f"{_median_s(lambda line=line: judge_line(line), runs) * 1e3:8.2f} ms (median of {runs})")
    for size in (8 << 10, 16 << 10, 32 << 10):
        line = "GET /" + "a" * size
        print(f"old access pattern, {size >> 10:>2} KiB line: "
              f"{_median_s(lambda line=line: OLD_ACCESS.search(line), runs) * 1e3:8.1f} ms (median of {runs})")


FLOOD = """
import sys, time
chunk = (b"x" * 99 + b"\\n") * 25_000
t0 = time.monotonic()
for _ in range(40):
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()
sys.stderr.write(f"{time.monotonic() - t0:.3f}\\n")
"""


def flood(runs: int) -> None:
    alone, read = [], []
    for _ in range(runs):
        cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        p = subprocess.run([sys.executable, "-c", FLOOD], stdout=cat.stdin, stderr=subprocess.PIPE, text=True,
                           check=True)
        assert cat.stdin is not None
        cat.stdin.close()
        cat.wait()
        alone.append(float(p.stderr))
        q: queue.Queue[Observation] = queue.Queue()
        w = subprocess.Popen([sys.executable, "-c", FLOOD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert w.stdout is not None
        reader = PipeReader(w.stdout, "stdout", q.put, backlog=q.qsize)  # type: ignore[arg-type]
        reader.start()
        taken = 0
        while reader.thread.is_alive() or not q.empty():
            try:
                q.get(timeout=0.05)
                taken += 1
            except queue.Empty:
                pass
        _, err = w.communicate()
        read.append(float(err))
        print(f"  run: writer into cat {alone[-1]:.3f} s, into firstlight {read[-1]:.3f} s, "
              f"{reader.dropped_lines} lines dropped, {taken} observations taken")
    a, r = statistics.median(alone), statistics.median(read)
    print(f"100 MB flood: writer into cat {a:.3f} s, into firstlight's reader {r:.3f} s "
          f"(medians of {runs}; ratio {r / a:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    long_lines(args.runs)
    flood(args.runs)


if __name__ == "__main__":
    main()
