"""`inspect` read into a Container, on real podman output (tests/fixtures/containers, captured from podman
4.3.1): the init PID, the exit in the runtime's 128 + N convention, the published ports, the log."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from firstlight.containers.runtime import Container, Runtime, RuntimeFailure, read_cidfile, runtime_of
from tests.support.docker_engine import API_VERSION, docker_engine

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "containers"


def inspected(name: str) -> dict[str, Any]:
    data = json.loads((FIXTURES / name).read_text())
    assert isinstance(data, list) and len(data) == 1
    return data[0]


def test_a_running_container_has_its_init_pid_ports_and_log() -> None:
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


def test_an_exit_of_137_is_a_death_by_sigkill() -> None:
    c = Container.from_inspect(inspected("podman-4.3.1-exited-137-memory-limit.json"))
    assert not c.running and c.pid is None
    assert c.exit_code == 137 and c.popen_exit_code() == -9
    assert c.ended() == "killed by SIGKILL (exit code 137)"


def test_oom_killed_is_named_with_the_exit() -> None:
    data = inspected("podman-4.3.1-exited-137-memory-limit.json")
    data["State"]["OOMKilled"] = True  # as Docker (and podman on cgroup v2) record the same death
    c = Container.from_inspect(data)
    assert c.oom_killed and c.ended() == "killed by SIGKILL (exit code 137); State.OOMKilled true"


def test_a_plain_exit_code_and_the_hosts_network() -> None:
    c = Container.from_inspect(inspected("podman-4.3.1-exited-3-host-network.json"))
    assert c.exit_code == 3 and c.popen_exit_code() == 3 and c.ended() == "exited with code 3"
    assert c.network_mode == "host" and c.ports == {}


def test_a_created_container_has_neither_pid_nor_exit() -> None:
    c = Container.from_inspect(inspected("podman-4.3.1-created.json"))
    assert c.status in ("created", "configured") and not c.running
    assert c.pid is None and c.exit_code is None and c.started_at is None


def test_the_k8s_file_log_is_framed_and_left_to_the_framing_reader() -> None:
    # podman's k8s-file log is CRI-framed (<RFC3339Nano> stdout F <line>): watch reads `podman logs`, which
    # prints the plain lines; the file itself is for firstlight.framing (issue 31 item 1)
    line = (FIXTURES / "podman-4.3.1-k8s-file-ctr.log").read_text().splitlines()[0]
    stamp, stream, tag, text = line.split(" ", 3)
    assert stamp.startswith("2026-12-02T") and (stream, tag, text) == ("stdout", "F", "bye")


def test_runtime_names_and_cidfiles(tmp_path: Path) -> None:
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


def test_a_runtime_that_is_not_installed_fails_in_one_line(tmp_path: Path) -> None:
    runtime = Runtime("podman", binary=str(tmp_path / "no-such-podman"))
    with pytest.raises(RuntimeFailure, match="podman: not found on PATH"):
        runtime.inspect("x")
    with pytest.raises(RuntimeFailure, match="not a container name"):
        runtime.inspect("--all")


# -- Docker's shapes, and the real docker CLI against an engine on a unix socket -----------------------------------

def test_a_docker_container_has_its_health_log_path_image_and_published_tcp_ports() -> None:
    c = Container.from_inspect(inspected("docker-28.2.2-inspect-api-example.json"))
    assert (c.id, c.short_id, c.name) == ("aa86eacfb3b3ed4cd362c1e88fc89a53908ad05fb3a4103bca3f9b28292d14bf",
                                          "aa86eacfb3b3", "funny_chatelet")
    assert c.running and c.status == "running" and c.pid == 1234 and c.exit_code is None
    assert c.health == "healthy" and c.started_at == "2020-01-06T09:06:59.461876391Z"
    assert c.log_path is not None and c.log_path.endswith("-json.log") and c.log_driver == "local"
    assert c.image == "example-image:1.0" and c.command == ("/bin/sh",)  # Entrypoint [] and Cmd
    assert c.ports == {443: 4443, 80: 80}  # TCP only, the first binding of each, a null one skipped
    assert c.cgroup is None and c.monitor_pid is None  # podman's own fields
    assert c.ended() == "status running"


def changed(name: str, **state: Any) -> dict[str, Any]:
    """A captured inspect with some State fields changed (None: removed)."""
    data = inspected(name)
    for k, v in state.items():
        if v is None:
            data["State"].pop(k, None)
        else:
            data["State"][k] = v
    return data


@pytest.mark.parametrize(("state", "pid", "exit_code"), [
    ({}, 1234, None),
    ({"Pid": 0}, None, None),  # a running container always has one: 0 is none
    ({"Running": False, "Status": "exited", "ExitCode": 1}, None, 1),  # a pid left behind is no process
    ({"Running": False, "Status": "stopped", "ExitCode": 2}, None, 2),  # podman's word
    ({"Running": False, "Status": "dead", "ExitCode": 137}, None, 137),
    ({"Running": False, "Status": "created", "StartedAt": "0001-01-01T00:00:00Z", "ExitCode": 0}, None, None),
    ({"Running": False, "Status": "paused", "ExitCode": 0}, None, 0),  # not running, and it had started
    ({"Running": False, "Status": "exited", "ExitCode": "1"}, None, None),  # not a number: unknown
])
def test_the_pid_is_the_running_inits_and_the_exit_code_one_that_ended(state: dict[str, Any], pid: int | None,
                                                                         exit_code: int | None) -> None:
    c = Container.from_inspect(changed("docker-28.2.2-inspect-api-example.json", **state))
    assert (c.pid, c.exit_code) == (pid, exit_code)


def test_a_never_started_container_has_no_start_time() -> None:
    c = Container.from_inspect(changed("docker-28.2.2-inspect-api-example.json", StartedAt="0001-01-01T00:00:00Z"))
    assert c.started_at is None


def test_podmans_healthcheck_key_and_a_docker_without_a_health_check() -> None:
    data = changed("docker-28.2.2-inspect-api-example.json", Health=None)
    assert Container.from_inspect(data).health is None
    data["State"]["Healthcheck"] = {"Status": "starting"}  # podman's older key
    assert Container.from_inspect(data).health == "starting"
    data["State"]["Health"] = {"Status": ""}  # Docker's, there and empty, comes first
    assert Container.from_inspect(data).health is None


def test_where_the_log_image_and_command_are_read_from_when_docker_and_podman_differ() -> None:
    data = inspected("docker-28.2.2-inspect-api-example.json")
    data.pop("LogPath")
    data["HostConfig"]["LogConfig"]["Path"] = "/var/lib/containers/x/ctr.log"  # podman's place
    data["ImageName"] = "localhost/engine:1"  # podman's name as asked for, before Config.Image
    data["Config"]["Entrypoint"] = "/entry"  # a string: one word
    data["Config"]["Cmd"] = ["--model", "/m"]
    c = Container.from_inspect(data)
    assert c.log_path == "/var/lib/containers/x/ctr.log" and c.image == "localhost/engine:1"
    assert c.command == ("/entry", "--model", "/m")
    data["Config"]["Entrypoint"], data["Config"]["Cmd"] = "", None  # podman's none, and null
    assert Container.from_inspect(data).command == ()
    data["HostConfig"]["LogConfig"] = {}
    data.pop("ImageName")
    data["Config"].pop("Image")
    c = Container.from_inspect(data)
    assert c.log_path is None and c.log_driver is None and c.image is None


def test_podmans_monitor_pid_counts_only_when_there_is_one() -> None:
    for conmon, expect in ((25396, 25396), (0, None), ("25396", None)):
        data = changed("podman-4.3.1-running-published.json", ConmonPid=conmon)
        assert Container.from_inspect(data).monitor_pid == expect


def test_the_bindings_asked_for_are_the_ports_of_a_container_not_running_yet() -> None:
    data = inspected("docker-28.2.2-inspect-api-example.json")
    data["NetworkSettings"]["Ports"] = None  # created, never started: nothing bound yet
    data["HostConfig"]["PortBindings"] = {"8000/tcp": [{"HostIp": "", "HostPort": "18000"}],
                                         "9000": [{"HostPort": ""}], "x/tcp": [{"HostPort": "1"}]}
    assert Container.from_inspect(data).ports == {8000: 18000}


@pytest.mark.parametrize(("exit_code", "oom", "said", "popen"), [
    (0, False, "exited with code 0", 0),
    (1, False, "exited with code 1", 1),
    (128, False, "exited with code 128", 128),
    (129, False, "killed by SIGHUP (exit code 129)", -1),
    (137, True, "killed by SIGKILL (exit code 137); State.OOMKilled true", -9),
    (139, False, "killed by SIGSEGV (exit code 139)", -11),
    (192, False, "killed by SIGRTMAX (exit code 192)", -64),
    (193, False, "killed by signal 65 (exit code 193)", 193),  # no such signal: the code as it is
])
def test_an_exit_code_above_128_is_a_death_by_signal(exit_code: int, oom: bool, said: str, popen: int) -> None:
    c = Container.from_inspect(changed("docker-28.2.2-inspect-api-example.json", Running=False, Status="exited",
                                       ExitCode=exit_code, OOMKilled=oom))
    assert (c.ended(), c.popen_exit_code()) == (said, popen)


def test_the_real_docker_cli_inspects_a_container_through_the_engine(docker_host: Path) -> None:
    with docker_engine(docker_host) as engine:
        c = Runtime("docker").inspect("funny_chatelet")
    assert c.pid == 1234 and c.health == "healthy" and c.ports == {443: 4443, 80: 80}
    assert ("GET", f"/v{API_VERSION}/containers/funny_chatelet/json") in engine.requests


def test_an_unknown_container_is_the_engines_own_line(docker_host: Path) -> None:
    with docker_engine(docker_host), pytest.raises(RuntimeFailure) as e:
        Runtime("docker").inspect("no-such")
    assert str(e.value) == "docker container inspect: Error response from daemon: No such container: no-such"


def test_a_daemon_that_is_not_running_is_the_clis_own_line(docker_host: Path) -> None:
    with pytest.raises(RuntimeFailure) as e:
        Runtime("docker").inspect("x")
    assert str(e.value) == (f"docker container inspect: Cannot connect to the Docker daemon at unix://{docker_host}."
                            " Is the docker daemon running?")


def test_a_daemon_that_never_answers_is_a_timeout_never_a_hang(docker_host: Path) -> None:
    with docker_engine(docker_host, hang=True), pytest.raises(RuntimeFailure) as e:
        Runtime("docker", timeout=0.5).inspect("x")
    assert str(e.value) == "docker container inspect: no answer within 0.5s"


def test_stop_asks_the_engine_to_stop_with_the_grace_in_whole_seconds(docker_host: Path) -> None:
    with docker_engine(docker_host) as engine:
        said = Runtime("docker").stop("aa86eacfb3b3ed4cd362c1e88fc89a53908ad05fb3a4103bca3f9b28292d14bf", 2.6)
    assert said == "docker stop -t 3 aa86eacfb3b3"
    assert engine.stops == [{"t": ["3"]}]
    with docker_engine(docker_host), pytest.raises(RuntimeFailure, match=r"^docker stop: .*No such container"):
        Runtime("docker").stop("nope", 0.2)


def die_event(cid: str, code: str) -> dict[str, Any]:
    """A ``die`` message as the Engine API documents its EventMessage (API 1.50)."""
    return {"Type": "container", "Action": "die",
            "Actor": {"ID": cid, "Attributes": {"exitCode": code, "image": "vllm/vllm-openai", "name": "vllm"}},
            "scope": "local", "time": 1796686137, "timeNano": 1796686137879547482}


def test_the_exit_of_a_death_is_read_from_the_engines_die_event(docker_host: Path) -> None:
    with docker_engine(docker_host) as engine:
        cid = str(engine.container["Id"])
        engine.events = [die_event(cid, "1"), die_event(cid, "3")]
        assert Runtime("docker").died(cid, "2026-12-07T23:28:56Z", "2026-12-07T23:28:57.9Z") == 3  # the last
        engine.events = []
        assert Runtime("docker").died(cid, "2026-12-07T23:28:56Z", "2026-12-07T23:28:57.9Z") is None
    asked = [path for method, path in engine.requests if "/events" in path]
    assert len(asked) == 2 and "since=" in asked[0] and "until=" in asked[0] and "die" in unquote(asked[0])


# podman 4.3.1's `events --stream=false --filter container=t1 --filter event=died --format json` (file events):
# a container with --restart on-failure:2 whose three starts each exited 3
PODMAN_DIED = """\
{"ContainerExitCode":3,"ID":"b39883e73abec452fa80b93fdbf1ada9e583d7bcd031d426cd464615ac28002d","Image":"localhost/fltest:1","Name":"t1","Status":"died","Time":"2026-12-07T23:28:57.879547482Z","Type":"container","Attributes":{}}
{"ContainerExitCode":3,"ID":"b39883e73abec452fa80b93fdbf1ada9e583d7bcd031d426cd464615ac28002d","Image":"localhost/fltest:1","Name":"t1","Status":"died","Time":"2026-12-07T23:28:59.89081994Z","Type":"container","Attributes":{}}
{"ContainerExitCode":3,"ID":"b39883e73abec452fa80b93fdbf1ada9e583d7bcd031d426cd464615ac28002d","Image":"localhost/fltest:1","Name":"t1","Status":"died","Time":"2026-12-07T23:32:20.01454228Z","Type":"container","Attributes":{}}
"""


def test_podmans_died_events_give_the_last_exit_before_the_next_start(tmp_path: Path) -> None:
    """podman 4.3's --until drops every event before it too, so the window's end is applied to each event's Time."""
    fake = tmp_path / "podman"
    (tmp_path / "out").write_text(PODMAN_DIED.replace('"ContainerExitCode":3', '"ContainerExitCode":1', 1))
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'args'}\ncat {tmp_path / 'out'}\n")
    fake.chmod(0o755)
    r = Runtime("podman", binary=str(fake))
    assert r.died("t1", "2026-12-07T23:28:56.7Z", "2026-12-07T23:28:57.947865899Z") == 1  # the first start's
    assert (tmp_path / "args").read_text().split() == [
        "events", "--stream=false", "--filter", "container=t1", "--filter", "event=died", "--since",
        "2026-12-07T23:28:56.7Z", "--format", "json"]
    assert r.died("t1", "2026-12-07T23:28:56.7Z", "2026-12-07T23:30:00Z") == 3  # the second's: the last before
    assert r.died("t1", "2026-12-07T23:28:56.7Z", "2026-12-07T23:28:57Z") is None  # none yet


