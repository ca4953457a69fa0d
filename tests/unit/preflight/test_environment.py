"""The pip check (``firstlight.preflight.environment``) in process, on the interpreter probe's answers: a venv
without pip is a warning with the one command that repairs it; a Python that cannot be asked is a warning; a
native server is skipped. The probe's real run in the server's Python: ``tests/e2e/preflight/test_preflight.py``."""

from __future__ import annotations

import dataclasses

from firstlight.preflight.environment import check_pip
from firstlight.preflight.interpreter import InterpreterInfo
from firstlight.preflight.target import read_target

TARGET = dataclasses.replace(read_target(["vllm", "serve", "m"], env={}), interpreter="/venv/bin/python3",
                             interpreter_source="the vllm script's shebang")


def test_a_native_server_or_no_answer_is_skipped():
    native = dataclasses.replace(TARGET, interpreter=None, interpreter_source="a native binary")
    check = check_pip(native, InterpreterInfo("x"))
    assert (check.status, check.category, check.evidence) == ("ok", "import_error",
                                                              "skipped: not a Python server (a native binary)")
    assert check_pip(TARGET, None).evidence == "skipped: not a Python server (the vllm script's shebang)"


def test_a_python_that_cannot_be_asked_warns():
    check = check_pip(TARGET, InterpreterInfo("/venv/bin/python3", error="timed out after 10s"))
    assert (check.status, check.evidence, check.hint) == (
        "warn", "cannot ask /venv/bin/python3: timed out after 10s", "check that the command's Python runs")


def test_pip_found_is_ok_with_its_version_and_place():
    info = InterpreterInfo("/venv/bin/python3", python="3.11.9", prefix="/venv", versions={"pip": "24.2"},
                           pip="/venv/lib/python3.11/site-packages/pip")
    check = check_pip(TARGET, info)
    assert (check.status, check.hint) == ("ok", None)
    assert check.evidence == ("/venv/bin/python3 (Python 3.11.9, /venv; the vllm script's shebang): pip 24.2 at "
                              "/venv/lib/python3.11/site-packages/pip")
    unknown = check_pip(TARGET, dataclasses.replace(info, versions={"pip": None}))
    assert unknown.evidence.endswith(": pip ? at /venv/lib/python3.11/site-packages/pip")


def test_a_venv_without_pip_warns_with_the_command_that_repairs_it():
    check = check_pip(TARGET, InterpreterInfo("/venv/bin/python3", python="3.12.1", prefix="/venv"))
    assert (check.status, check.category) == ("warn", "import_error")
    assert check.evidence == ("/venv/bin/python3 (Python 3.12.1, /venv; the vllm script's shebang) has no pip "
                              "(`-m pip` would say: No module named pip)")
    assert check.hint == "/venv/bin/python3 -m ensurepip --upgrade (then it can upgrade its own packages)"
