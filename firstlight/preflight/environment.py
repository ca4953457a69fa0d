"""The server's Python environment: can it repair itself? A venv made by ``uv venv`` without ``--seed``, or by
``python -m venv --without-pip``, has no pip: upgrading a library (quantization.py) then first needs
``python -m ensurepip``. Read by the interpreter probe (interpreter.py) in the server's own Python.
"""

from __future__ import annotations

from firstlight.preflight.base import OK, WARN, Check
from firstlight.preflight.interpreter import InterpreterInfo
from firstlight.preflight.target import Target

NAME = "pip"
CATEGORY = "import_error"


def check_pip(target: Target, info: InterpreterInfo | None) -> Check:
    if target.interpreter is None or info is None:
        return Check(NAME, OK, CATEGORY, f"skipped: not a Python server ({target.interpreter_source})")
    if info.error is not None:
        return Check(NAME, WARN, CATEGORY, f"cannot ask {target.interpreter}: {info.error}",
                     "check that the command's Python runs")
    where = f"{target.interpreter} (Python {info.python}, {info.prefix}; {target.interpreter_source})"
    if info.pip is not None:
        return Check(NAME, OK, CATEGORY, f"{where}: pip {info.versions.get('pip') or '?'} at {info.pip}")
    return Check(NAME, WARN, CATEGORY, f"{where} has no pip (`-m pip` would say: No module named pip)",
                 f"{target.interpreter} -m ensurepip --upgrade (then it can upgrade its own packages)")
