#!/usr/bin/env bash
# Hunt flaky tests on purpose: run the whole suite N times, each from a fresh clone of HEAD laid out as CI lays it
# (a sibling folder of this checkout, so ../shared is beside it; CI=true; no standard input), some of the runs
# beside a CPU load (busy processes at normal priority), then list every test that failed at least once, with
# its message and the runs it failed in.
#
#   bash scripts/flake-hunt.sh [--runs N] [--loaded K] [--hogs H] [--out DIR] [--empty-cache]
#
# --runs N        full runs (default 5); --loaded K: the last K of them run beside H busy processes (default 2, 2)
# --out DIR       where the logs, JUnit XML files and the summary go (default: ../flake-hunt-<time>)
# --empty-cache   each run gets an empty engine cache (FIRSTLIGHT_CACHE), as a new machine has: set-up included
# Exit status: 0 when every run passed, 1 when a test failed in any run, 2 on bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
runs=5 loaded=2 hogs=2 out="" empty_cache=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --loaded) loaded=$2; shift 2 ;;
    --hogs) hogs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --empty-cache) empty_cache=1; shift ;;
    *) echo "flake-hunt: unknown argument: $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
for n in "$runs" "$loaded" "$hogs"; do
  case "$n" in ''|*[!0-9]*) echo "flake-hunt: --runs, --loaded and --hogs take whole numbers" >&2; exit 2 ;; esac
done
[ "$loaded" -le "$runs" ] || { echo "flake-hunt: --loaded $loaded is more than --runs $runs" >&2; exit 2; }
out=${out:-"$(dirname "$repo")/flake-hunt-$(date -u +%Y%m%dT%H%M%S)"}
mkdir -p "$out"
head=$(git rev-parse HEAD)
echo "flake-hunt: $runs runs of $head ($loaded beside $hogs busy processes); logs in $out" >&2

hog_pids=()
stop_hogs() {
  for p in "${hog_pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  hog_pids=()
}
trap stop_hogs EXIT

for i in $(seq 1 "$runs"); do
  clone="$(dirname "$repo")/flake-hunt-clone"
  rm -rf "$clone" && git clone -q "$repo" "$clone" && git -C "$clone" checkout -q "$head"
  load=no
  if [ "$i" -gt $((runs - loaded)) ]; then
    load=yes
    for _ in $(seq 1 "$hogs"); do
      setsid python3 -c 'while True: pass' </dev/null >/dev/null 2>&1 &
      hog_pids+=("$!")
    done
  fi
  env_cache=()
  if [ "$empty_cache" = 1 ]; then
    rm -rf "$out/cache-$i" && mkdir -p "$out/cache-$i"
    env_cache=("FIRSTLIGHT_CACHE=$out/cache-$i")
  fi
  start=$SECONDS
  # -v -v (after test.sh's -q): one line per test as it ends, so a run cut short still names its failures.
  (cd "$clone" && env CI=true "${env_cache[@]}" bash scripts/test.sh -v -v --junitxml="$out/run-$i.xml" \
     </dev/null >"$out/run-$i.log" 2>&1)
  rc=$?
  stop_hogs
  echo "flake-hunt: run $i (loaded: $load): exit $rc in $((SECONDS - start)) s; $(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$out/run-$i.log" | tail -1)" \
    | tee -a "$out/runs.txt" >&2
done

# Every test that failed (or errored) in any run, with the runs and its first message.
python3 - "$out" "$runs" <<'PY' | tee "$out/summary.txt"
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

out, runs = Path(sys.argv[1]), int(sys.argv[2])
failed: dict[str, list[tuple[int, str]]] = {}
missing = []
for i in range(1, runs + 1):
    xml = out / f"run-{i}.xml"
    if not xml.is_file():
        missing.append(i)
        continue
    for case in ET.parse(xml).iter("testcase"):
        for bad in [*case.iter("failure"), *case.iter("error")]:
            name = f"{case.get('classname')}::{case.get('name')}"
            failed.setdefault(name, []).append((i, (bad.get("message") or "").splitlines()[0][:300]))
for i in missing:
    print(f"run {i}: no JUnit XML (set-up, lint or types failed before the tests: see run-{i}.log)")
for name, fails in sorted(failed.items()):
    print(f"{name}: failed in run(s) {', '.join(str(i) for i, _ in fails)} of {runs}: {fails[0][1]}")
if not failed and not missing:
    print(f"no test failed in {runs} runs")
sys.exit(1 if failed or missing else 0)
PY
