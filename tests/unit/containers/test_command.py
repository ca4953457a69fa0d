"""`docker run` / `podman run` command lines as the runtimes read them: the image, the command after it, the
options firstlight uses (--name, --cidfile, -d, --rm, -p, --network host), every other option skipped with its
value."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlight.containers.command import parse_run


def test_the_image_and_the_engines_command_after_it():
    run = parse_run(["podman", "run", "--rm", "-e", "HF_TOKEN=x", "-v", "/m:/m:ro", "--gpus", "all",
                     "-p", "8080:8000", "vllm/vllm-openai:v0.9", "--model", "/m/qwen", "--port", "8000"])
    assert run is not None
    assert run.runtime == "podman" and run.image == "vllm/vllm-openai:v0.9"
    assert run.inner == ["--model", "/m/qwen", "--port", "8000"]
    assert run.remove and not run.detach
    assert run.publish == ((8080, 8000),)
    assert run.host_port(8000) == 8080 and run.host_port(9000) is None


@pytest.mark.parametrize("argv, image", [
    (["docker", "container", "run", "-it", "img", "sh"], "img"),
    (["/usr/bin/docker", "run", "--name=x", "--shm-size", "16g", "img"], "img"),
    (["podman", "--log-level", "debug", "run", "-dit", "img:1", "cmd"], "img:1"),
    (["docker", "run", "--sig-proxy=false", "-p127.0.0.1:8080:80", "--", "img"], "img"),
    (["docker", "run", "-m", "4g", "--ipc=host", "--ulimit", "memlock=-1", "img", "--port", "1"], "img"),
])
def test_options_with_values_are_skipped_whole(argv: list[str], image: str):
    run = parse_run(argv)
    assert run is not None and run.image == image


def test_name_cidfile_detach_and_host_network():
    run = parse_run(["docker", "run", "-d", "--name", "srv", "--cidfile", "/tmp/c", "--network", "host", "img"])
    assert run is not None
    assert (run.name, run.cidfile, run.detach, run.network_host) == ("srv", Path("/tmp/c"), True, True)
    assert run.host_port(8000) == 8000  # the host's network: the container's port is the host's
    bridge = parse_run(["docker", "run", "--net=bridge", "img"])
    assert bridge is not None and not bridge.network_host and bridge.host_port(8000) is None


def test_a_cidfile_is_added_after_run_and_nothing_else_changes():
    run = parse_run(["podman", "run", "--rm", "-p", "8080:8080", "img", "llama-server", "--port", "8080"])
    assert run is not None
    added = run.with_cidfile(Path("/tmp/x/cid"))
    assert added.argv == ("podman", "run", "--cidfile", "/tmp/x/cid", "--rm", "-p", "8080:8080", "img",
                          "llama-server", "--port", "8080")
    assert added.cidfile == Path("/tmp/x/cid") and added.inner == run.inner and added.publish == run.publish


@pytest.mark.parametrize("argv", [
    ["llama-server", "-m", "m.gguf"],  # not a runtime
    ["docker", "ps"],  # not run
    ["podman", "run", "--rm"],  # no image
    ["docker", "run", "--name"],  # an option without its value
    ["dockerd", "run", "img"],
])
def test_other_commands_are_not_container_runs(argv: list[str]):
    assert parse_run(argv) is None