def test_the_logs_command_follows_from_a_moment_if_asked() -> None:
    r = Runtime("podman", binary="/usr/bin/podman")
    assert r.logs_argv("abc") == ["/usr/bin/podman", "logs", "--follow", "--timestamps", "abc"]
    assert r.logs_argv("abc", since="2026-12-04T10:00:00Z") == ["/usr/bin/podman", "logs", "--follow",
                                                                 "--timestamps", "--since", "2026-12-04T10:00:00Z",
                                                                 "abc"]
    assert repr(r) == "Runtime('podman')"


def test_a_binary_that_cannot_run_is_one_line(tmp_path: Path) -> None:
    not_exec = tmp_path / "docker"
    not_exec.write_text("#!/bin/sh\n")  # not executable
    with pytest.raises(RuntimeFailure) as e:
        Runtime("docker", binary=str(not_exec)).inspect("x")
    assert str(e.value) == "docker: cannot run it (Permission denied)"


def test_a_failure_without_a_word_on_stderr_says_its_exit_status(tmp_path: Path) -> None:
    quiet = tmp_path / "podman"
    quiet.write_text("#!/bin/sh\nexit 125\n")
    quiet.chmod(0o755)
    with pytest.raises(RuntimeFailure) as e:
        Runtime("podman", binary=str(quiet)).inspect("x")
    assert str(e.value) == "podman container inspect: exit status 125"


