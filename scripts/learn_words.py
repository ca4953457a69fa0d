"""Learn the engines' word table (firstlight/engines/words.json) from the labelled real logs of the corpus's dev
half (tests/fixtures/corpus/INDEX.tsv; the held half is never read). Deterministic; run it after the corpus
changes:

    .venv/bin/python scripts/learn_words.py          # rewrite firstlight/engines/words.json
    .venv/bin/python scripts/learn_words.py --check  # exit 1 when the table is not what the corpus teaches

For each word printed in at least MIN_LOGS dev logs, and each engine: the log-odds that a log printing the word is
that engine's rather than another's, (df_e + s) / (n_e + 2 s) against (df_rest + s) / (n_rest + 2 s), bounded
by CAP (firstlight/engines/words.py says why each constant is what it is). A word no engine's weight moves by
PRUNE is left out.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from firstlight.engines.detect import detected_text  # noqa: E402
from firstlight.engines.words import CAP, MIN_LOGS, SMOOTHING, words_of  # noqa: E402
from firstlight.logreplay import READ_CHUNK  # noqa: E402
from firstlight.logtext import read_lines  # noqa: E402

CORPUS = REPO / "tests" / "fixtures" / "corpus"
TABLE = REPO / "firstlight" / "engines" / "words.json"
PRUNE = 0.25  # a word whose every weight is smaller says next to nothing: left out of the table


def dev_logs(corpus: Path = CORPUS, exclude: Iterable[str] = ()) -> list[tuple[str, set[str]]]:
    """(engine label, distinct words) of each dev log, in file order; ``exclude``: file names left out."""
    skip = set(exclude)
    with (corpus / "INDEX.tsv").open(newline="", encoding="utf-8") as fh:
        rows = sorted(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE), key=lambda r: r["file"])
    out = []
    for row in rows:
        if row["half"] != "dev" or row["file"] in skip:
            continue
        words: set[str] = set()
        for event in read_lines(corpus / row["file"], READ_CHUNK):  # the lines as a replay reads them
            words |= words_of(detected_text(event.text))
        out.append((row["engine"], words))
    return out


def learn(logs: list[tuple[str, set[str]]]) -> dict[str, object]:
    engines = sorted({engine for engine, _ in logs})
    n = Counter(engine for engine, _ in logs)
    total = len(logs)
    df: dict[str, Counter[str]] = {}
    for engine, words in logs:
        for w in words:
            df.setdefault(w, Counter())[engine] += 1
    table: dict[str, list[float]] = {}
    for w in sorted(df):
        counts = df[w]
        if sum(counts.values()) < MIN_LOGS:
            continue
        weights = []
        for e in engines:
            rest = sum(counts.values()) - counts[e]
            p = (counts[e] + SMOOTHING) / (n[e] + 2 * SMOOTHING)
            q = (rest + SMOOTHING) / (total - n[e] + 2 * SMOOTHING)
            weights.append(round(max(-CAP, min(CAP, math.log(p / q))), 2))
        if max(abs(x) for x in weights) >= PRUNE:
            table[w] = weights
    return {"learned_from": f"tests/fixtures/corpus: the {total} dev logs (scripts/learn_words.py)",
            "engines": engines, "logs": [n[e] for e in engines], "words": table}


def render(data: dict[str, object]) -> str:
    """One word per line: a diff of the table reads as the words that changed."""
    head = {k: v for k, v in data.items() if k != "words"}
    words = data["words"]
    assert isinstance(words, dict)
    lines = [json.dumps(head)[:-1] + ', "words": {']
    lines += [f"{json.dumps(w)}: {json.dumps(ws)}," for w, ws in words.items()]
    if words:
        lines[-1] = lines[-1].rstrip(",")
    lines.append("}}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when words.json is not what the corpus teaches")
    args = ap.parse_args()
    text = render(learn(dev_logs()))
    if args.check:
        if TABLE.read_text(encoding="utf-8") != text:
            print(f"{TABLE.relative_to(REPO)} is not what the corpus teaches: run scripts/learn_words.py",
                  file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text, encoding="utf-8")
    print(f"{TABLE.relative_to(REPO)}: {len(text.splitlines()) - 2} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
