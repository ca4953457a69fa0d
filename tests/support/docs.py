"""The user documentation as the tests read it: the README (one screen: what firstlight is, install, the two
commands, a first start, a map) and the reference pages under ``docs/`` it links to."""

from __future__ import annotations

import re

from tests.support.common import REPO

README_LINES_MAX = 300
README = (REPO / "README.md").read_text(encoding="utf-8")
PAGES = {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md"))}
TEXT = "\n\n".join([README, *PAGES.values()])  # the README and every page, one after the other


def headings(text: str) -> list[tuple[int, str, int]]:
    """(level, title, offset) of each heading outside fenced code blocks."""
    out, fenced, at = [], False, 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6}) (.*)", line)):
            out.append((len(m.group(1)), m.group(2).strip(), at))
        at += len(line)
    return out


def section(title: str) -> str:
    """The section under the heading ``title`` (any level, in whichever page holds it), up to the next heading of
    its level or above. KeyError when no page has that heading."""
    for text in (README, *PAGES.values()):
        hs = headings(text)
        for i, (level, t, at) in enumerate(hs):
            if t == title:
                end = next((a for lv, _, a in hs[i + 1:] if lv <= level), len(text))
                return text[at:end]
    raise KeyError(title)