@pytest.mark.parametrize(("status", "exit_code"), [("exited", 3), ("stopped", 3), ("dead", 3), ("created", None)])
def test_a_container_that_ended_is_exited_stopped_or_dead_even_with_no_start_time(status: str,
                                                                                   exit_code: int | None) -> None:
    """A start that failed leaves no start time: its status alone says it ended (a created one has not)."""
    c = Container.from_inspect(changed("docker-28.2.2-inspect-api-example.json", Running=False, Status=status,
                                       StartedAt="0001-01-01T00:00:00Z", ExitCode=3))
    assert c.exit_code == exit_code


def test_what_the_runtime_did_not_say_is_blank_and_its_end_unknown() -> None:
    data = changed("docker-28.2.2-inspect-api-example.json", Running=False, Status=None, ExitCode="?")
    data.pop("Id")
    data["Name"] = "/XL-server"
    c = Container.from_inspect(data)
    assert (c.id, c.name, c.status, c.exit_code) == ("", "XL-server", "", None)
    assert c.ended() == "status unknown"


def fake_runtime(tmp_path: Path, script: str) -> Runtime:
    """A podman binary that is this shell script."""
    binary = tmp_path / "podman"
    binary.write_text("#!/bin/sh\n" + script)
    binary.chmod(0o755)
    return Runtime("podman", binary=str(binary))


