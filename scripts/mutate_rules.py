"""Mutation testing of deploy/prometheus/firstlight-rules.yml (scripts/mutation.sh rules).

mutmut mutates Python only; the alert rules hold their own numbers: each `for`, each evaluation interval, each
range window (`[15m]`, `[10m:30s]`), each threshold and factor in an expression (`>= 3`, `vector(1.5)`), and each
comparison against one (`>=` / `>`, `==` / `!=`), each label matcher (`verdict="failed"`, `!=`), and each set
operator between two vectors (`and`, `or`, `unless`). This changes one of them at a time (a number a little up and
a little down, a duration halved and doubled, `>=` to `>` and back, `==` to `!=` and back, a matcher negated, `and`
to `unless` and back, `or` to `and`), runs the promtool unit tests of deploy/prometheus/tests/
against the mutant, then the in-process tests of the rules file (what promtool cannot see: a group's evaluation
interval, pinned to the value the docs state), and counts it killed when a test fails. A survivor is a value no
test pins. Mutants that promtool rejects as a rules file are counted apart (they say nothing about the tests).

    python scripts/mutate_rules.py [RULES] [TESTS_DIR]      # prints the score and each survivor
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DURATION = re.compile(r"(?<![\w.])(\d+)([smhdw])(?![\w])")
NUMBER = re.compile(r"(?<![\w.:\[\"$])(\d+(?:\.\d+)?)(?![\w.:\]])")
COMPARISON = re.compile(r"(>=|<=|(?<![<>=!])>(?!=)|(?<![<>=!])<(?!=))")
# PromQL's set operators between two vectors: mutmut's `and`/`or` swap, for series (`unless` is the `and` negated)
SET_OPERATOR = re.compile(r"(?<![\w:])(and|or|unless)(?![\w:])")
SET_SWAP = {"and": "unless", "unless": "and", "or": "and"}
EQUALITY = re.compile(r"(==|!=)")  # a vector comparison negated (mutmut's == / != swap)
MATCHER = re.compile(r"(?<=\w)(!=|=)(?=\s*\")")  # a label matcher negated: verdict="failed" / verdict!="failed"
QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")


@dataclass(frozen=True)
class Mutant:
    line: int  # 1-based
    start: int
    end: int
    old: str
    new: str

    def describe(self, lines: list[str]) -> str:
        where = f"line {self.line} col {self.start + 1}"
        return f"{where}: {self.old!r} -> {self.new!r} in `{lines[self.line - 1].strip()}`"


def _durations(value: str, unit: str) -> list[str]:
    n = int(value)
    out = [f"{n * 2}{unit}"]
    if n > 1:
        out.append(f"{n // 2}{unit}")
    else:
        smaller = {"m": "30s", "h": "30m", "d": "12h", "w": "3d"}.get(unit)
        if smaller:
            out.append(smaller)
    return out


def _numbers(value: str) -> list[str]:
    if "." in value:
        step = 10 ** -len(value.split(".")[1])
        v = float(value)
        return [f"{v + step:.{len(value.split('.')[1])}f}", f"{v - step:.{len(value.split('.')[1])}f}"]
    n = int(value)
    return [str(n + 1), str(n - 1)]


def _masked(text: str) -> str:
    """The text with quoted strings (label values) blanked, so their digits are never mutated."""
    return QUOTED.sub(lambda m: " " * len(m.group()), text)


def mutants(lines: list[str]) -> list[Mutant]:
    out: list[Mutant] = []
    in_expr = False
    for i, raw in enumerate(lines, 1):
        code = raw.split(" #", 1)[0] if not raw.lstrip().startswith("#") else ""
        stripped = code.strip()
        key = stripped.split(":", 1)[0].lstrip("- ")
        if key in ("expr",):
            in_expr = True
            body_at = code.index("expr:") + len("expr:")
        elif re.match(r"^\s*-?\s*\w+:", code) and key not in ("expr",):
            in_expr = False
            body_at = None
        else:
            body_at = 0 if in_expr else None
        if key in ("for", "interval", "evaluation_interval"):
            at = code.index(":") + 1
            for m in DURATION.finditer(code, at):
                out += [Mutant(i, m.start(), m.end(), m.group(), new) for new in _durations(m.group(1), m.group(2))]
            continue
        if body_at is None or not stripped or stripped == "|":
            continue
        body = _masked(code)
        taken: list[tuple[int, int]] = []
        for m in re.finditer(r"\[([^\]]+)\]", body[body_at:]):
            for d in DURATION.finditer(body, body_at + m.start(), body_at + m.end()):
                taken.append((d.start(), d.end()))
                out += [Mutant(i, d.start(), d.end(), d.group(), new) for new in _durations(d.group(1), d.group(2))]
        for m in NUMBER.finditer(body, body_at):
            if any(a <= m.start() < b for a, b in taken):
                continue
            out += [Mutant(i, m.start(), m.end(), m.group(), new) for new in _numbers(m.group())]
        for m in COMPARISON.finditer(body, body_at):
            op = m.group()
            new = {">=": ">", ">": ">=", "<=": "<", "<": "<="}[op]
            out.append(Mutant(i, m.start(), m.end(), op, new))
        for m in SET_OPERATOR.finditer(body, body_at):
            out.append(Mutant(i, m.start(), m.end(), m.group(), SET_SWAP[m.group()]))
        for m in EQUALITY.finditer(body, body_at):
            if code[m.end():].lstrip().startswith('"'):
                continue  # a label matcher's `!=`: below
            out.append(Mutant(i, m.start(), m.end(), m.group(), {"==": "!=", "!=": "=="}[m.group()]))
        for m in MATCHER.finditer(code, body_at):
            if not code[m.end():].lstrip().startswith('"') or code[m.start() - 1] in "=!":
                continue
            out.append(Mutant(i, m.start(), m.end(), m.group(), {"=": "!=", "!=": "="}[m.group()]))
    return out


def _run(rules_dir: Path, tests: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", "test", "rules", *tests], cwd=rules_dir, capture_output=True, text=True,
                          timeout=300, check=False)


# The in-process tests of the rules file: what promtool cannot see (a group's evaluation interval), pinned to the
# value the docs state. Pointed at a mutant through FIRSTLIGHT_RULES_FILE (tests/support/prometheus_rules.py).
IN_PROCESS_TESTS = "tests/unit/deploy/test_prometheus_rules.py"


def _run_in_process(rules_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
                           IN_PROCESS_TESTS], cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "FIRSTLIGHT_RULES_FILE": str(rules_file)})


def main() -> int:
    rules = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "deploy/prometheus/firstlight-rules.yml"
    tests_dir = Path(sys.argv[2]) if len(sys.argv) > 2 else rules.parent / "tests"
    if shutil.which("promtool") is None:
        print("rules: promtool not on PATH: nothing measured")
        return 69
    lines = rules.read_text().splitlines(keepends=True)
    tests = sorted(str(p.relative_to(rules.parent)) for p in tests_dir.glob("*.test.yml"))
    if _run(rules.parent, tests).returncode != 0 or _run_in_process(rules).returncode != 0:
        print("rules: the promtool tests or the in-process tests fail on the clean rules file: nothing measured")
        return 1
    killed, survived, invalid = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / rules.parent.name
        shutil.copytree(rules.parent, work)
        target = work / rules.name
        for mu in mutants(lines):
            text = lines.copy()
            line = text[mu.line - 1]
            text[mu.line - 1] = line[:mu.start] + mu.new + line[mu.end:]
            target.write_text("".join(text))
            check = subprocess.run(["promtool", "check", "rules", rules.name], cwd=work, capture_output=True,
                                   text=True, timeout=120, check=False)
            if check.returncode != 0:
                invalid.append(mu)
            elif _run(work, tests).returncode != 0 or _run_in_process(target).returncode != 0:
                killed.append(mu)
            else:
                survived.append(mu)
    decided = len(killed) + len(survived)
    score = 100 * len(killed) / decided if decided else 0.0
    print(f"rules: {score:.1f}% killed of {decided} decided ({decided + len(invalid)} mutants of {rules.name}); "
          f"killed {len(killed)}, survived {len(survived)}, rejected by promtool check rules {len(invalid)}")
    for mu in survived:
        print(f"  survived: {mu.describe(lines)}")
    for mu in invalid:
        print(f"  invalid: {mu.describe(lines)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
