#!/usr/bin/env bash
# Mutation testing of the rule modules: mutmut changes one small thing at a time (a comparison, a constant, a
# boolean) in a module and runs the fast tests that cover it; a change no test notices (a surviving mutant) is a
# rule without a test. Run it before changing a rule, and record the score and the survivors in
# docs/development.md.
#
#   scripts/mutation.sh                       every rule module (hours on 2 cores)
#   scripts/mutation.sh interpret wire/content   just these
#   MUTATION_TIME_S=600 scripts/mutation.sh ...  each module's time bound (default 1200 s)
#   MUTATION_TIMEOUT_MULTIPLIER=15 scripts/mutation.sh ...  a mutant's tests are stopped (and count as killed: a
#                                  mutant that disables a deadline waits forever) after this many times their clean
#                                  run's time (mutmut's default, 15). Keep it for a score: at 4, with 3 children on 2
#                                  cores, 100 of the checkpoint's 123 "timeouts" were slow survivors. Changing it
#                                  reruns exactly the timeouts; a rerun keeps every other verdict, even after new
#                                  tests (name the survivors to rerun them: mutmut run NAME...)
#   MUTATION_CHILDREN=4 scripts/mutation.sh ...  mutants tested at once (default 2; more helps modules whose tests
#                                  mostly wait on sockets and deadlines)
#
# Each module runs in its own copy of the working tree under .mutation/<module> (mutmut mutates a copy,
# never your files), against its in-process tests under tests/unit/ (tests_of below): fast, no real engines. A
# module cut off by its time bound is resumed by the next run (mutmut keeps its results). Its summary goes to
# .mutation/<module>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
py="$repo/.venv/bin/python"
mutmut_version=3.8.1
"$py" -c "import mutmut" 2>/dev/null || "$py" -m pip install -q "mutmut==$mutmut_version"
time_s=${MUTATION_TIME_S:-1200}
timeout_multiplier=${MUTATION_TIMEOUT_MULTIPLIER:-15}
children=${MUTATION_CHILDREN:-2}

# module (a file, or a folder of them) -> its fast tests, read from the layout of tests/unit/ (which mirrors the
# package): firstlight/a/b.py -> tests/unit/a/test_b.py and the folder tests/unit/a/b/ (its tests in several
# files); a folder firstlight/a -> tests/unit/a/ and tests/unit/test_a.py.
tests_of() {
  local m=$1 dir base
  local -a out=()
  if [ -d "firstlight/$m" ]; then
    dir=$(dirname "$m"); base=$(basename "$m")
    [ "$dir" = . ] && dir="" || dir="$dir/"
    [ -d "tests/unit/$m" ] && out+=("tests/unit/$m")
    [ -f "tests/unit/${dir}test_$base.py" ] && out+=("tests/unit/${dir}test_$base.py")
  elif [ -f "firstlight/$m.py" ]; then
    dir=$(dirname "$m"); base=$(basename "$m")
    [ "$dir" = . ] && dir="" || dir="$dir/"
    [ -f "tests/unit/${dir}test_$base.py" ] && out+=("tests/unit/${dir}test_$base.py")
    [ -d "tests/unit/${dir}$base" ] && out+=("tests/unit/${dir}$base")
  fi
  echo "${out[*]}"
}
ORDER=(interpret wire/content wire/deadline preflight/checkpoint judge probes wire preflight units/journal samplers anatomy)
# single files of the folders above, to run one at a time: probes/ladder preflight/quantization preflight/gpus
# preflight/port samplers/process
modules=("$@")
[ ${#modules[@]} -gt 0 ] || modules=("${ORDER[@]}")

for m in "${modules[@]}"; do
  tests=$(tests_of "$m")
  if [ -z "$tests" ]; then
    echo "mutation.sh: no module firstlight/$m with tests under tests/unit/ (e.g. one of: ${ORDER[*]})" >&2
    exit 64
  fi
  if [ -d "firstlight/$m" ]; then pattern="firstlight/$m/*"; else pattern="firstlight/$m.py"; fi
  work="$repo/.mutation/${m//\//_}"
  mkdir -p "$work"
  # the tracked tree and new files as they are now (mutmut's own results under mutants/ are kept)
  git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work"
  ln -sfn "$repo/../shared" "$work/shared"  # tests run from mutants/, and look for ../shared
  {
    echo
    echo "[tool.mutmut]"
    echo "source_paths = [\"firstlight\"]"
    echo "only_mutate = [\"$pattern\"]"
    printf 'pytest_add_cli_args_test_selection = ['
    for t in $tests; do printf '"%s", ' "$t"; done
    echo ']'
    echo 'pytest_add_cli_args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-q"]'
    echo "also_copy = [\"firstlight\", \"tests\", \"scripts\"]"
    echo "use_setproctitle = false"  # tests read their own process name (preflight procinfo)
    echo "timeout_multiplier = $timeout_multiplier"
  } >>"$work/pyproject.toml"
  echo "mutation.sh: $m against $tests (at most ${time_s} s)" >&2
  rc=0
  # python -m, not the mutmut script: tests read their own process name, which must stay "python"
  (cd "$work" && timeout "$time_s" nice -n 10 "$py" -m mutmut run --max-children "$children") >"$work.log" 2>&1 || rc=$?
  [ "$rc" = 124 ] && echo "mutation.sh: $m stopped by its time bound; run again to resume" >&2
  (cd "$work" && "$py" -m mutmut results --all true) >"$work.results" 2>&1 || true
  "$py" - "$work.results" "$m" <<'EOF' | tee "$work.txt"
import collections, sys
counts = collections.Counter()
survivors = []
for line in open(sys.argv[1]):
    name, _, status = line.strip().rpartition(": ")
    if not name:
        continue
    counts[status] += 1
    if status == "survived":
        survivors.append(name)
decided = counts["killed"] + counts["survived"] + counts["timeout"] + counts["segfault"]
if not decided:
    print(f"{sys.argv[2]}: no result: the clean run of its tests failed or was cut short (see its .log)")
    sys.exit(0)
score = 100 * (decided - counts["survived"]) / decided
print(f"{sys.argv[2]}: {score:.1f}% killed of {decided} decided; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
for s in survivors:
    print(f"  survived: {s}")
EOF
done
