#!/usr/bin/env bash
# Mutation testing of the rule modules: mutmut changes one small thing at a time (a comparison, a constant, a
# boolean) in a module and runs the fast tests that cover it; a change no test notices (a surviving mutant) is a
# rule without a test. Run it before changing a rule; each module's score is in docs/development.md's table, its
# survivors in the report this script writes (.mutation/<module>.txt).
#
#   scripts/mutation.sh                       every rule module (hours on 2 cores)
#   scripts/mutation.sh interpret wire/content   just these
#   scripts/mutation.sh rules                 the alert rules' own values (scripts/mutate_rules.py, promtool)
#   scripts/mutation.sh config                the Config's field defaults and constants, which mutmut never
#                                             mutates (scripts/mutate_defaults.py, against config's tests)
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
# never your files), against its tests (tests_of below): fast, no real engines. A
# module cut off by its time bound is resumed by the next run (mutmut keeps its results). Its summary goes to
# .mutation/<module>.txt (scripts/mutation_count.py: flake kills rechecked and listed apart, "no tests" mutants
# listed per function as reached only by e2e/subprocess tests).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
py="$repo/.venv/bin/python"
mutmut_version=3.8.1
"$py" -c "import mutmut" 2>/dev/null || "$py" -m pip install -q "mutmut==$mutmut_version"
time_s=${MUTATION_TIME_S:-1200}
timeout_multiplier=${MUTATION_TIMEOUT_MULTIPLIER:-15}
children=${MUTATION_CHILDREN:-2}

# module (a file, or a folder of them) -> its tests, read from the tree: the layout of tests/unit/ (which mirrors
# the package): firstlight/a/b.py -> tests/unit/a/test_b.py or the folder tests/unit/a/b/ (its tests in several
# files); a folder firstlight/a -> tests/unit/a/; the same file's mirror under tests/e2e/ (tests/e2e/a/test_b.py:
# its tests that start processes, such as the launcher's and the session's); and every in-process test file that
# imports the module (`from firstlight.a.b import`, `import firstlight.a.b`, `from firstlight.a import b`): mutmut
# then runs, for each mutant, only those of them that reach the function it changed in process.
tests_of() {
  local m=$1 dir base mod pkg
  local -a out=()
  dir=$(dirname "$m"); base=$(basename "$m")
  [ "$dir" = . ] && dir="" || dir="$dir/"
  if [ -d "firstlight/$m" ]; then
    [ -d "tests/unit/$m" ] && out+=("tests/unit/$m")
    [ -f "tests/unit/${dir}test_$base.py" ] && out+=("tests/unit/${dir}test_$base.py")
    for f in "firstlight/$m"/*.py; do  # each file's mirror under tests/e2e/
      [ -f "tests/e2e/$m/test_${f##*/}" ] && out+=("tests/e2e/$m/test_${f##*/}")
    done
  elif [ -f "firstlight/$m.py" ]; then
    [ -f "tests/unit/${dir}test_$base.py" ] && out+=("tests/unit/${dir}test_$base.py")
    [ -d "tests/unit/${dir}$base" ] && out+=("tests/unit/${dir}$base")
    [ -f "tests/e2e/${dir}test_$base.py" ] && out+=("tests/e2e/${dir}test_$base.py")
    mod="firstlight.${m//\//.}"; pkg="${mod%.*}"
    local importers="(from $mod import|import $mod( |$)|from $pkg import (.*[ ,(])?$base([ ,)]|$))"
    # a file its package's __init__ re-exports (`from firstlight.wire import Wire`) is imported through the package
    if [ -n "$dir" ] && grep -qE "^from ($mod|\.$base) import" "firstlight/${dir}__init__.py" 2>/dev/null; then
      importers="($importers|from $pkg import)"
    fi
    while IFS= read -r f; do
      case " ${out[*]} " in *" $f "*|*" ${f%/*} "*) ;; *) out+=("$f") ;; esac
    done < <(grep -rlE "$importers" tests/unit --include='test_*.py' 2>/dev/null | sort)
  fi
  echo "${out[*]}"
}
# every module that holds a rule, and the rules file (`rules`: scripts/mutate_rules.py mutates its values and runs
# the promtool tests of deploy/prometheus/tests/ against each mutant)
ORDER=(serving deaths redact cputime framing engines/command samplers/ports report/readiness probes/loop api drive
       config pytest_plugin cli/options samplers/oom report/prometheus runner containers preflight
       interpret wire/content wire/deadline judge phases probes/ladder wire units/journal samplers/process anatomy
       rules)
# single files of the folders above, to run one at a time: runner/serving runner/watchdog preflight/stale
# preflight/checkpoint containers/watch ...
modules=("$@")
[ ${#modules[@]} -gt 0 ] || modules=("${ORDER[@]}")

for m in "${modules[@]}"; do
  if [ "$m" = rules ]; then  # the alert rules: their own mutation of YAML values, against the promtool tests
    mkdir -p "$repo/.mutation"
    nice -n "${MUTATION_NICE:-15}" "$py" scripts/mutate_rules.py | tee "$repo/.mutation/rules.txt"
    continue
  fi
  tests=$(tests_of "$m")
  if [ "$m" = config ]; then  # field defaults and constants only: mutmut mutates none of them
    mkdir -p "$repo/.mutation"
    # shellcheck disable=SC2086  # the test paths, one word each
    nice -n "${MUTATION_NICE:-15}" "$py" scripts/mutate_defaults.py firstlight/config.py $tests \
      | tee "$repo/.mutation/config.txt"
    continue
  fi
  # a module with no in-process tests of its own is measured against its package's: its mutants then show as
  # "no tests" (reached only by e2e/subprocess tests), counted apart and listed, never dropped
  [ -n "$tests" ] || [ "$(dirname "$m")" = . ] || tests=$(tests_of "$(dirname "$m")")
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
    echo "also_copy = [\"firstlight\", \"tests\", \"bench\", \"scripts\", \"deploy\", \"docs\", \"README.md\"]"  # bench: tests/unit/engines/test_corpus.py reads its scorer
    echo "use_setproctitle = false"  # tests read their own process name (preflight procinfo)
    echo "timeout_multiplier = $timeout_multiplier"
  } >>"$work/pyproject.toml"
  echo "mutation.sh: $m against $tests (at most ${time_s} s)" >&2
  rc=0
  start=$SECONDS
  # python -m, not the mutmut script: tests read their own process name, which must stay "python"
  (cd "$work" && timeout "$time_s" nice -n "${MUTATION_NICE:-15}" "$py" -m mutmut run --max-children "$children") >"$work.log" 2>&1 || rc=$?
  [ "$rc" = 124 ] && echo "mutation.sh: $m stopped by its time bound; run again to resume" >&2
  # the module's time over all its runs (a module cut off is resumed)
  echo $((SECONDS - start)) >>"$work.seconds"
  (cd "$work" && "$py" -m mutmut results --all true) >"$work.results" 2>&1 || true
  # the honest count: kills by a test that fails on the clean code too (flaky) are rerun without it and, if the
  # mutant then lives, listed as flake kills; "no tests" mutants are listed per function, never dropped
  nice -n "${MUTATION_NICE:-15}" "$py" scripts/mutation_count.py "$work" "$m" "$work.results" \
    "$(paste -sd+ "$work.seconds" | bc)" | tee "$work.txt"
done
