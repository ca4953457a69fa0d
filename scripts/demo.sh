#!/usr/bin/env bash
# The README's demo command: a venv with firstlight, then a simulated 8-GPU cold start watched end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
exec .venv/bin/firstlight demo "$@"
