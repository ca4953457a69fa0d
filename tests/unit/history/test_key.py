"""The deployment key (``firstlight.history.key``): what it takes from the command as the run read it. Its port-free
hash and the schema-1 migration are in test_key_and_migration.py."""

from __future__ import annotations

import dataclasses

from firstlight.engines import read_command
from firstlight.history.key import DeploymentKey

ARGV = ["vllm", "serve", "/models/qwen", "--port", "8000", "--max-model-len", "4096"]


def test_the_key_takes_the_command_as_the_run_already_read_it():
    """The run read the command with what only it knows (its environment, its engine's flags): the key keeps that
    reading, its parallelism, quantization and start flags, rather than reading the command again."""
    read = dataclasses.replace(read_command(ARGV, engine="vllm"), tp=4, pp=2, quantization="fp8",
                               start_flags=("serve", "/models/qwen", "--max-model-len", "8192"))
    key = DeploymentKey.create("vllm", "/models/qwen", ARGV, 8, server=read)
    assert (key.parallelism, key.quantization, key.start_flags) == ("tp=4 pp=2", "fp8",
                                                                  "serve /models/qwen --max-model-len 8192")
    again = DeploymentKey.create("vllm", "/models/qwen", ARGV, 8)  # without it: read here, the same command
    assert (again.parallelism, again.quantization, again.start_flags) == (None, None,
                                                                        "serve /models/qwen --max-model-len 4096")
    assert key.hash != again.hash and key.command == again.command
