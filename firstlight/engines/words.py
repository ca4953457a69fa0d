"""An engine told from its words: the learned table (``words.json``) of how much each word a log prints says
for each engine, and the running score of one log's words.

The profiles' ``detect_patterns`` name an engine from lines someone wrote a rule for; a log with none of them
(a wrapper's lines, traceback frames alone, a fork's rewording) still speaks its engine's vocabulary: module and
function names, option names, its own nouns. The table is learned from the labelled real logs of
``tests/fixtures/corpus`` (its ``dev`` half only: the ``held`` half stays unread) by ``scripts/learn_words.py``:
for each word (a name of three or more letters, digits and underscores, lower-cased) printed in at least
``MIN_LOGS`` of them, the log-odds that a log printing it is one engine's rather than another's, each bounded by
``CAP`` so that no single word decides. A log's score for an engine is the sum over the distinct words it printed.
``generic`` (a server firstlight has no profile for) is learned as an engine too: its words argue against naming
any. Data, not rules: relearning the table from a larger corpus changes no code.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources

WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
MIN_LOGS = 2  # a word printed by one log only is that log's (a host, a model, a path), not an engine's
CAP = 2.0  # the most one word's log-odds adds or takes: a log needs several words for an engine
SMOOTHING = 0.1  # added to each count: a word never seen with an engine is unlikely there, not impossible
# the score lead of the best engine over the next (``generic`` included) that names it: measured on the corpus's
# earlier gatherings against the one after (docs/engines.md, "Words"), a lead of 5 was right most often
MARGIN = 5.0
MIN_WORDS = 12  # the known words a log must have printed before they name its engine: a line or two says too little
MAX_LINE_CHARS = 4096  # the words of a line past this are not read: bounded work per line, whatever its length


@functools.lru_cache(maxsize=1)
def table() -> dict[str, dict[str, float]]:
    """word -> {engine: bounded log-odds}, read once from the package's ``words.json``."""
    data = json.loads(resources.files(__package__).joinpath("words.json").read_text(encoding="utf-8"))
    engines: list[str] = data["engines"]
    return {word: dict(zip(engines, weights, strict=True)) for word, weights in data["words"].items()}


def words_of(line: str) -> set[str]:
    return {w.lower() for w in WORD_RE.findall(line[:MAX_LINE_CHARS])}


class WordScore:
    """One log's running score per engine, each known word counted once."""

    def __init__(self, engines: list[str]) -> None:
        self._table = table()
        self._seen: set[str] = set()
        learned = set(next(iter(self._table.values()), {}))
        # only the engines the table learned: one it never saw (a plugin's, the RPC server) has no words; and
        # ``generic``, a detector's fallback rather than a profile it weighs, whose words argue for none
        wanted = {*engines, "generic"}
        self.scores: dict[str, float] = {e: 0.0 for e in sorted(learned) if e in wanted}

    def feed(self, line: str) -> None:
        for word in words_of(line) - self._seen:
            weights = self._table.get(word)
            if weights is None:
                continue
            self._seen.add(word)
            for engine, w in weights.items():
                if engine in self.scores:
                    self.scores[engine] += w

    def lead(self) -> str:
        """The evidence for :meth:`best`: the two best scores and how many known words were read."""
        ranked = sorted(self.scores.items(), key=lambda kv: kv[1], reverse=True)[:2]
        pair = " over ".join(f"{name} {score:+.1f}" for name, score in ranked)
        return f"{pair} from {len(self._seen)} known words (a lead of {MARGIN:g} names one)"

    def best(self) -> str | None:
        """The engine the words name (``generic`` included): the best score by ``MARGIN`` over the next; ``None``
        while none leads so."""
        if len(self.scores) < 2 or len(self._seen) < MIN_WORDS:
            return None
        ranked = sorted(self.scores.items(), key=lambda kv: kv[1], reverse=True)
        (first, top), (_, second) = ranked[0], ranked[1]
        return first if top - second >= MARGIN else None


__all__ = ["CAP", "MARGIN", "MIN_LOGS", "SMOOTHING", "WORD_RE", "WordScore", "table", "words_of"]
