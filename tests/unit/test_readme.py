"""The README is for users and fits a screen: what firstlight is, install, a first ``up`` and what its output
means, the two commands, a map of the docs pages and why each dependency is there (at most 300 lines). The pages
under ``docs/`` hold the reference: every link leads somewhere, every option of every command is documented
somewhere, and the architecture page's map names what is in ``firstlight/``."""

from __future__ import annotations

import re

import click
import pytest

from firstlight.cli import cli
from tests.support.common import REPO as _REPO
from tests.support.docs import PAGES as DOCS
from tests.support.docs import README, README_LINES_MAX, TEXT, headings

REPO = _REPO


def _anchors(text: str) -> set[str]:
    """GitHub's anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for _, title, _ in headings(text):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end != -1 else None]


def test_the_readme_fits_a_screen_of_what_it_is_install_first_command_output_commands_map_and_dependencies():
    assert len(README.splitlines()) <= README_LINES_MAX
    order = ["## Install", "## First start", "## What the output means", "## Two commands", "## Documentation",
             "## Python API", "## Dependencies, and why"]
    at = [README.index(f"\n{h}\n") for h in order]
    assert at == sorted(at), order
    assert [f"## {t}" for level, t, _ in headings(README) if level == 2] == order  # and nothing else
    first = README[: at[2]]
    assert "firstlight up -- " in first  # the first command, against a real server
    assert "scripts/demo.sh" in first  # and the demo, on the simulator
    assert "READY" in README[at[2]: at[3]] and "real completion" in README[at[2]: at[3]]
    for word in ("CI timings", "1183 s", "1295 tests", "mutants"):  # development figures live in docs/
        assert word not in README, word


def test_the_readmes_map_links_every_docs_page():
    docmap = _section(README, "## Documentation")
    linked = set(re.findall(r"\]\((docs/[\w\-]+\.md)[#)]", docmap))
    assert linked == set(DOCS), (sorted(set(DOCS) - linked), sorted(linked - set(DOCS)))


def _options(command: click.Command, path: str) -> list[tuple[str, str]]:
    out = []
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            out += _options(sub, f"{path} {name}")
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            out += [(path, o) for o in (*param.opts, *param.secondary_opts) if o.startswith("--") and o != "--help"]
    return out


@pytest.mark.parametrize("command, option", _options(cli, "firstlight"))
def test_every_option_of_every_command_is_documented_somewhere(command: str, option: str):
    assert re.search(re.escape(option) + r"(?![\w-])", TEXT), f"{command} {option}: in no docs page nor the README"


def test_the_option_check_can_fail():
    assert not re.search(re.escape("--no-such-option") + r"(?![\w-])", TEXT)
    assert ("firstlight bench", "--prompt-len") in _options(cli, "firstlight")


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
    deps = _section(README, "## Dependencies, and why")
    for name in names:
        assert f"`{name}`" in deps, name
    for row in re.findall(r"^\| `([\w\-]+)` \| (.*) \|$", deps, re.M):
        assert len(row[1]) > 20, row  # a reason, not a blank


def test_the_map_of_the_packages_names_every_package_and_module_and_only_those():
    built = DOCS["docs/architecture.md"]
    block = built[built.index("```\nfirstlight/\n") + 4: built.index("\n```", built.index("```\nfirstlight/\n") + 4)]
    named = set(re.findall(r"^    (\S+?/?)\s", block, re.M))
    present = {p.name + ("/" if p.is_dir() else "") for p in (REPO / "firstlight").iterdir()
               if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.name != "__init__.py")}
    assert named == present, (sorted(named - present), sorted(present - named))
    # the files the map names inside a package exist
    for package, text in re.findall(r"^    (\w+)/\s+(.*(?:\n {21}.*)*)", block, re.M):
        for module in re.findall(r"\b(\w+)\.py\b", text):
            assert (REPO / "firstlight" / package / f"{module}.py").is_file(), (package, module)


def test_the_first_starts_sample_output_is_in_time_order_and_says_no_word_twice():
    sample = README[README.index("```text\n$ firstlight up"):]
    sample = sample[: sample.index("\n```")]
    times = [float(t) for t in re.findall(r"^\[\s*([\d.]+)s\]", sample, re.M)]
    assert len(times) > 5 and times == sorted(times), times
    assert not re.search(r"\b(\w+) \1\b", sample), re.search(r"\b(\w+) \1\b", sample)
