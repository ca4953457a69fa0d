"""The engines' learned word table (firstlight/engines/words.py) and the score of a log's words."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from types import ModuleType

import pytest

from firstlight.engines import PROFILES, words
from firstlight.engines.detect import EngineDetector
from firstlight.logreplay import replay_log
from tests.support.common import REPO

CORPUS = REPO / "tests" / "fixtures" / "corpus"


def _learner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("learn_words", REPO / "scripts" / "learn_words.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["learn_words"] = module
    spec.loader.exec_module(module)
    return module


LEARNER = _learner()


def _dev_rows() -> list[dict[str, str]]:
    with (CORPUS / "INDEX.tsv").open(newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE) if r["half"] == "dev"]


# -- the table: learned from the dev half, reproducibly ------------------------------------------------------
def test_the_shipped_table_is_what_the_dev_half_teaches() -> None:
    """words.json is scripts/learn_words.py's output over the corpus as it is: a corpus, a constant or the
    learner changed without relearning fails here."""
    shipped = (REPO / "firstlight" / "engines" / "words.json").read_text(encoding="utf-8")
    assert LEARNER.render(LEARNER.learn(LEARNER.dev_logs())) == shipped


def test_the_table_is_learned_from_the_dev_logs_only() -> None:
    """The held half is scored, never read: not for a rule, not for a word."""
    data = json.loads((REPO / "firstlight" / "engines" / "words.json").read_text(encoding="utf-8"))
    dev = _dev_rows()
    assert sum(data["logs"]) == len(dev) and f"the {len(dev)} dev logs" in data["learned_from"]
    assert [n for _, n in sorted({(r["engine"], 0) for r in dev})] and data["engines"] == sorted(
        {r["engine"] for r in dev})


def test_each_weight_is_bounded_and_each_word_seen_in_enough_logs() -> None:
    learned = LEARNER.learn(LEARNER.dev_logs())
    assert all(abs(w) <= words.CAP for ws in learned["words"].values() for w in ws)
    assert max(abs(w) for ws in learned["words"].values() for w in ws) == words.CAP
    rare = LEARNER.learn([("vllm", {"alpha", "beta"}), ("vllm", {"alpha"}), ("tgi", {"gamma"})])
    assert set(rare["words"]) == {"alpha"}  # beta and gamma: one log each, fewer than MIN_LOGS


def test_the_learned_weight_is_the_smoothed_log_odds() -> None:
    learned = LEARNER.learn([("vllm", {"alpha"}), ("vllm", {"alpha"}), ("tgi", {"alpha"}), ("tgi", set())])
    s = words.SMOOTHING
    import math
    expected = round(math.log(((2 + s) / (2 + 2 * s)) / ((1 + s) / (2 + 2 * s))), 2)
    assert learned["words"]["alpha"] == [-expected, expected]  # engines in name order: tgi, vllm


# -- one log's score -------------------------------------------------------------------------------------------
TABLE = {f"wrd{i}": {"vllm": 1.0, "tgi": 0.0, "generic": 0.0} for i in range(40)}
TABLE |= {f"gen{i}": {"vllm": 0.0, "tgi": 0.0, "generic": 1.0} for i in range(40)}


@pytest.fixture
def small_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(words, "table", lambda: TABLE)


def score_of(text: str) -> words.WordScore:
    s = words.WordScore(["vllm", "tgi"])
    s.feed(text)
    return s


def test_a_lead_of_the_margin_names_the_engine_and_less_does_not(small_table: None) -> None:
    lead = int(words.MARGIN)
    filler = " ".join(f"gen{i}" for i in range(20))  # generic words: known, each for generic alone
    named = score_of(filler + " " + " ".join(f"wrd{i}" for i in range(20 + lead)))
    assert named.scores["vllm"] - named.scores["generic"] == lead and named.best() == "vllm"
    short = score_of(filler + " " + " ".join(f"wrd{i}" for i in range(20 + lead - 1)))
    assert short.best() is None


def test_too_few_known_words_name_nothing_whatever_their_lead(small_table: None) -> None:
    few = score_of(" ".join(f"wrd{i}" for i in range(words.MIN_WORDS - 1)))
    assert few.scores["vllm"] >= words.MARGIN and few.best() is None
    enough = score_of(" ".join(f"wrd{i}" for i in range(words.MIN_WORDS)))
    assert enough.best() == "vllm"


def test_generic_leading_names_generic_and_a_word_counts_once(small_table: None) -> None:
    s = score_of(" ".join(f"gen{i}" for i in range(20)))
    assert s.best() == "generic"
    s.feed("gen0 gen1 gen2 GEN3")  # read before, whatever its case
    assert s.scores["generic"] == 20
    assert "generic +20.0 over" in s.lead() and "from 20 known words" in s.lead()


def test_an_engine_the_table_never_learned_has_no_score(small_table: None) -> None:
    s = words.WordScore(["vllm", "toy"])
    assert set(s.scores) == {"vllm", "generic"}  # generic is always weighed: its words argue for none


def test_a_lines_words_past_its_bound_are_not_read() -> None:
    n = words.MAX_LINE_CHARS
    assert words.words_of("x" * (n - 5) + " vllm") == {"x" * (n - 5), "vllm"}
    assert words.words_of("x" * (n - 3) + " vllm") == {"x" * (n - 3)}  # "vllm" past it but its "v"


# -- the detector: patterns first, then words ----------------------------------------------------------------
def test_a_pattern_outranks_the_words_and_says_so() -> None:
    d = EngineDetector(list(PROFILES.values()))
    d.feed("INFO 05-07 02:13:52 [loader.py:458] Loading weights took 0.10 seconds")
    d.feed("INFO 05-07 02:13:53 [gpu_worker.py:227] Available KV cache memory: 10.2 GiB")
    assert d.best() == "vllm" and not d.by_words
    assert d.evidence("vllm") == "engine detected from its log lines: vllm"


@pytest.mark.parametrize("log, engine", [
    # a TGI start under `docker logs --timestamps` whose launcher lines no pattern weighs enough
    # (https://github.com/huggingface/text-generation-inference/issues/2763)
    ("e-tgi-a40-docker-timestamps-args-block.log", "tgi"),
    # SGLang's per-rank lines, their timestamps turned into links by the tracker
    # (https://github.com/sgl-project/sglang/issues/13591)
    ("g-sglang-qwen3vl-tp2-tel-autolinked-timestamps.log", "sglang"),
])
def test_a_real_log_no_pattern_names_is_named_by_its_words(log: str, engine: str) -> None:
    d = EngineDetector(list(PROFILES.values()))
    for line in (CORPUS / log).read_text(encoding="utf-8").splitlines():
        d.feed(line)
    assert d.best() == engine and d.by_words
    assert d.evidence(engine).startswith(f"engine named by its log's words, no line a profile knows: {engine} (")
    assert replay_log(CORPUS / log).engine == engine


def test_a_words_unknown_to_the_table_are_passed_over_not_stopped_at(small_table: None) -> None:
    s = score_of(" ".join([*(f"unknown{i}" for i in range(50)), *(f"wrd{i}" for i in range(20))]))
    assert s.scores["vllm"] == 20 and "from 20 known words" in s.lead()


def test_one_engine_against_generic_is_enough_to_weigh(small_table: None) -> None:
    s = words.WordScore(["vllm"])
    s.feed(" ".join(f"wrd{i}" for i in range(20)))
    assert set(s.scores) == {"vllm", "generic"} and s.best() == "vllm"
