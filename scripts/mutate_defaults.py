"""Mutation testing of a module's declared values (scripts/mutation.sh config).

mutmut mutates function bodies only: a dataclass's field defaults and a module's constants (``timeout: float =
3600.0``, ``DEFAULT_PROMPT = "..."``) are never changed by it, and a module made of them shows "no tests". This
changes one of them at a time (a number a little up and down, a boolean negated, a string changed), runs the given
tests against the mutant in a scratch copy of the working tree, and counts it killed when a test fails. A survivor
is a default no test pins.

    python scripts/mutate_defaults.py MODULE.py TEST... # prints the score and each survivor
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    line: int  # 1-based; the value is on one line
    start: int
    end: int
    old: str
    new: str
    name: str  # Class.field or CONSTANT

    def describe(self) -> str:
        return f"line {self.line}: {self.name} {self.old} -> {self.new}"


def _changes(value: object) -> list[str]:
    if isinstance(value, bool):
        return [repr(not value)]
    if isinstance(value, int):
        return [repr(value + 1), repr(value - 1)]
    if isinstance(value, float):
        return [repr(value * 2), repr(value / 2)] if value else [repr(1.0)]
    if isinstance(value, str):
        return [repr(f"XX{value}XX")]
    return []


def mutants(source: str) -> list[Mutant]:
    """Each constant default of a class body's annotated field, and each module-level constant."""
    tree = ast.parse(source)
    found: list[tuple[str, ast.expr]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found.append((node.targets[0].id, node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found.append((node.target.id, node.value))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    found.append((f"{node.name}.{item.target.id}", item.value))
    out = []
    for name, value in found:
        if not isinstance(value, ast.Constant) or value.lineno != value.end_lineno or name.startswith("__"):
            continue
        old = ast.get_source_segment(source, value) or repr(value.value)
        out += [Mutant(value.lineno, value.col_offset, value.end_col_offset or 0, old, new, name)
                for new in _changes(value.value)]
    return out


def _tests(cwd: Path, tests: list[str]) -> int:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "-p", "no:xdist", *tests], cwd=cwd, capture_output=True, text=True, timeout=1200,
                          check=False).returncode


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 64
    module, tests = Path(sys.argv[1]), sys.argv[2:]
    if not module.is_file() or not module.resolve().is_relative_to(REPO):
        print(f"mutate_defaults: {module}: not a file of this checkout", file=sys.stderr)
        return 64
    rel = module.resolve().relative_to(REPO)
    name = rel.with_suffix("").as_posix().removeprefix("firstlight/")
    source = module.read_text()
    lines = source.splitlines(keepends=True)
    killed: list[Mutant] = []
    survived: list[Mutant] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                               capture_output=True, check=True).stdout.decode().split("\0")
        for f in filter(None, files):
            if (REPO / f).is_file():
                (work / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / f, work / f)
        (work.parent / "shared").symlink_to(REPO.parent / "shared")  # tests look for ../shared
        if _tests(work, tests) != 0:
            print(f"{name}: its tests fail on the clean code: nothing measured")
            return 1
        target = work / rel
        for mu in mutants(source):
            text = lines.copy()
            line = text[mu.line - 1]
            text[mu.line - 1] = line[:mu.start] + mu.new + line[mu.end:]
            target.write_text("".join(text))
            (killed if _tests(work, tests) != 0 else survived).append(mu)
        target.write_text(source)
    decided = len(killed) + len(survived)
    score = 100 * len(killed) / decided if decided else 0.0
    print(f"{name} (declared values): {score:.1f}% killed of {decided} mutants; killed {len(killed)}, "
          f"survived {len(survived)}")
    for mu in survived:
        print(f"  survived: {mu.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
