"""Secrets given to a server as environment assignments: ``-e NAME=VALUE``, ``--env=NAME=VALUE``, ``--env-file F``
of a container's ``run``, and ``NAME=VALUE cmd``. Their values are learnt, so a server that prints them, the start
line, the summary and the history all show ``***``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from firstlight.redact import MASK, MAX_ENV_FILE_BYTES, Redactor, redactor_for

TOKEN = "hf_" + "a1" * 12


@pytest.mark.parametrize("words", [
    ["--env=HF_TOKEN=" + TOKEN], ["-e", "HF_TOKEN=" + TOKEN], ["--env", "HF_TOKEN=" + TOKEN],
    ["-e=HF_TOKEN=" + TOKEN], ["HF_TOKEN=" + TOKEN],
], ids=lambda w: w[0].split("=")[0])
@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_a_secret_named_assignment_is_learnt_and_masked(runtime: str, words: list[str]) -> None:
    argv = [runtime, "run", *words, "vllm/vllm-openai", "--model", "m"]
    r = redactor_for(argv, env={})
    assert TOKEN in r.secrets
    shown = " ".join(r.argv(argv))
    assert TOKEN not in shown and MASK in shown
    assert r.text(f"server: token {TOKEN} read") == f"server: token {MASK} read"
    assert TOKEN not in str(r.data({"command": argv, "line": f"x {TOKEN}"}))


@pytest.mark.parametrize("word", ["MODEL=Qwen/Qwen3-8B", "CUDA_VISIBLE_DEVICES=0,1", "TOKENIZERS_PARALLELISM=false",
                                  "HF_TOKEN=abc", "1HF_TOKEN=secretvalue", "HF-TOKEN=secretvalue"])
def test_other_assignments_teach_nothing(word: str) -> None:
    """Not a secret's name (or a value too short to mask safely, or no variable's name at all)."""
    assert redactor_for(["docker", "run", "-e", word, "img"], env={}).secrets == set()


def test_an_env_files_secret_values_are_learnt(tmp_path: Path) -> None:
    env = tmp_path / "server.env"
    env.write_text(f"# the server's\nHF_TOKEN={TOKEN}\nexport DB_PASSWORD=pw-123456\nMODEL=m\n\n  API_KEY=k-9876 \n")
    for argv in (["podman", "run", "--env-file", str(env), "img"], ["docker", "run", f"--env-file={env}", "img"]):
        r = redactor_for(argv, env={})
        assert r.secrets == {TOKEN, "pw-123456", "k-9876"}, argv


def test_an_env_file_that_cannot_be_read_teaches_nothing_and_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer: it is never opened
    for path in (str(fifo), str(tmp_path / "missing"), str(tmp_path)):
        assert redactor_for(["docker", "run", "--env-file", path, "img"], env={}).secrets == set()
    assert redactor_for(["docker", "run", "img", "--env-file"], env={}).secrets == set()  # no path after it


def test_an_env_file_is_read_up_to_its_bound(tmp_path: Path) -> None:
    assert MAX_ENV_FILE_BYTES == 1 << 20  # the bound docs/reliability.md states
    env = tmp_path / "big.env"
    env.write_bytes(f"HF_TOKEN={TOKEN}\n".encode() + b"#" * MAX_ENV_FILE_BYTES + b"\nAPI_KEY=beyond-the-bound\n")
    r = Redactor()
    r.add_from_env_file(str(env))
    assert r.secrets == {TOKEN}
