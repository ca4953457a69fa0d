"""Time to ``hung`` with and without phase budgets learned from a deployment's history. Run by hand:

    .venv/bin/python bench/bench_budgets.py [--history 5]

In process, through the same driver and judge the live session uses (assessed every second, as live): --history
good starts of a synthetic SGLang-like deployment (tests/support/budgets.py: each phase at its usual seconds,
+/- 15 %) are judged and their anatomies learned from; then (1) each of those good starts is replayed through the
judge with the budgets (a false ``hung`` fails the run), and (2) a hang is injected in each phase (frozen: nothing
moves; spinning: one core busy, nothing else; silent: a trickle of CPU and reads below the progress thresholds) and
the seconds from the phase's start to ``hung`` are printed with the fixed clocks only (stall 120 s, spin 900 s) and
with the learned budgets, with the median ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.budgets import learn  # noqa: E402
from firstlight.timeline import LogLine  # noqa: E402
from tests.support.budgets import HANGS, PHASES, T0, USUAL, history_of, judged, start  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=int, default=5, help="good starts learned from (default 5)")
    args = ap.parse_args()
    hist = history_of(args.history)
    budgets = learn(hist, hist[0][0])
    false_hung = 0
    for i in range(args.history):
        f = 1 + 0.15 * ((i % 3) - 1)
        _, a = judged(start({k: v * f for k, v in USUAL.items()}, t0=T0 + 1e6 + 1e4 * i), budgets=budgets)
        false_hung += a.verdict != "ready"
    print(f"good starts replayed with their budgets: {args.history}, not READY: {false_hung}")
    print(f"{'phase':<18} {'hang':<9} {'fixed clocks':>12} {'learned':>9} {'ratio':>6}  budget")
    ratios: list[float] = []
    for name, line, _ in PHASES:
        b = budgets.get(name)
        for kind in HANGS:
            obs = start(hang=(name, kind))
            began = next(o.t for o in obs if isinstance(o, LogLine) and o.text == line)
            _, fixed = judged(obs)
            _, learned = judged(obs, budgets=budgets)
            tf, tl = fixed.t - began, learned.t - began
            ok = fixed.verdict == learned.verdict == "hung"
            ratio = tf / tl if ok and tl > 0 else float("nan")
            ratios.append(ratio)
            said = f"{b.budget_s:.0f} s (p95 {b.p95_s:.0f} s)" if b else "none"
            print(f"{name:<18} {kind:<9} {tf:>10.0f} s {tl:>7.0f} s {ratio:>5.1f}x  {said}"
                  + ("" if ok else f"  [{fixed.verdict}/{learned.verdict}]"))
    good = [r for r in ratios if r == r]
    spin = [r for r, (_, k) in zip(ratios, [(n, k) for n, _, _ in PHASES for k in HANGS], strict=True)
            if k == "spinning" and r == r]
    print(f"median ratio (fixed / learned): {statistics.median(good):.2f}x over {len(good)} injected hangs; "
          f"spinning hangs alone: {statistics.median(spin):.2f}x")
    return 1 if false_hung else 0


if __name__ == "__main__":
    sys.exit(main())