def test_a_runtimes_words_are_read_whatever_their_bytes_and_its_error_cut_at_300_characters(tmp_path: Path) -> None:
    long = "x" * 400
    with pytest.raises(RuntimeFailure) as e:
        fake_runtime(tmp_path, f"printf 'first\\n\\377{long}' >&2; exit 1\n").inspect("abc")
    assert str(e.value) == "podman container inspect: \ufffd" + "x" * 299  # the last line said, cut
    c = fake_runtime(tmp_path, "printf '[{\"Id\": \"ab\\377c\", \"State\": {}}]'\n").inspect("abc")
    assert c.id == "ab\ufffdc"


@pytest.mark.parametrize(("out", "said"), [("garbage", "not JSON"), ("[]", "no such container"),
                                           ('{"Id": "abc"}', "no such container"), ("[1]", "no such container")])
def test_an_inspect_that_is_not_a_list_of_containers_says_so(tmp_path: Path, out: str, said: str) -> None:
    with pytest.raises(RuntimeFailure) as e:
        fake_runtime(tmp_path, f"printf '%s' '{out}'\n").inspect("abc")
    assert str(e.value) == f"podman inspect abc: {said}"


def test_a_grace_under_half_a_second_is_a_stop_without_waiting(tmp_path: Path) -> None:
    assert fake_runtime(tmp_path, "exit 0\n").stop("abc", 0.2) == "podman stop -t 0 abc"


