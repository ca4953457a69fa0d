"""The journal source: how soon a line appended to a journal reaches firstlight, and what replaying a unit's
journal costs next to replaying the log file. Run by hand (needs systemd-journal-remote and journalctl):

    .venv/bin/python bench/bench_journal.py [--rounds 20] [--runs 5]

1. Follow delay: a JournalFollower runs ``journalctl -f`` on a journal file; each round appends one entry with
   a systemd-journal-remote run and measures (a) that run's own time (process start included), (b) the time
   from the start of that run to the entry reaching the subscriber (journalctl's inotify wake-up, its JSON,
   our parsing). Medians over --rounds.
2. Replay: the longest real log in ../shared/logs (2442 lines), as a file (``replay_log``) and as the last of
   two invocations in a journal file (``replay --unit --journal-file``: two journalctl passes, then the same
   replay). Median wall time over --runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.logreplay import replay_lines, replay_log  # noqa: E402
from firstlight.units.journal.follow import JournalFollower  # noqa: E402
from firstlight.units.journal.invocations import journal_lines  # noqa: E402
from tests.support.journal_export import UnitRun, write_journal  # noqa: E402

UNIT = "llm.service"
LOG = REPO.parent / "shared" / "logs" / "sglang-rocm-qwen35-27b-ready-long.log"


def follow_delay(work: Path, rounds: int) -> tuple[float, float]:
    path = work / "follow.journal"
    seed = UnitRun(UNIT, time.time())
    seed.line("seed")
    write_journal(path, bytes(seed.out))
    follower = JournalFollower(UNIT, path)
    follower.start()
    arrived = threading.Event()
    at: list[float] = []

    def on_entry(e: object) -> None:
        at.append(time.perf_counter())
        arrived.set()

    follower.subscribe(seed.invocation, on_entry)
    arrived.wait(30)
    writes, delays = [], []
    try:
        for i in range(rounds):
            arrived.clear()
            run = UnitRun(UNIT, time.time(), invocation=seed.invocation)
            run.line(f"round {i}")
            t0 = time.perf_counter()
            write_journal(path, bytes(run.out))
            t1 = time.perf_counter()
            if not arrived.wait(30):
                raise SystemExit(f"round {i}: the entry never arrived")
            writes.append(t1 - t0)
            delays.append(at[-1] - t0)
    finally:
        follower.stop()
    return statistics.median(writes), statistics.median(delays)


def replay_times(work: Path, runs: int) -> tuple[float, float]:
    first = UnitRun(UNIT, 1_790_000_000.0)
    first.lines([b"starting", b"error: boom"])
    last = UnitRun(UNIT, 1_790_003_600.0)
    data = LOG.read_bytes()
    last.lines(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"))
    path = work / "replay.journal"
    write_journal(path, bytes(first.out + last.out))
    as_file, as_journal = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        a = replay_log(LOG)
        t1 = time.perf_counter()
        _, _, pairs = journal_lines(path, UNIT)
        b = replay_lines(text for _, text in pairs)
        t2 = time.perf_counter()
        assert a.to_dict() == b.to_dict()
        as_file.append(t1 - t0)
        as_journal.append(t2 - t1)
    return statistics.median(as_file), statistics.median(as_journal)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        write_s, delay_s = follow_delay(work, args.rounds)
        print(f"follow: an appended entry reached the subscriber {delay_s * 1e3:.1f} ms after the append began; "
              f"the systemd-journal-remote run took {write_s * 1e3:.1f} ms (medians of {args.rounds})")
        f, j = replay_times(work, args.runs)
        print(f"replay of {LOG.name}: log file {f:.3f} s, journal (--unit --journal-file) {j:.3f} s "
              f"({j / f:.2f}x; medians of {args.runs}; same report)")


if __name__ == "__main__":
    main()
