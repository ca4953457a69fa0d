"""docs/development.md is a guide (how to set up, run the tests, hunt flakes and measure mutation, with the current
figures), not a log of runs; and no page of the project names the process that made it: the README, the docs,
the scripts and the package speak of the product."""

from __future__ import annotations

import re

from tests.support.common import REPO
from tests.support.docs import PAGES

GUIDE_LINES_MAX = 300
# "stop 47", "round 4", "issue 32", "eight engineers"; never a duration ("a stop 5 s later")
PROCESS = re.compile(r"\b(?:stop|round) \d+(?![\d.]| ?(?:s|ms|seconds?|minutes?)\b)|\bissue #?\d+"
                     r"|\b(?:eight|five|other) engineers\b", re.I)


def _pages() -> list[str]:
    files = [REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").glob("*.md"), *(REPO / "scripts").iterdir(),
             *(REPO / "firstlight").rglob("*.py")]
    return sorted(p.relative_to(REPO).as_posix() for p in files if p.is_file())


def test_the_development_guide_is_at_most_300_lines():
    assert len(PAGES["docs/development.md"].splitlines()) <= GUIDE_LINES_MAX


def test_the_development_guide_holds_the_guides_sections():
    guide = PAGES["docs/development.md"]
    for title in ("## Set-up, CI and test figures", "## Layout of the tests",
                  "## Mutation testing: `scripts/mutation.sh`", "## Flake hunt: `scripts/flake-hunt.sh`",
                  "## Real engines for the tests: set-up"):
        assert f"\n{title}\n" in guide, title
    assert re.search(r"^\| `judge` \| \d+(\.\d)? \|$", guide, re.M), "the mutation score of each rule module"


def test_no_page_names_the_process_that_made_it():
    named = {name: [m.group(0) for m in PROCESS.finditer((REPO / name).read_text(encoding="utf-8", errors="replace"))]
             for name in _pages()}
    assert {name: words for name, words in named.items() if words} == {}, "say what the product does, not when"


def test_the_process_check_can_fail():
    assert PROCESS.search("as at stop 47") and PROCESS.search("(issue 32)") and PROCESS.search("Round 4")
    assert not PROCESS.search("bench_readyz.py --rounds 7") and not PROCESS.search("a stop 5 s later")
