"""Hostile input, measured. Run by hand:

    .venv/bin/python bench/bench_hostile.py [--runs 5]

1. One long log line: the cost of judging one line of 8 KiB and of 1 MiB (every engine profile's
   classification plus the access-line test; median of --runs), and, for contrast, the single-regex access
   pattern firstlight used before (``METHOD /\\S*.*?STATUS``) on 8, 16 and 32 KiB lines (it is quadratic).
2. A log flood: a real process writes 100 MB of 100-byte lines as fast as it can into a PipeReader whose
   consumer takes every line; the writer's time (firstlight must not slow it) and the lines dropped.
3. A stuck preflight check: ``firstlight up`` whose checkpoint reader is stuck in a read that never returns
   (a real FIFO with a writer that never writes, as on a hung NFS mount); the time from SIGTERM to its exit.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
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
        reader = PipeReader(w.stdout, "stdout", backlog=q.qsize)  # type: ignore[arg-type]
        reader.start(q.put)
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


STUCK = """
import sys
import firstlight.preflight.checkpoint as c
fifo = sys.argv.pop(1)
c.open_regular = lambda path: open(fifo, "rb")
from firstlight.cli.app import main
main(sys.argv[1:])
"""


def stuck_preflight(runs: int) -> None:
    from firstlight.sim.fixtures import free_port, make_weights

    took = []
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "m"
        make_weights(model, 1 << 20, shards=2)
        for i in range(runs):
            fifo = Path(tmp) / f"hung-{i}"
            os.mkfifo(fifo)
            held: list[object] = []
            threading.Thread(target=lambda f=fifo, h=held: h.append(open(f, "wb")), daemon=True).start()  # noqa: SIM115
            port = free_port()
            p = subprocess.Popen([sys.executable, "-c", STUCK, str(fifo), "up", "--timeout", "600", "--",
                                  sys.executable, "-m", "firstlight.sim", "--port", str(port), "--model-path",
                                  str(model)],
                                 cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while not held and p.poll() is None and time.monotonic() < deadline:  # then stuck in its read
                time.sleep(0.01)
            if not held:
                raise SystemExit(f"the stuck check was not reached (exit {p.poll()})")
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=60)
            took.append(time.monotonic() - t0)
            for f in held:
                f.close()  # type: ignore[attr-defined]
            print(f"  run: exit {rc} {took[-1]:.3f} s after SIGTERM")
    print(f"SIGTERM during a stuck preflight check: up exits in {statistics.median(took):.3f} s "
          f"(median of {runs})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=["lines", "flood", "preflight"], default=None)
    args = ap.parse_args()
    for name, fn in (("lines", long_lines), ("flood", flood), ("preflight", stuck_preflight)):
        if args.only in (None, name):
            fn(args.runs)


if __name__ == "__main__":
    main()
