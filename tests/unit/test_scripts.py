"""The scripts keep their promises: scripts/test.sh reports the coverage, and scripts/mutation.sh finds tests
under tests/unit/ for every rule module it names."""

from __future__ import annotations

from typing import Any


# -- the README's development tools are wired ----------------------------------------------------------------
def test_test_sh_reports_coverage_and_mutation_sh_covers_every_rule_module_with_existing_tests():
    import re as _re

    from tests.support.common import REPO

    assert "--cov=firstlight" in (REPO / "scripts" / "test.sh").read_text()
    script = (REPO / "scripts" / "mutation.sh").read_text()
    order = _re.search(r"^ORDER=\(([^)]*)\)$", script, _re.M)
    assert order, "mutation.sh has no ORDER=(...) of its modules"
    modules = order.group(1).split()
    for module in ("judge", "interpret", "wire", "preflight", "probes/ladder", "units/journal", "samplers/process"):
        assert module in modules, module
    for module in ("serving", "runner", "deaths", "samplers/oom", "samplers/ports", "report/prometheus",
                   "report/readiness", "api", "pytest_plugin", "drive", "redact", "config", "cli/options",
                   "probes/loop", "preflight", "cputime", "framing", "engines/command", "containers", "rules"):
        assert module in modules, module
    unit = REPO / "tests" / "unit"
    importers = {p: p.read_text() for p in unit.rglob("test_*.py")}
    for module in modules:  # the tests mutation.sh reads from the tree (tests_of): each module has some
        if module == "rules":  # the alert rules: scripts/mutate_rules.py against the promtool tests
            assert (REPO / "scripts" / "mutate_rules.py").is_file()
            assert list((REPO / "deploy" / "prometheus" / "tests").glob("*.test.yml"))
            continue
        parent, _, base = module.rpartition("/")
        where = unit / parent if parent else unit
        assert (REPO / "firstlight" / module).is_dir() or (REPO / "firstlight" / f"{module}.py").is_file(), module
        found = [p for p in (unit / module, where / f"test_{base}.py") if p.exists()]
        dotted = "firstlight." + module.replace("/", ".")
        found += [p for p, text in importers.items() if f"from {dotted} import" in text or f"import {dotted}\n" in text]
        if not found and parent:  # none of its own: measured against its package's (its mutants show as "no tests")
            found = [p for p in (unit / parent,) if p.is_dir()]
        assert found, f"{module}: no tests under tests/unit/ by layout, by import, or of its package"


def _script(name: str) -> Any:
    """A script of scripts/ loaded as a module (they are not a package)."""
    import importlib.util
    import sys

    from tests.support.common import REPO

    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # its dataclass looks its module up
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[name]
    return mod


def test_mutate_rules_changes_each_for_window_threshold_factor_comparison_matcher_and_set_operator_never_a_value():
    mod = _script("mutate_rules")
    lines = [
        "  - alert: A\n",
        "    expr: |\n",
        '      (sum(increase(x{verdict="2"}[15m])) >= 3)\n',
        '      and on(instance) y{mode="or", v!="1"} == 1 or z unless w:or_rule\n',
        "      * scalar(vector(1.5))\n",
        "    for: 1m\n",
        "    labels:\n",
        "      severity: 5m\n",
    ]
    got = {(m.line, m.old, m.new) for m in mod.mutants(lines)}
    assert got == {(3, "15m", "30m"), (3, "15m", "7m"), (3, "3", "4"), (3, "3", "2"), (3, ">=", ">"), (3, "=", "!="),
                   (4, "and", "unless"), (4, "or", "and"), (4, "unless", "and"), (4, "=", "!="), (4, "!=", "="),
                   (4, "==", "!="), (4, "1", "2"), (4, "1", "0"),
                   (5, "1.5", "1.6"), (5, "1.5", "1.4"), (6, "1m", "2m"), (6, "1m", "30s")}


def test_mutate_defaults_changes_each_field_default_and_constant_once_each_way():
    mod = _script("mutate_defaults")
    source = (
        'PROMPT = "hi"\n'
        "__all__ = ['A']\n"
        "LIMIT: int = 3\n"
        "class A:\n"
        "    on: bool = True\n"
        "    wait: float = 2.5  # seconds\n"
        "    zero: float = 0.0\n"
        "    name: str | None = None\n"
        "    items: tuple[int, ...] = ()\n"
        "    def f(self) -> int:\n"
        "        x: int = 7\n"
        "        return x\n"
    )
    got = [(m.name, m.old, m.new) for m in mod.mutants(source)]
    assert got == [("PROMPT", '"hi"', "'XXhiXX'"), ("LIMIT", "3", "4"), ("LIMIT", "3", "2"),
                   ("A.on", "True", "False"), ("A.wait", "2.5", "5.0"), ("A.wait", "2.5", "1.25"),
                   ("A.zero", "0.0", "1.0")]
    m = mod.mutants(source)[4]
    line = source.splitlines()[m.line - 1]
    assert line[:m.start] + m.new + line[m.end:] == "    wait: float = 5.0  # seconds"


def test_every_line_kept_from_mutation_says_why() -> None:
    """``# pragma: no mutate`` hides a line's mutants from the score: only with its reason on the line."""
    from tests.support.common import REPO

    marked = [(f, line) for f in sorted((REPO / "firstlight").rglob("*.py"))
              for line in f.read_text().splitlines() if "pragma: no mutate" in line]
    assert marked, "docs/development.md names one such line"
    for f, line in marked:
        why = line.partition("pragma: no mutate")[2].lstrip(" -:")
        assert len(why.split()) >= 4, f"{f}: {line.strip()}"
