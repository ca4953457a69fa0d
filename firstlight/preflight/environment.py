"""The server's Python environment: can it repair itself (pip), and are its libraries new enough for the
checkpoint's quantization (quantization.py)? A venv made by ``uv venv`` without ``--seed``, or by
``python -m venv --without-pip``, has no pip: upgrading a library then first needs ``python -m ensurepip``.
"""

from __future__ import annotations

from firstlight.preflight.base import OK, WARN, Check
from firstlight.preflight.interpreter import pip_version
from firstlight.preflight.target import Target

NAME = "pip"
CATEGORY = "import_error"


def check_pip(target: Target) -> Check:
    if target.interpreter is None:
        return Check(NAME, OK, CATEGORY, f"skipped: not a Python server ({target.interpreter_source})")
    ok, said = pip_version(target.interpreter, target.env)
    if ok:
        return Check(NAME, OK, CATEGORY, f"{target.interpreter} -m pip --version: {said}")
    return Check(NAME, WARN, CATEGORY, f"{target.interpreter} ({target.interpreter_source}) has no working pip: {said}",
                 f"{target.interpreter} -m ensurepip --upgrade (then it can upgrade its own packages)")