def test_the_runtime_reads_nothing_of_firstlights_stdin(tmp_path: Path) -> None:
    r, w = os.pipe()
    os.write(w, b"typed-by-the-operator\n")
    saved = os.dup(0)
    os.dup2(r, 0)  # firstlight's stdin holds a line (a terminal, a script's input): never the runtime's
    try:
        with pytest.raises(RuntimeFailure) as e:
            fake_runtime(tmp_path, "read -r line; echo \"read:$line\" >&2; exit 1\n").inspect("abc")
    finally:
        os.dup2(saved, 0)
        for fd in (saved, r, w):
            os.close(fd)
    assert str(e.value) == "podman container inspect: read:"


def test_the_published_port_is_the_one_the_runtime_chose_over_the_one_asked_for() -> None:
    """`-p 8000`: the binding asked for has no host port; the running container's own record has the one chosen.
    A UDP port before it is skipped, not the end of the reading."""
    data = inspected("docker-28.2.2-inspect-api-example.json")
    data["HostConfig"]["PortBindings"] = {"8000/tcp": [{"HostIp": "", "HostPort": ""}]}
    data["NetworkSettings"]["Ports"] = {"53/udp": [{"HostIp": "0.0.0.0", "HostPort": "5353"}],
                                        "8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "32768"}]}
    assert Container.from_inspect(data).ports == {8000: 32768}


def test_a_runtime_is_docker_or_podman_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError) as e:
        Runtime("lxc")
    assert str(e.value) == "unknown container runtime 'lxc' (docker or podman)"
    binary = fake_runtime(tmp_path, "exit 0\n").binary
    monkeypatch.setenv("PATH", str(tmp_path))
    assert Runtime("podman").binary == binary == str(tmp_path / "podman")  # the path found, run as found


def test_a_stop_the_daemon_never_answers_is_bounded_by_the_grace_and_the_runtimes_own_time(
        docker_host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("firstlight.containers.runtime.STOP_EXTRA_S", 0.5)
    with docker_engine(docker_host, hang=True), pytest.raises(RuntimeFailure) as e:
        Runtime("docker").stop("abc", 0.2)
    assert str(e.value) == "docker stop: no answer within 0.7s"
