"""The interpreter probe (``firstlight.preflight.interpreter``) in process, against real interpreters: this test's
own Python and its venv, an environment that adds a distribution, and executables that hang, fail, print
something else or read their stdin."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
from pathlib import Path

import pytest

from firstlight.preflight import interpreter
from firstlight.preflight.interpreter import DISTRIBUTIONS, probe_interpreter


def _script(tmp_path: Path, body: str) -> str:
    p = tmp_path / "python"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


def test_the_answer_is_the_interpreters_own_version_prefix_distributions_and_pip():
    info = probe_interpreter(sys.executable, os.environ, ["pytest", "no-such-distribution-firstlight"])
    assert info.error is None
    assert (info.interpreter, info.python, info.prefix) == (sys.executable, platform.python_version(), sys.prefix)
    assert info.versions == {"pytest": importlib.metadata.version("pytest"), "no-such-distribution-firstlight": None}
    spec = importlib.util.find_spec("pip")
    assert info.pip == (spec.origin if spec else None)


def test_the_distributions_asked_by_default_are_the_ones_worth_naming():
    assert DISTRIBUTIONS == ("compressed-tensors", "vllm", "sglang", "transformers", "torch", "bitsandbytes", "pip")
    info = probe_interpreter(sys.executable, os.environ)
    assert list(info.versions) == list(DISTRIBUTIONS)


def test_the_commands_environment_is_the_one_asked(tmp_path: Path):
    dist = tmp_path / "site" / "firstlight_probe_fake-1.2.3.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: firstlight-probe-fake\nVersion: 1.2.3\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    assert probe_interpreter(sys.executable, env, ["firstlight-probe-fake"]).versions == {
        "firstlight-probe-fake": "1.2.3"}
    assert probe_interpreter(sys.executable, os.environ, ["firstlight-probe-fake"]).versions == {
        "firstlight-probe-fake": None}


def test_an_interpreter_that_never_answers_is_given_up_on_at_the_timeout(tmp_path: Path):
    info = probe_interpreter(_script(tmp_path, "exec sleep 30\n"), os.environ, timeout=1.0)
    assert info.error == f"{tmp_path / 'python'} did not answer within 1s"
    assert info.python is None and info.versions == {}


def test_the_default_timeout_is_15_s():
    assert interpreter.TIMEOUT_S == 15.0


def test_an_interpreter_that_cannot_run_says_why(tmp_path: Path):
    assert probe_interpreter(str(tmp_path / "absent"), os.environ).error == \
        f"cannot run {tmp_path / 'absent'}: No such file or directory"


@pytest.mark.parametrize(("body", "error"), [
    ("echo 'Traceback (most recent call last):' >&2; echo 'ImportError: no json' >&2; exit 3\n",
     "exited 3: ImportError: no json"),
    ("exit 1\n", "exited 1: no output"),
    ("echo not json; exit 0\n", "exited 0: no output"),
    ("echo '{\"python\": \"3.11.7\"}'\n", "exited 0: no output"),  # a key missing
    ("echo '[1, 2]'\n", "exited 0: no output"),  # not an object
    ("printf 'x%.0s' $(seq 300) >&2; exit 2\n", "exited 2: " + "x" * 200),  # the last line cut at 200
])
def test_an_answer_that_is_not_the_probes_line_is_an_error_with_the_last_line_of_stderr(tmp_path: Path, body: str,
                                                                                           error: str):
    info = probe_interpreter(_script(tmp_path, body), os.environ)
    assert info.error == f"{tmp_path / 'python'} {error}"
    assert info.python is None


def test_the_last_line_of_stdout_is_the_answer(tmp_path: Path):
    body = ("echo 'a banner from sitecustomize'\n"
            "echo '{\"python\": \"3.10.4\", \"prefix\": \"/venv\", \"versions\": {\"vllm\": \"0.8.5\"}, "
            "\"pip\": null}'\n")
    info = probe_interpreter(_script(tmp_path, body), os.environ)
    assert (info.error, info.python, info.prefix, info.versions, info.pip) == (
        None, "3.10.4", "/venv", {"vllm": "0.8.5"}, None)


def test_the_interpreter_reads_nothing_from_firstlights_stdin(tmp_path: Path):
    """A server's interpreter that reads its stdin must not take (or wait on) firstlight's own."""
    r, w = os.pipe()
    os.write(w, b"firstlight's own input\n")
    os.close(w)
    saved = os.dup(0)
    try:
        os.dup2(r, 0)
        info = probe_interpreter(_script(tmp_path, "cat >&2; exit 1\n"), os.environ)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(r)
    assert info.error == f"{tmp_path / 'python'} exited 1: no output"
