"""`inspect` read into a Container, on real podman output (tests/fixtures/containers, captured from podman
4.3.1): the init PID, the exit in the runtime's 128 + N convention, the published ports, the log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from firstlight.containers.runtime import Container, Runtime, RuntimeFailure, read_cidfile, runtime_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "containers"


def inspected(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / name).read_text())
    assert isinstance(data, list) and len(data) == 1
    return data[0]


def test_a_running_container_has_its_init_pid_ports_and_log():
    c = Container.from_inspect(inspected("podman-4.3.1-running-published.json"))
    assert c.running and c.status == "running"
    assert c.pid == 25406 and c.exit_code is None and not c.oom_killed
    assert c.ports == {8000: 18200}  # container port -> host port
    assert c.network_mode == "bridge"
    assert c.log_driver == "k8s-file" and c.log_path is not None and c.log_path.endswith("/userdata/ctr.log")
    assert c.command == ("/bin/sleep", "300") and c.image == "localhost/fl-busybox:test"
    assert c.cgroup is not None and c.cgroup.startswith("/libpod_parent/libpod-")
    assert c.health is None  # no health check: podman writes an empty status
    assert c.monitor_pid == 25396  # conmon: it holds the published port
    assert c.popen_exit_code() is None


def test_an_exit_of_137_is_a_death_by_sigkill():
    c = Container.from_inspect(inspected("podman-4.3.1-exited-137-memory-limit.json"))
    assert not c.running and c.pid is None
    assert c.exit_code == 137 and c.popen_exit_code() == -9
    assert c.ended() == "killed by SIGKILL (exit code 137)"


def test_oom_killed_is_named_with_the_exit():
    data = inspected("podman-4.3.1-exited-137-memory-limit.json")
    data["State"]["OOMKilled"] = True  # as Docker (and podman on cgroup v2) record the same death
    c = Container.from_inspect(data)
    assert c.oom_killed and c.ended() == "killed by SIGKILL (exit code 137); State.OOMKilled true"


def test_a_plain_exit_code_and_the_hosts_network():
    c = Container.from_inspect(inspected("podman-4.3.1-exited-3-host-network.json"))
    assert c.exit_code == 3 and c.popen_exit_code() == 3 and c.ended() == "exited with code 3"
    assert c.network_mode == "host" and c.ports == {}


def test_a_created_container_has_neither_pid_nor_exit():
    c = Container.from_inspect(inspected("podman-4.3.1-created.json"))
    assert c.status in ("created", "configured") and not c.running
    assert c.pid is None and c.exit_code is None and c.started_at is None


def test_the_k8s_file_log_is_framed_and_left_to_the_framing_reader():
    # podman's k8s-file log is CRI-framed (<RFC3339Nano> stdout F <line>): watch reads `podman logs`, which
    # prints the plain lines; the file itself is for firstlight.framing (issue 31 item 1)
    line = (FIXTURES / "podman-4.3.1-k8s-file-ctr.log").read_text().splitlines()[0]
    stamp, stream, tag, text = line.split(" ", 3)
    assert stamp.startswith("2026-12-02T") and (stream, tag, text) == ("stdout", "F", "bye")


def test_runtime_names_and_cidfiles(tmp_path: Path):
    assert runtime_of("/usr/bin/podman") == "podman" and runtime_of("docker") == "docker"
    assert runtime_of("dockerd") is None
    with pytest.raises(ValueError):
        Runtime("lxc")
    cid = tmp_path / "cid"
    assert read_cidfile(cid) is None
    cid.write_text("")
    assert read_cidfile(cid) is None  # created, not written yet
    cid.write_text("abc123\n")
    assert read_cidfile(cid) == "abc123"


def test_a_runtime_that_is_not_installed_fails_in_one_line(tmp_path: Path):
    runtime = Runtime("podman", binary=str(tmp_path / "no-such-podman"))
    with pytest.raises(RuntimeFailure, match="podman: not found on PATH"):
        runtime.inspect("x")
    with pytest.raises(RuntimeFailure, match="not a container name"):
        runtime.inspect("--all")
