#!/usr/bin/env bash
# The README's test command: sets everything up on a fresh machine (venv, package, a real llama-server, a real
# vLLM and a real model in the cache), then runs lint, types and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# The two real engines and the model, cached after the first run. vLLM's install (pip: mostly downloads, then
# the GGUF -> safetensors conversion) runs beside the llama.cpp build (compiler-bound); its output goes to a
# file, shown when it ends. Either one failing fails the run.
vllm_log=$(mktemp)
.venv/bin/python scripts/setup_vllm.py >"$vllm_log" 2>&1 &
vllm_pid=$!
trap 'kill "$vllm_pid" 2>/dev/null || true; rm -f "$vllm_log"' EXIT
.venv/bin/python scripts/setup_llama_server.py  # llama-server (x86-64-v3, smoke-checked) and the GGUF model
vllm_rc=0
wait "$vllm_pid" || vllm_rc=$?
trap 'rm -f "$vllm_log"' EXIT
cat "$vllm_log" >&2
if [ "$vllm_rc" != 0 ]; then
  echo "test.sh: scripts/setup_vllm.py failed (exit $vllm_rc)" >&2
  exit "$vllm_rc"
fi
# Real journals for the unit tests: systemd-journal-remote writes journal files, journalctl and systemd-analyze
# (package systemd, a dependency) read and check them. Installed once when missing (root, apt); idempotent.
if ! command -v journalctl >/dev/null || ! command -v systemd-analyze >/dev/null \
   || { [ ! -x /usr/lib/systemd/systemd-journal-remote ] && [ ! -x /lib/systemd/systemd-journal-remote ]; }; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd-journal-remote >/dev/null
  else
    echo "test.sh: systemd-journal-remote is missing and this is not a root Debian machine: the journal tests" \
         "skip (in CI they fail)" >&2
  fi
fi
if ! command -v chromium >/dev/null 2>&1; then
  # The report tests open the HTML report in a real browser: Debian's chromium, headless (CI runs as root).
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "test.sh: chromium is missing and cannot be installed here; the report tests will skip (fail under CI)" >&2
  fi
fi
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1 \
   || ! command -v prometheus-alertmanager >/dev/null 2>&1; then
  # The fleet tests run the real Prometheus (and promtool) and Alertmanager: Debian's packages. Only the
  # binaries are used; no service is started (the tests start their own, on loopback, in a temp dir).
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
      prometheus-alertmanager >/dev/null
  else
    echo "test.sh: prometheus/promtool/prometheus-alertmanager are missing and cannot be installed here; the" \
         "fleet tests will skip (fail under CI)" >&2
  fi
fi
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  # The container tests run the real podman (rootful, runc; the tests write the containers.conf that runs on
  # these machines) on an image they import from an empty root filesystem: no registry is reached.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null
  else
    echo "test.sh: podman is missing and cannot be installed here; the container tests will skip (fail under CI)" >&2
  fi
fi
if [ ! -x /usr/lib/postgresql/15/bin/postgres ] || [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
  # The fleet history's tests run a real PostgreSQL 15 (Debian's package): only the binaries are used; no
  # service is started (the tests start their own, as nobody, on loopback, in a temp dir).
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  else
    echo "test.sh: postgresql is missing and cannot be installed here; the history's PostgreSQL tests will skip" \
         "(fail under CI)" >&2
  fi
fi
echo "test.sh: set-up done after ${SECONDS} s" >&2
.venv/bin/ruff check firstlight tests scripts bench
.venv/bin/mypy
# In parallel (pytest-xdist): most tests wait on real servers and subprocesses, not on the CPU. The real-vLLM
# tests are one unit on one worker (they share their servers) and start first: they are the longest
# (tests/conftest.py pytest_xdist_make_scheduler).
# Coverage of the package, one line per file that is not fully covered, and the total (pytest-cov).
# The run ends by SIGINT when CI's limit (90 minutes, less a margin, counted from this script's start) comes
# near: pytest then prints what failed so far, where a run killed at the limit would print nothing.
deadline=$(( ${FIRSTLIGHT_TEST_BUDGET_S:-5100} - SECONDS ))
timeout --foreground --signal=INT --kill-after=120 "$deadline" \
  .venv/bin/python -m pytest -q -rs -n "${FIRSTLIGHT_TEST_WORKERS:-2}" --cov=firstlight \
  --cov-report=term:skip-covered --durations=25 "$@"
echo "test.sh: done after ${SECONDS} s" >&2
