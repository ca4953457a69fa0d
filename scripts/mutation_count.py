"""Count one module's mutation run honestly (called by scripts/mutation.sh after mutmut's run).

A kill counts only when a test that kills the mutant passes on the clean code twice: mutmut runs the tests of a
mutant with `-x` and records only the exit code, so a flaky test's failure reads as a kill. Here every test file
that reached a killed mutant is run twice on the clean code (in mutmut's own copy, no mutant active); a killed
mutant any of whose tests failed there is run again with those tests left out, and if the rest pass it is a flake
kill (listed apart, not counted as killed). Mutants no in-process test reaches ("no tests": code reached only
through a subprocess, by e2e tests) stay in the report, counted and listed per function, never dropped.

    python scripts/mutation_count.py WORK MODULE RESULTS [SECONDS]
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

from mutmut.utils.format_utils import mangled_name_from_mutant_name

PYTEST = [sys.executable, "-m", "pytest", "--rootdir=.", "-p", "no:randomly", "-p", "no:xdist",
          "-p", "no:cacheprovider", "-q"]
DECIDED = ("killed", "survived", "timeout", "segfault")


def _failed(mutants: Path, files: list[str], env: dict[str, str]) -> set[str]:
    """The test ids that failed or errored in one clean run of these files (pytest's short summary)."""
    out = subprocess.run([*PYTEST, "-rfE", *files], cwd=mutants, env=env, capture_output=True, text=True,
                         timeout=3600, check=False)
    failed = set()
    for line in out.stdout.splitlines():
        for tag in ("FAILED ", "ERROR "):
            if line.startswith(tag):
                failed.add(line[len(tag):].split(" - ", 1)[0].strip())
    if out.returncode not in (0, 1):  # collection or internal error: every file's tests are suspect
        failed |= {f"{f}::(did not run: exit {out.returncode})" for f in files}
    return failed


def _file(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def main() -> int:
    work, module, results = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    seconds = sys.argv[4] if len(sys.argv) > 4 else "?"
    status: dict[str, str] = {}
    for line in results.read_text().splitlines():
        name, _, st = line.strip().rpartition(": ")
        if name:
            status[name] = st
    counts = collections.Counter(status.values())
    if not sum(counts[s] for s in DECIDED):
        print(f"{module}: no result: the clean run of its tests failed or was cut short (see its .log)")
        return 0
    stats = json.loads((work / "mutants" / "mutmut-stats.json").read_text())
    tests_by_fn: dict[str, list[str]] = stats["tests_by_mangled_function_name"]

    def tests(name: str) -> list[str]:
        return sorted(tests_by_fn.get(mangled_name_from_mutant_name(name), []))

    killed = [n for n, s in status.items() if s == "killed"]
    env = {k: v for k, v in os.environ.items() if k != "MUTANT_UNDER_TEST"}
    mutants = work / "mutants"
    files = sorted({_file(t) for n in killed for t in tests(n)})
    flaky: set[str] = set()
    if files:
        for _ in range(2):
            flaky |= _failed(mutants, files, env)
    flake_kills: list[str] = []
    for n in killed:
        own = tests(n)
        suspect = [t for t in own if t in flaky or _file(t) in {_file(f) for f in flaky if "(did not run" in f}]
        if not suspect:
            continue
        rest = [t for t in own if t not in suspect]
        rc = 0
        if rest:
            rc = subprocess.run([*PYTEST, "-x", *rest], cwd=mutants, env={**env, "MUTANT_UNDER_TEST": n},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600,
                                check=False).returncode
        if rc == 0:
            flake_kills.append(n)
    honest = counts["killed"] - len(flake_kills)
    decided = sum(counts[s] for s in DECIDED)
    score = 100 * (honest + counts["timeout"] + counts["segfault"]) / decided
    total = len(status)
    rest = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"{module}: {score:.1f}% killed of {decided} decided ({total} mutants, {seconds} s); {rest}; "
          f"flake kills {len(flake_kills)} (not counted as killed); flaky on clean code: {len(flaky)}")
    for t in sorted(flaky):
        print(f"  flaky on clean code: {t}")
    for n in flake_kills:
        print(f"  flake kill: {n}")
    for n, s in sorted(status.items()):
        if s == "survived":
            print(f"  survived: {n}")
    no_tests = collections.Counter(mangled_name_from_mutant_name(n) for n, s in status.items() if s == "no tests")
    if no_tests:
        print(f"  reached only by e2e/subprocess tests (no in-process test calls it): {sum(no_tests.values())} "
              "mutants")
        for fn, c in sorted(no_tests.items()):
            print(f"    no tests: {fn} ({c} mutants)")
    undecided = {s: c for s, c in counts.items() if s not in DECIDED and s != "no tests"}
    if undecided:
        print(f"  not decided yet (run again to resume): {undecided}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
