"""The server's Python, read from its console script (``firstlight.preflight.target``): each shebang form pip, uv
and package managers write, pip's ``/bin/sh`` trampoline, ``env`` with its options, and what is not a Python
script. Files written for the test; ``env``'s lookup on this machine's PATH."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from firstlight.engines import read_command
from firstlight.preflight.target import find_interpreter, shebang_interpreter

PY = Path(sys.executable).name  # "python" or "python3.11": a name on PATH in this venv


def _script(tmp_path: Path, head: str | bytes, name: str = "serve") -> Path:
    f = tmp_path / name
    f.write_bytes(head if isinstance(head, bytes) else head.encode())
    return f


@pytest.mark.parametrize(("head", "interpreter"), [
    ("#!/opt/venv/bin/python3.12\nimport x\n", "/opt/venv/bin/python3.12"),
    ("#! /opt/venv/bin/python -I\n", "/opt/venv/bin/python"),  # a space after #!, an option after it
    ("#!/usr/bin/pypython\n", "/usr/bin/pypython"),
    ("#!/bin/bash\nexec python \"$@\"\n", None),  # a shell script that runs Python: not read
    ("#!\n", None),
    ("#!   \n", None),
    ("# !/usr/bin/python\n", None),
    ("#!/bin/sh\n", None),  # sh without the trampoline's second line
    ("#!/bin/sh\n'''exec' /venv/bin/python3 \"$0\" \"$@\"\n' '''\n", "/venv/bin/python3"),
    ("#!/bin/sh\n'''exec' \"/a b/venv/bin/python\" \"$0\" \"$@\"\n' '''\n", "/a b/venv/bin/python"),
    ("#!/bin/sh\n'''exec' /usr/bin/perl \"$0\"\n", None),
    ("#!/usr/bin/dash\n'''exec' /venv/bin/python3 \"$0\"\n", None),  # only sh's trampoline
])
def test_the_python_of_a_console_script(tmp_path: Path, head: str, interpreter: str | None):
    assert shebang_interpreter(_script(tmp_path, head)) == interpreter


def test_env_finds_the_python_it_names_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    found = shutil.which(PY)
    assert found is not None
    assert shebang_interpreter(_script(tmp_path, f"#!/usr/bin/env {PY}\n")) == found
    assert shebang_interpreter(_script(tmp_path, f"#!/usr/bin/env -S {PY} -u\n")) == found  # env's options
    assert shebang_interpreter(_script(tmp_path, "#!/usr/bin/env -i\n")) is None  # env runs nothing named
    assert shebang_interpreter(_script(tmp_path, "#!/usr/bin/env no-such-python9\n")) is None  # not on PATH
    assert shebang_interpreter(_script(tmp_path, "#!/usr/bin/env sh\n")) is None  # found, but not a Python


def test_the_first_512_bytes_are_all_that_is_read(tmp_path: Path):
    trampoline = "#!/bin/sh\n" + "#" * 600 + "\n'''exec' /venv/bin/python3 \"$0\"\n"
    assert shebang_interpreter(_script(tmp_path, trampoline)) is None
    assert shebang_interpreter(_script(tmp_path, b"#!/venv/\xff/bin/python\n")) == "/venv/\ufffd/bin/python"
    assert shebang_interpreter(tmp_path / "absent") is None and shebang_interpreter(tmp_path) is None


def test_the_interpreter_of_a_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    script = _script(tmp_path, "#!/opt/venv/bin/python3\n", "vllm")
    script.chmod(0o755)
    env = {"PATH": str(tmp_path)}
    assert find_interpreter(["vllm", "serve", "m"], env) == ("/opt/venv/bin/python3", f"shebang of {script}")
    assert find_interpreter([str(script), "serve"], {}) == ("/opt/venv/bin/python3", f"shebang of {script}")
    assert find_interpreter([], env) == (None, "empty command")
    assert find_interpreter(["nope"], env) == (None, "nope not found on PATH")
    native = _script(tmp_path, b"\x7fELF", "llama-server")
    native.chmod(0o755)
    assert find_interpreter(["llama-server"], env) == (None, f"{native} is not a Python script")
    assert find_interpreter(["python9.9", "-m", "x"], env) == (None, "python9.9 not found on PATH")
    py = Path(sys.executable)
    assert find_interpreter([str(py), "-m", "vllm"], env) == (str(py), f"the command runs {py}")
    assert find_interpreter([PY, "-m", "vllm"], {"PATH": str(py.parent)}) == (shutil.which(PY, path=str(py.parent)),
                                                                             f"the command runs {PY}")


def test_no_interpreter_for_a_container_or_uv():
    docker = read_command(["docker", "run", "vllm/vllm-openai:v0.9", "--model", "m"], env={})
    assert find_interpreter(list(docker.server), {}, docker) == (
        None, "the server runs in the container image vllm/vllm-openai:v0.9")
    uv = read_command(["uv", "run", "vllm", "serve", "m"], env={})
    assert find_interpreter(list(uv.server), {}, uv) == (None, "uv picks the server's Python")


def test_the_target_is_the_servers_own_command_with_its_environment_and_reach(tmp_path: Path):
    from firstlight.preflight.target import read_target

    script = _script(tmp_path, "#!/opt/venv/bin/python3\n", "vllm")
    script.chmod(0o755)
    t = read_target(["env", "CUDA_VISIBLE_DEVICES=1,0", "vllm", "serve", "org/m", "--port", "8001"],
                    env={"PATH": str(tmp_path)})
    assert t.argv == ["vllm", "serve", "org/m", "--port", "8001"]  # the wrapper taken off
    assert t.env["CUDA_VISIBLE_DEVICES"] == "1,0" and t.env["PATH"] == str(tmp_path)
    assert (t.engine, t.port, t.visible_devices) == ("vllm", 8001, ["1", "0"])
    assert (t.interpreter, t.interpreter_source) == ("/opt/venv/bin/python3", f"shebang of {script}")
    assert t.command is not None and t.command.engine == "vllm"
    forced = read_target(["./serve.sh", "--port", "9"], env={}, engine="sglang", reach=("10.0.0.5", 7000))
    assert (forced.engine, forced.host, forced.port) == ("sglang", "10.0.0.5", 7000)
    assert read_target(["vllm", "serve", "m"], env={}, reach=(None, 7001)).port == 7001
