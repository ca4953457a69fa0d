"""The log reader's accuracy on a real corpus: ``firstlight replay``'s engine, outcome, phase and failure against
the labels of tests/fixtures/corpus/INDEX.tsv (real startup logs pasted into public issue threads, each labelled
from its text alone). Run by hand:

    .venv/bin/python bench/bench_corpus.py                 # both halves and all, then the dev logs' misses
    .venv/bin/python bench/bench_corpus.py --half held     # one half only (dev, held or all)
    .venv/bin/python bench/bench_corpus.py --json          # the same as one JSON object
    .venv/bin/python bench/bench_corpus.py --list-held     # the held logs' misses too: once they are scored

For each half (``dev``: the logs the reader's rules are tuned on; ``held``: the logs only scored) and for the
whole corpus: the share of logs whose engine, outcome, phase and failure are each right, and of those with all
four right; then every miss of the dev logs as file, field, expected, got (the held logs' only with
``--list-held``: read, they would be tuned on). A label with ``|`` (``kv_cache|warmup``) is right
whichever of its words the reader says. Deterministic: no timing, no randomness, the logs in name order.
``tests/unit/engines/test_corpus.py`` checks that the figures the docs quote are the ones this computes.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.logreplay import replay_log  # noqa: E402

CORPUS = REPO / "tests" / "fixtures" / "corpus"
FIELDS = ("engine", "outcome", "phase", "failure")
HALVES = ("dev", "held")


def rows(corpus: Path = CORPUS) -> list[dict[str, str]]:
    """The index's rows, in file name order (tab-separated, no quoting: a label's text may hold quotes)."""
    with (corpus / "INDEX.tsv").open(newline="", encoding="utf-8") as fh:
        return sorted(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE), key=lambda r: r["file"])


def right(expected: str, got: str) -> bool:
    return got in expected.split("|")


@dataclass
class Score:
    logs: int = 0
    right: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*FIELDS, "all"), 0))
    misses: list[dict[str, str]] = field(default_factory=list)

    def pct(self, what: str) -> float:
        return round(100.0 * self.right[what] / self.logs, 1) if self.logs else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"logs": self.logs, "right": dict(self.right),
                "percent": {k: self.pct(k) for k in self.right}, "misses": self.misses}


def score(half: str = "all", corpus: Path = CORPUS) -> dict[str, Score]:
    """Score per half (``dev``, ``held``) and for all the logs scored (``all``); ``half`` limits which are read."""
    out = {h: Score() for h in (*HALVES, "all") if half in ("all", h) or h == "all"}
    for row in rows(corpus):
        if half not in ("all", row["half"]):
            continue
        rep = replay_log(corpus / row["file"])
        got = {"engine": rep.engine, "outcome": rep.outcome, "phase": rep.phase, "failure": rep.failure}
        missed = [f for f in FIELDS if not right(row[f], got[f])]
        for key in (row["half"], "all"):
            s = out[key]
            s.logs += 1
            for f in FIELDS:
                s.right[f] += f not in missed
            s.right["all"] += not missed
        out["all"].misses += [{"file": row["file"], "half": row["half"], "field": f, "expected": row[f],
                               "got": got[f]} for f in missed]
    for h in HALVES:
        if h in out:
            out[h].misses = [m for m in out["all"].misses if m["half"] == h]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=[*HALVES, "all"], default="all")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument("--list-held", action="store_true",
                    help="list the held logs' misses too (once the held half has been scored: it then joins dev)")
    args = ap.parse_args()
    scores = score(args.half)
    if not args.list_held:  # a held miss read is a held log tuned on: its figures only, unless asked
        for s in scores.values():
            s.misses = [m for m in s.misses if m["half"] != "held"]
    if args.json:
        print(json.dumps({k: s.to_dict() for k, s in scores.items()}, indent=2))
        return
    print(f"{'half':<5} {'logs':>4}  " + "  ".join(f"{f:>8}" for f in (*FIELDS, "all four")))
    for name, s in scores.items():
        print(f"{name:<5} {s.logs:>4}  " + "  ".join(f"{s.pct(f):>7.1f}%" for f in (*FIELDS, "all")))
    misses = scores["all"].misses
    hidden = "" if args.list_held else " (the held logs' not listed: --list-held)"
    print(f"\n{len(misses)} misses{hidden}" + (":" if misses else ""))
    for m in misses:
        print(f"  {m['half']:<4} {m['file']}  {m['field']}: expected {m['expected']}, got {m['got']}")


if __name__ == "__main__":
    main()
