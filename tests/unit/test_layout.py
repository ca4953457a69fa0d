"""The tests mirror the package and keep to their lanes: ``tests/unit/`` is in process (``tests/unit/conftest.py``
refuses a process started while a unit test runs; here, no unit test module even imports a way to start one),
``tests/e2e/`` holds the rest in the same folders, and no module has its tests in two places of one lane."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.common import REPO

TESTS = REPO / "tests"
LANES = ("unit", "e2e")
STARTERS = {"subprocess", "multiprocessing", "pty", "concurrent.futures.process"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


def test_no_unit_test_module_imports_a_way_to_start_a_process():
    found = {p.relative_to(REPO).as_posix(): sorted(n for n in _imports(p)
                                                    if n in STARTERS or n.split(".")[0] in STARTERS)
             for p in sorted((TESTS / "unit").rglob("test_*.py"))}
    assert {p: n for p, n in found.items() if n} == {}, "move them to the mirror folder under tests/e2e/"


def test_the_import_check_can_fail(tmp_path: Path):
    (tmp_path / "test_x.py").write_text("import subprocess\nfrom multiprocessing import get_context\n")
    assert {"subprocess", "multiprocessing"} <= _imports(tmp_path / "test_x.py")


@pytest.mark.parametrize("lane", LANES)
def test_no_module_has_its_tests_both_in_a_file_and_in_a_folder(lane: str):
    """``tests/unit/a/test_b.py`` or ``tests/unit/a/b/``: never both (the same in tests/e2e/)."""
    both = [p.relative_to(REPO).as_posix() for p in sorted((TESTS / lane).rglob("test_*.py"))
            if (p.parent / p.stem.removeprefix("test_")).is_dir()]
    assert both == [], "move the file into its folder"


def test_every_e2e_test_sits_in_a_folder_like_its_unit_tests():
    assert sorted(p.name for p in (TESTS / "e2e").glob("test_*.py")) == []


@pytest.mark.parametrize("lane", LANES)
def test_every_folder_of_tests_is_a_package(lane: str):
    """Test modules are imported by their dotted path (``tests.e2e.runner.test_session``): two files of one name
    in two folders stay two modules."""
    folders = {p.parent for p in (TESTS / lane).rglob("test_*.py")}
    assert sorted(f.relative_to(REPO).as_posix() for f in folders if not (f / "__init__.py").is_file()) == []
