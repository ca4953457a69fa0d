"""`docker run` / `podman run` command lines as the runtimes read them: the image, the command after it, the
options firstlight uses (--name, --cidfile, -d, --rm, -p, --network host), every other option skipped with its
value."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlight.containers.command import parse_run
from firstlight.engines import read_command
from firstlight.engines.command import CONTAINER_SWITCHES


def test_the_image_and_the_engines_command_after_it() -> None:
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
def test_options_with_values_are_skipped_whole(argv: list[str], image: str) -> None:
    run = parse_run(argv)
    assert run is not None and run.image == image


def test_name_cidfile_detach_and_host_network() -> None:
    run = parse_run(["docker", "run", "-d", "--name", "srv", "--cidfile", "/tmp/c", "--network", "host", "img"])
    assert run is not None
    assert (run.name, run.cidfile, run.detach, run.network_host) == ("srv", Path("/tmp/c"), True, True)
    assert run.host_port(8000) == 8000  # the host's network: the container's port is the host's
    bridge = parse_run(["docker", "run", "--net=bridge", "img"])
    assert bridge is not None and not bridge.network_host and bridge.host_port(8000) is None


def test_a_cidfile_is_added_after_run_and_nothing_else_changes() -> None:
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
def test_other_commands_are_not_container_runs(argv: list[str]) -> None:
    assert parse_run(argv) is None


# -- each form of each option, as the runtimes' own parsers (spf13/pflag) read it --------------------------------

@pytest.mark.parametrize(("spec", "published"), [
    ("8080:8000", (8080, 8000)),
    ("127.0.0.1:8080:8000", (8080, 8000)),
    ("8080:8000/tcp", (8080, 8000)),
    ("0.0.0.0:18200:8000/tcp", (18200, 8000)),
    ("[::1]:8080:8000", (8080, 8000)),
    ("[2001:db8::1]:9090:80/tcp", (9090, 80)),
    ("8080:8000/udp", None),  # not TCP: no HTTP server there
    ("8000", None),  # no host port: the runtime picks one, unknown from the command
    ("127.0.0.1::8000", None),  # a random host port on that address
    ("8080-8081:8000-8001", None),  # a range: not one port
])
def test_each_publish_spec_with_a_host_port_is_read(spec: str, published: tuple[int, int] | None) -> None:
    for argv in (["-p", spec], [f"--publish={spec}"], [f"-p{spec}"], ["--publish", spec]):
        run = parse_run(["docker", "run", *argv, "img"])
        assert run is not None and run.image == "img", argv
        assert run.publish == ((published,) if published else ()), argv


def test_every_publish_is_kept_in_order_and_the_first_for_a_port_wins() -> None:
    run = parse_run(["docker", "run", "-p", "1:80", "-p", "2:8000", "-p", "3:8000", "img"])
    assert run is not None and run.publish == ((1, 80), (2, 8000), (3, 8000))
    assert run.host_port(8000) == 2 and run.host_port(80) == 1


@pytest.mark.parametrize(("argv", "expect"), [
    (["--name=a=b"], {"name": "a=b"}),  # only the first = splits
    (["--name", "srv"], {"name": "srv"}),
    (["--cidfile=/run/c"], {"cidfile": Path("/run/c")}),
    (["--network=host"], {"network_host": True}),
    (["--net", "host"], {"network_host": True}),
    (["--network", "hostile"], {"network_host": False}),
    (["-d"], {"detach": True}),
    (["-dit"], {"detach": True}),
    (["-it"], {"detach": False}),
    (["--detach"], {"detach": True}),
    (["--detach=false"], {"detach": False}),
    (["--rm"], {"remove": True}),
    (["--rm=false"], {"remove": False}),
    (["--rm=true", "-d"], {"remove": True, "detach": True}),
])
def test_the_options_firstlight_uses_in_each_form(argv: list[str], expect: dict[str, object]) -> None:
    run = parse_run(["podman", "run", *argv, "img", "serve"])
    assert run is not None and run.image == "img" and run.inner == ["serve"]
    defaults = {"name": None, "cidfile": None, "detach": False, "remove": False, "network_host": False}
    assert {k: getattr(run, k) for k in defaults} == {**defaults, **expect}


@pytest.mark.parametrize(("argv", "image_at"), [
    (["docker", "-D", "run", "img"], 3),  # a global flag without a value
    (["docker", "--debug", "run", "img"], 3),
    (["docker", "--help", "run", "img"], 3),
    (["docker", "--version", "run", "img"], 3),
    (["docker", "--host=unix:///run/d.sock", "run", "img"], 3),
    (["docker", "-H", "tcp://h:2375", "run", "img"], 4),
    (["docker", "-H", "tcp://h:2375", "container", "run", "img"], 5),
    (["podman", "run", "-e", "A=1", "img"], 4),
    (["podman", "run", "-eA=1", "img"], 3),  # a short option with its value attached: one word
    (["podman", "run", "--env=A=1", "img"], 3),
    (["podman", "run", "-e", "A=1", "--", "img"], 5),
    (["podman", "run", "-", "x"], 2),  # "-" is a word, not an option: taken as the image
])
def test_global_options_and_option_values_are_skipped_to_the_image(argv: list[str], image_at: int) -> None:
    run = parse_run(argv)
    assert run is not None and run.image_at == image_at and run.image == argv[image_at]
    assert run.run_at == argv.index("run")


@pytest.mark.parametrize("argv", [
    ["docker"],
    ["docker", "-H"],  # a global option without its value, and no run
    ["docker", "container"],
    ["docker", "container", "ps"],
    ["docker", "run", "-e"],  # the last option's value is missing
    ["docker", "run", "--"],  # nothing after the end of options
    [],
])
def test_a_command_that_ends_before_its_image_is_no_container_run(argv: list[str]) -> None:
    assert parse_run(argv) is None


def test_an_options_value_holding_an_equals_sign_is_the_whole_value() -> None:
    run = parse_run(["docker", "run", "--cidfile=/tmp/x=y/cid", "--name=web", "img"])
    assert run is not None and run.cidfile == Path("/tmp/x=y/cid") and run.name == "web" and run.image == "img"


def test_a_short_option_with_its_value_attached_takes_one_word() -> None:
    run = parse_run(["docker", "run", "-u0", "-p8080:8000", "img", "--port", "8000"])
    assert run is not None and run.image == "img" and run.publish == ((8080, 8000),)


def test_only_publish_reads_a_port_spec_and_only_detach_detaches() -> None:
    run = parse_run(["docker", "run", "-l", "1:2", "--label", "3:4", "--read-only", "--rm", "img"])
    assert run is not None and run.publish == () and run.detach is False and run.remove is True


@pytest.mark.parametrize("switch", [*sorted(CONTAINER_SWITCHES), "-d", "-it", "-dit", "-P", "--rm=false"])
def test_the_launch_and_the_command_reader_agree_on_the_image_after_every_switch(switch: str):
    """One list of the options that take no value: the container launched and the server read from the same
    ``run`` find the same image, whatever switch comes before it."""
    argv = ["podman", "run", switch, "-p", "8000:8000", "vllm/vllm-openai:latest", "--model", "m"]
    run = parse_run(argv)
    assert run is not None and run.image == "vllm/vllm-openai:latest"
    read = read_command(argv)
    assert read.image == run.image and read.engine == "vllm" and read.reach_port == 8000


def test_podmans_systemd_option_takes_a_value():
    argv = ["podman", "run", "--systemd", "always", "img", "serve"]
    run = parse_run(argv)
    assert run is not None and run.image == "img" and read_command(argv).image == "img"
