"""The README is for users: its first screen gets a new user to a first ``up``, its links lead somewhere, it says
why each dependency is there, and its map of the packages names what is in ``firstlight/``."""

from __future__ import annotations

import re

import pytest

from tests.support.common import REPO as _REPO

REPO = _REPO
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8") for p in (REPO / "docs").glob("*.md")}


def _headings(text: str) -> list[str]:
    """Headings outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            out.append(line.lstrip("#").strip())
    return out


def _anchors(text: str) -> set[str]:
    """GitHub's anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for title in _headings(text):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end != -1 else None]


def test_first_screen_is_what_it_is_install_first_command_and_what_the_output_means_then_the_reference():
    order = ["## Install", "## First start", "## What the output means", "## Two commands", "## Contents",
             "## Reference"]
    at = [README.index(f"\n{h}\n") for h in order]
    assert at == sorted(at), order
    first = README[: at[2]]
    assert "firstlight up -- " in first  # the first command, against a real server
    assert "scripts/demo.sh" in first  # and the demo, on the simulator
    assert "READY" in README[at[2]: at[3]] and "real completion" in README[at[2]: at[3]]
    for word in ("CI timings", "1183 s", "1295 tests", "mutants"):  # development figures live in docs/
        assert word not in README[: at[-1]], word


def test_the_two_commands_are_near_the_top():
    two = _section(README, "## Two commands")
    assert "bash scripts/demo.sh" in two and "bash scripts/test.sh" in two
    assert README.index("bash scripts/test.sh") < len(README) // 8
    assert (REPO / "scripts" / "demo.sh").is_file() and (REPO / "scripts" / "test.sh").is_file()


@pytest.mark.parametrize("name", ["README.md", *sorted(DOCS)])
def test_every_link_leads_somewhere(name):
    text = README if name == "README.md" else DOCS[name]
    here = (REPO / name).parent
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        file = (here / path).resolve() if path else REPO / name
        assert file.exists(), (name, target)
        if anchor and file.suffix == ".md":
            assert anchor in _anchors(file.read_text(encoding="utf-8")), (name, target)


def test_every_dependency_is_in_the_readme_with_its_reason():
    pyproject = (REPO / "pyproject.toml").read_text()  # tomllib is 3.11+; the lists are one string a line
    lists = re.findall(r'^(?:dependencies|test) = \[\n(.*?)^\]', pyproject, re.M | re.S)
    names = re.findall(r'^\s*"([A-Za-z0-9_.\-]+)', "".join(lists), re.M)
    assert "click" in names and "pytest" in names, names
    deps = _section(README, "### Dependencies, and why")
    for name in names:
        assert f"`{name}`" in deps, name
    for row in re.findall(r"^\| `([\w\-]+)` \| (.*) \|$", deps, re.M):
        assert len(row[1]) > 20, row  # a reason, not a blank


def test_the_map_of_the_packages_names_every_package_and_module_and_only_those():
    built = _section(README, "## How it is built")
    block = built[built.index("```\nfirstlight/\n") + 4: built.index("\n```", built.index("```\nfirstlight/\n") + 4)]
    named = set(re.findall(r"^    (\S+?/?)\s", block, re.M))
    present = {p.name + ("/" if p.is_dir() else "") for p in (REPO / "firstlight").iterdir()
               if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.name != "__init__.py")}
    assert named == present, (sorted(named - present), sorted(present - named))
    # the files the map names inside a package exist
    for package, text in re.findall(r"^    (\w+)/\s+(.*(?:\n {21}.*)*)", block, re.M):
        for module in re.findall(r"\b(\w+)\.py\b", text):
            assert (REPO / "firstlight" / package / f"{module}.py").is_file(), (package, module)
