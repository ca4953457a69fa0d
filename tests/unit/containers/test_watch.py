"""The container sampler's decisions, on the runtime's real answers replayed in order (podman 4.3.1's inspect
output in tests/fixtures/containers): a CLI that is done is not the server, a CLI that never made a container
is, and a container's end is named from its record."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from firstlight.config import Config, HistoryConfig, ProbeConfig
from firstlight.containers import watch
from firstlight.containers.command import parse_run
from firstlight.containers.runtime import Container, Runtime, RuntimeFailure
from firstlight.containers.watch import (
    ContainerLog,
    ContainerSampler,
    ContainerServer,
    ContainerSession,
    Tracker,
    _from_cli,
    describe,
)
from firstlight.engines import get_profile
from firstlight.redact import Redactor
from firstlight.report.base import QuietReporter
from firstlight.samplers.oom import memory_dirs
from firstlight.sim.fixtures import free_port
from firstlight.timeline import ProcessSample, SourceNote
from tests.support.common import drive, sim_cmd, wait_for
from tests.support.docker_engine import docker_engine

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "containers"
CHECK_S = 60  # deadlines far above what each wait needs


def record(name: str, **state: Any) -> Container:
    data = copy.deepcopy(json.loads((FIXTURES / name).read_text())[0])
    data["State"].update(state)
    return Container.from_inspect(data)


class Replayed(Runtime):
    """podman's answers to `inspect`, one per call, the last one repeated; a failure for a ref it never made."""

    def __init__(self, *answers: Container) -> None:
        super().__init__("podman", binary="/nonexistent/podman")
        self.answers = list(answers)
        self.calls = 0

    def inspect(self, ref: str) -> Container:
        self.calls += 1
        if not self.answers:
            raise RuntimeFailure(f"podman container inspect: no such container {ref}")
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_a_detached_cli_that_exited_0_is_not_the_servers_exit(tmp_path: Path) -> None:
    created = record("podman-4.3.1-created.json")
    running = record("podman-4.3.1-running-published.json", Pid=os.getpid())  # a live process: this test's
    (tmp_path / "cid").write_text(running.id)
    tracker = Tracker(Replayed(created, running), cidfile=tmp_path / "cid")
    assert tracker.get() == created  # a second ago: created, not started
    sampler = ContainerSampler(tracker, launcher_exit=lambda: 0)  # `podman run -d` is done
    out = sampler.sample()
    assert not [o for o in out if isinstance(o, ProcessSample) and not o.alive], out
    assert any(isinstance(o, ProcessSample) and o.alive for o in out)
    assert sampler.pid == os.getpid()


def test_a_cli_that_never_made_a_container_ends_the_start_with_its_code(tmp_path: Path) -> None:
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")  # no id written: the image was not found
    out = ContainerSampler(tracker, launcher_exit=lambda: 125).sample()
    dead = [o for o in out if isinstance(o, ProcessSample)]
    assert len(dead) == 1 and not dead[0].alive and dead[0].exit_code == 125
    assert any(isinstance(o, SourceNote) and "exited with code 125 before a container ran" in o.message for o in out)


def test_a_cli_that_is_still_creating_it_is_waited_for(tmp_path: Path) -> None:
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")
    assert ContainerSampler(tracker, launcher_exit=lambda: None).sample() == []


def test_a_container_that_ended_unseen_is_named_from_its_record(tmp_path: Path) -> None:
    ended = record("podman-4.3.1-exited-137-memory-limit.json")
    (tmp_path / "cid").write_text(ended.id)
    tracker = Tracker(Replayed(ended), cidfile=tmp_path / "cid")
    out = ContainerSampler(tracker, launcher_exit=lambda: 137).sample()
    dead = [o for o in out if isinstance(o, ProcessSample)]
    assert len(dead) == 1 and dead[0].exit_code == -9  # 137 = 128 + SIGKILL
    assert any(isinstance(o, SourceNote) and "killed by SIGKILL (exit code 137)" in o.message for o in out)


def test_inspect_is_asked_at_most_once_a_second(tmp_path: Path) -> None:
    running = record("podman-4.3.1-running-published.json")
    runtime = Replayed(running)
    tracker = Tracker(runtime, ref=running.id)
    for _ in range(20):
        tracker.get()
    assert runtime.calls == 1
    tracker.get(fresh=True)
    assert runtime.calls == 2


@pytest.mark.parametrize(("cli", "code"), [
    (None, None), (0, 0), (1, 1), (125, 125), (128, 128), (129, -1), (137, -9), (192, -64), (193, 193), (255, 255),
])
def test_the_clis_status_is_the_containers_128_plus_n_a_death_by_signal_n(cli: int | None, code: int | None) -> None:
    assert _from_cli(cli) == code


def test_the_end_is_the_runtimes_record_once_it_says_the_container_stopped(tmp_path: Path) -> None:
    running = record("podman-4.3.1-running-published.json")
    ended = record("podman-4.3.1-exited-137-memory-limit.json")
    runtime = Replayed(running, running, ended)
    tracker = Tracker(runtime, ref=running.id)
    assert tracker.ended(settle_s=CHECK_S) == ended and runtime.calls == 3  # asked afresh until it stopped
    still = Tracker(Replayed(running), ref=running.id)
    assert still.ended(settle_s=0.0) == running  # never recorded within the bound: the last state known


def test_a_container_removed_before_its_exit_was_read_ends_with_what_was_known() -> None:
    running = record("podman-4.3.1-running-published.json")
    runtime = Replayed(running)
    tracker = Tracker(runtime, ref=running.id)
    assert tracker.get() == running
    runtime.answers = []  # --rm: gone from inspect
    assert tracker.ended(settle_s=CHECK_S) == running and tracker.error is not None
    never = Tracker(Replayed(), ref="abc")
    assert never.ended(settle_s=CHECK_S) is None  # never seen: nothing to wait for


def test_a_removed_container_s_exit_is_the_clis_status(tmp_path: Path) -> None:
    """``--rm`` and attached: the container is gone before its exit was read; the CLI passes it on as it exits."""
    running = record("podman-4.3.1-running-published.json")
    runtime = Replayed(running)
    tracker = Tracker(runtime, ref=running.id)
    tracker.get()
    runtime.answers = []
    statuses = iter([None, None, 137])
    sampler = ContainerSampler(tracker, launcher_exit=lambda: next(statuses, 137))
    assert sampler._container_exit() == -9
    assert ContainerSampler(Tracker(Replayed(), ref="x"), launcher_exit=lambda: 2)._container_exit() == 2
    assert ContainerSampler(Tracker(Replayed(), ref="x"))._container_exit() is None


def test_a_container_is_described_by_what_its_runtime_says() -> None:
    c = Container.from_inspect(json.loads((FIXTURES / "docker-28.2.2-inspect-api-example.json").read_text())[0])
    docker = Runtime("docker", binary="/nonexistent/docker")
    bare = dataclasses.replace(c, pid=None, cgroup=None, log_driver=None, log_path=None, health=None, name="",
                               image=None)
    assert describe(bare, docker) == "docker container aa86eacfb3b3 (aa86eacfb3b3), image ?: init pid None"
    full = dataclasses.replace(c, pid=None, cgroup="/libpod_parent/libpod-x", log_path=None)
    assert describe(full, docker) == ("docker container funny_chatelet (aa86eacfb3b3), image example-image:1.0: init "
                                      "pid None; cgroup /libpod_parent/libpod-x; log local; health healthy")
    path_only = dataclasses.replace(bare, log_path="/var/log/ctr.log")
    assert describe(path_only, docker).endswith(": init pid None; log ? /var/log/ctr.log")
    mine = dataclasses.replace(bare, pid=os.getpid())  # a live process: its memory cgroup, read from /proc
    cgroups = memory_dirs(os.getpid())
    assert describe(mine, docker) == (f"docker container aa86eacfb3b3 (aa86eacfb3b3), image ?: init pid {os.getpid()}"
                                      + (f"; cgroup {cgroups[0]}" if cgroups else ""))


# -- watch --container in process, through the real docker CLI and an engine on a unix socket -------------------

def test_a_watched_container_is_its_init_process_its_log_and_its_oom_kill_as_the_engine_records_it(
        docker_host: Path) -> None:
    """The container's init is a real process here; the engine streams its log (multiplexed, as Docker does)
    and, once the process is SIGKILLed, records exit 137 with State.OOMKilled: the start is failed, oom, with
    the runtime's own record as the evidence."""
    init = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    record = io.StringIO()
    try:
        with docker_engine(docker_host) as engine:
            engine.container["State"]["Pid"] = init.pid
            engine.lines = [(2, "INFO Loading model weights"), (1, "hello from stdout")]
            runtime = Runtime("docker")
            c = runtime.inspect("funny_chatelet")
            tracker = Tracker(runtime, ref=c.id)
            tracker.last = c
            cfg = Config(pid=c.pid, watched_command=list(c.command), echo_server_output=False, sample_interval=0.2,
                         probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}"),
                         history=HistoryConfig(enabled=False))

            def oom_kill() -> None:  # after the log lines, or at once if they never come (the test fails then)
                engine.finish(137, oom_killed=True)
                os.kill(init.pid, signal.SIGKILL)

            errors = drive(lambda: wait_for(lambda: "hello from stdout" in record.getvalue(), CHECK_S,
                                            "the container's log lines"), oom_kill)
            session = ContainerSession(cfg, get_profile("generic"), QuietReporter(), Redactor(), tracker,
                                       record=record, since=c.started_at)
            o = session.run()
            assert not errors, errors
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(init.pid, signal.SIGKILL)
        init.wait(CHECK_S)
    assert (o.verdict, o.result.failure) == ("failed", "oom")
    values = [e["value"] for e in o.result.evidence]
    assert "OOM kill: docker inspect aa86eacfb3b3: State.OOMKilled true, killed by SIGKILL (exit code 137); " \
           "State.OOMKilled true" in values, values
    seen = [json.loads(line) for line in record.getvalue().splitlines()]
    logs = {(o["stream"], o["text"]) for o in seen if o["kind"] == "log"}
    assert logs == {("stderr", "INFO Loading model weights"), ("stdout", "hello from stdout")}  # demuxed
    notes = [o["message"] for o in seen if o["kind"] == "note" and o["source"] == "container"]
    assert notes[0].startswith(f"docker container funny_chatelet (aa86eacfb3b3), image example-image:1.0: init pid "
                               f"{init.pid}; ") and notes[0].endswith("; health healthy")
    assert any(n == "docker inspect aa86eacfb3b3: killed by SIGKILL (exit code 137); State.OOMKilled true"
               for n in notes), notes
    logs_asked = [path for method, path in engine.requests if "/logs?" in path]
    assert len(logs_asked) == 1 and "follow=1" in logs_asked[0] and "since=" in logs_asked[0]


def cli_stand_in() -> list[str]:
    """What runs as ``docker run`` (attached) here: a process that lives until stopped."""
    return [sys.executable, "-c", "import time; time.sleep(120)"]


def test_the_cli_lives_as_long_as_its_container_and_stopping_it_stops_the_container_first(
        docker_host: Path) -> None:
    init = subprocess.Popen(cli_stand_in(), start_new_session=True)
    try:
        with docker_engine(docker_host) as engine:
            engine.container["State"]["Pid"] = init.pid
            tracker = Tracker(Runtime("docker"), ref="funny_chatelet")
            server = ContainerServer(cli_stand_in(), tracker)
            server.start()
            assert server.poll() is None and server.how_to_stop == "docker stop aa86eacfb3b3"
            assert init.pid in [p.pid for p in server.tree()] and server.adopted() == []
            how = server.stop(2.6)
            assert engine.stops[0] == {"t": ["3"]}  # firstlight's own stop, with the grace asked for
            assert how == ("container stopped (docker stop -t 3 aa86eacfb3b3): killed by SIGTERM (exit code 143); "
                           "the docker CLI: stopped with SIGTERM")
            assert server.poll() == -signal.SIGTERM  # the CLI's own status, once stopping
    finally:
        init.kill()
        init.wait(CHECK_S)


def test_a_container_that_ended_is_not_stopped_again_and_its_exit_is_the_servers(docker_host: Path) -> None:
    with docker_engine(docker_host) as engine:
        engine.finish(3)
        tracker = Tracker(Runtime("docker"), ref="funny_chatelet")
        server = ContainerServer(cli_stand_in(), tracker)
        server.start()
        assert server.poll() == 3  # the container's exit, while the CLI still runs
        how = server.stop(1.0)
        assert how.startswith("container aa86eacfb3b3 already ended: exited with code 3; the docker CLI: ")
        # never stopped by firstlight; the backstop's stop when its pipe closes (grace 10 s) is a no-op to the engine
        assert all(stop == {"t": ["10"]} for stop in engine.stops), engine.stops


def test_a_cli_that_made_no_container_stops_alone(tmp_path: Path) -> None:
    tracker = Tracker(Runtime("docker", binary=str(tmp_path / "no-docker")), cidfile=tmp_path / "cid")
    server = ContainerServer(cli_stand_in(), tracker)
    server.start()
    assert server.how_to_stop == "docker stop (the container)"
    assert server.stop(1.0) == "no container was started; the docker CLI: stopped with SIGTERM"


# -- the sampler's other ends: created and never started, gone from inspect, the runtime's record of the end ----

def test_a_created_container_is_waited_for_while_its_cli_runs(tmp_path: Path) -> None:
    created = record("podman-4.3.1-created.json")
    (tmp_path / "cid").write_text(created.id)
    assert ContainerSampler(Tracker(Replayed(created), cidfile=tmp_path / "cid"),
                            launcher_exit=lambda: None).sample() == []
    running_unseen = dataclasses.replace(record("podman-4.3.1-running-published.json"), pid=None)
    assert ContainerSampler(Tracker(Replayed(running_unseen), cidfile=tmp_path / "cid"),
                            launcher_exit=lambda: 0).sample() == []  # runs, its init not read yet: still waited for


def test_a_container_its_cli_left_created_ends_the_start_with_the_clis_code(tmp_path: Path) -> None:
    """``podman run -d`` exited, and the container never started: the start ends with the CLI's status."""
    created = record("podman-4.3.1-created.json")
    (tmp_path / "cid").write_text(created.id)
    runtime = Replayed(created)
    out = ContainerSampler(Tracker(runtime, cidfile=tmp_path / "cid"), launcher_exit=lambda: 126).sample()
    assert runtime.calls == 2  # the second one fresh, once the CLI was seen done
    assert [o.message for o in out if isinstance(o, SourceNote)] == [
        f"container {created.short_id} ended before its processes were seen: status created"]
    dead = [o for o in out if isinstance(o, ProcessSample)]
    assert len(dead) == 1 and (dead[0].alive, dead[0].exit_code, dead[0].oom) == (False, 126, ())


def test_a_container_gone_from_inspect_is_named_by_its_id_and_the_clis_code(tmp_path: Path) -> None:
    cid = "4f1d9e7f0a8b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d"
    (tmp_path / "cid").write_text(cid + "\n")
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")
    out = ContainerSampler(tracker, launcher_exit=lambda: 1).sample()
    assert [o.message for o in out if isinstance(o, SourceNote)] == [
        f"container 4f1d9e7f0a8b is gone (podman container inspect: no such container {cid}); the CLI exited with 1"]
    assert [(o.alive, o.exit_code) for o in out if isinstance(o, ProcessSample)] == [(False, 1)]


def test_a_container_that_died_of_a_signal_carries_the_runtimes_oom_record(tmp_path: Path) -> None:
    killed = record("podman-4.3.1-exited-137-memory-limit.json", OOMKilled=True)
    (tmp_path / "cid").write_text(killed.id)
    out = ContainerSampler(Tracker(Replayed(killed), cidfile=tmp_path / "cid"), launcher_exit=lambda: 137).sample()
    dead = [o for o in out if isinstance(o, ProcessSample)]
    assert dead[0].exit_code == -9
    assert dead[0].oom[0] == (f"podman inspect {killed.short_id}: State.OOMKilled true, killed by SIGKILL "
                              "(exit code 137); State.OOMKilled true")
    exited = record("podman-4.3.1-exited-3-host-network.json", OOMKilled=True)  # an exit, not a kill: not read
    (tmp_path / "cid").write_text(exited.id)
    out = ContainerSampler(Tracker(Replayed(exited), cidfile=tmp_path / "cid"), launcher_exit=lambda: 3).sample()
    assert [(o.exit_code, o.oom) for o in out if isinstance(o, ProcessSample)] == [(3, ())]


def test_a_seen_container_s_end_is_told_from_the_runtimes_record_first(tmp_path: Path) -> None:
    """Its init (a real process here) is found, sampled, then ends: the runtime's record of the end comes first."""
    init = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        running = record("podman-4.3.1-running-published.json", Pid=init.pid)
        exited = record("podman-4.3.1-exited-3-host-network.json")
        runtime = Replayed(running)
        tracker = Tracker(runtime, ref=running.id)
        sampler = ContainerSampler(tracker, launcher_exit=lambda: None)
        first = sampler.sample()
        assert isinstance(first[0], SourceNote) and first[0].message.startswith(
            f"podman container {running.name} ({running.short_id}), image ")
        assert any(isinstance(o, ProcessSample) and o.alive for o in first)
        assert sampler.tracker.get() is running  # asked once: the found container is sampled, not inspected again
        assert runtime.calls == 1
        init.kill()
        init.wait(CHECK_S)
        runtime.answers = [exited]
        end = sampler.sample()
    finally:
        with contextlib.suppress(ProcessLookupError):
            init.kill()
        init.wait(CHECK_S)
    assert isinstance(end[0], SourceNote) and end[0].message == (
        f"podman inspect {exited.short_id}: exited with code 3")
    assert [(o.alive, o.exit_code) for o in end if isinstance(o, ProcessSample)] == [(False, 3)]
    assert sampler.sample() == []  # told once


# -- the container's log: `RUNTIME logs --follow`, through the real docker CLI ------------------------------------

class Lines:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, obs: Any) -> None:
        self.seen.append(obs)

    def texts(self) -> list[tuple[str, str]]:
        return [(o.stream, o.text) for o in list(self.seen) if hasattr(o, "text")]

    def notes(self) -> list[str]:
        return [o.message for o in list(self.seen) if isinstance(o, SourceNote)]


def test_the_log_is_followed_from_when_the_id_is_known_until_the_container_ends(
        docker_host: Path, tmp_path: Path) -> None:
    with docker_engine(docker_host) as engine:
        engine.lines = [(1, "INFO Started server process"), (2, "WARNING slow disk")]
        cid = str(engine.container["Id"])
        tracker = Tracker(Runtime("docker"), cidfile=tmp_path / "cid")
        lines = Lines()
        log = ContainerLog(tracker, lines, None, lambda: 0.0, None, since="2026-12-04T10:00:00Z")
        log.start()
        try:
            wait_for(lambda: log.thread.is_alive(), CHECK_S, "the log thread")
            assert log.popen is None and not engine.requests  # no id yet: nothing asked
            (tmp_path / "cid").write_text(cid)
            wait_for(lambda: len(lines.texts()) == 2, CHECK_S, "the container's two lines")
            engine.finish(0)
            log.settle(CHECK_S)
            assert log.popen is not None and log.popen.returncode == 0  # `logs --follow` ended with the container
        finally:
            log.stop()
    assert sorted(lines.texts()) == [("stderr", "WARNING slow disk"), ("stdout", "INFO Started server process")]
    asked = [path for method, path in engine.requests if "/logs?" in path]
    assert len(asked) == 1 and "follow=1" in asked[0] and "since=" in asked[0] and cid in asked[0]


def test_a_log_stopped_before_the_id_is_known_runs_nothing(tmp_path: Path) -> None:
    log = ContainerLog(Tracker(Replayed(), cidfile=tmp_path / "cid"), Lines(), None, lambda: 0.0, None)
    log.start()
    log.stop()
    log.thread.join(CHECK_S)
    assert not log.thread.is_alive() and log.popen is None


def test_a_runtime_that_cannot_run_its_logs_command_is_a_note(tmp_path: Path) -> None:
    lines = Lines()
    tracker = Tracker(Runtime("docker", binary=str(tmp_path / "no-docker")))
    tracker.last = record("podman-4.3.1-running-published.json")  # as `watch --container` starts: inspected
    log = ContainerLog(tracker, lines, None, lambda: 0.0, None)
    log.start()
    log.settle(CHECK_S)
    assert lines.notes() == [f"cannot run {tmp_path / 'no-docker'} logs: No such file or directory"]
    log.stop()  # nothing to stop


def test_a_log_still_following_is_stopped_with_the_watch(docker_host: Path) -> None:
    with docker_engine(docker_host) as engine:
        tracker = Tracker(Runtime("docker"), ref="funny_chatelet")
        assert tracker.get() is not None  # as `watch --container` starts: inspected
        log = ContainerLog(tracker, Lines(), None, lambda: 0.0, None)
        log.start()
        wait_for(lambda: any("/logs?" in path for _, path in engine.requests), CHECK_S, "the logs request")
        assert log.popen is not None and log.popen.poll() is None  # following: the container runs
        log.stop()
        assert log.popen.returncode is not None  # stopped, and waited for


def test_a_logs_command_that_ignores_sigterm_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CLI stuck on a daemon that does not answer, and deaf to SIGTERM: SIGKILL after LOGS_STOP_S."""
    monkeypatch.setattr(watch, "LOGS_STOP_S", 0.5)
    stuck = tmp_path / "docker"
    ready = tmp_path / "ready"
    stuck.write_text(f"#!/bin/sh\ntrap '' TERM\ntouch {ready}\nwhile :; do sleep 1; done\n")
    stuck.chmod(0o755)
    (tmp_path / "cid").write_text("abc")
    log = ContainerLog(Tracker(Runtime("docker", binary=str(stuck)), cidfile=tmp_path / "cid"), Lines(), None,
                       lambda: 0.0, None)
    log.start()
    wait_for(ready.exists, CHECK_S, "the logs command's TERM trap")
    assert log.popen is not None
    log.stop()
    assert log.popen.returncode == -signal.SIGKILL


# -- the CLI's status against the container's ---------------------------------------------------------------------

@pytest.mark.parametrize("status", ["created", "configured", "initialized"])
def test_a_container_not_started_yet_is_no_end_even_when_its_cli_exited(status: str, tmp_path: Path) -> None:
    created = record("podman-4.3.1-created.json", Status=status)
    tracker = Tracker(Replayed(created), ref=created.id)
    server = ContainerServer([sys.executable, "-c", "pass"], tracker)
    server.start()
    wait_for(lambda: server.cli_exit() is not None, CHECK_S, "the CLI's exit")
    assert server.cli_exit() == 0 and server.poll() is None
    server.stop(1.0)


def test_a_cli_whose_container_is_gone_from_inspect_ends_with_the_clis_status(tmp_path: Path) -> None:
    (tmp_path / "cid").write_text("4f1d9e7f0a8b")
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")
    server = ContainerServer([sys.executable, "-c", "raise SystemExit(5)"], tracker)
    server.start()
    wait_for(lambda: server.cli_exit() is not None, CHECK_S, "the CLI's exit")
    assert server.poll() == 5 and tracker.error is not None
    server.stop(1.0)


# -- up -- docker run -d, in process: the real docker CLI creates and starts the container on the engine stand-in,
# which runs its command (the simulated server) on the host -------------------------------------------------------

def test_up_docker_run_detached_watches_the_container_to_ready_then_stops_it(docker_host: Path,
                                                                              tmp_path: Path) -> None:
    port = free_port()
    argv = ["docker", "run", "-d", "--name", "srv", "-p", f"{port}:{port}", "example-image:1.0",
            *sim_cmd("normal", port, "--load-seconds", "0.3")]
    run = parse_run(argv)
    assert run is not None and run.detach
    launch = run.with_cidfile(tmp_path / "cid")
    record = io.StringIO()
    with docker_engine(docker_host) as engine:
        engine.lines = [(2, "INFO Loading model weights"), (2, "INFO The server is fired up and ready to roll!")]
        tracker = Tracker(Runtime("docker", run.argv[0]), ref=run.name, cidfile=launch.cidfile)
        cfg = Config(command=list(launch.argv), watched_command=run.inner, engine="sglang", after_ready="stop",
                     probe=ProbeConfig(url=f"http://127.0.0.1:{port}"), history=HistoryConfig(enabled=False),
                     sample_interval=0.2, echo_server_output=False)
        session = ContainerSession(cfg, get_profile("sglang"), QuietReporter(), Redactor(), tracker, launch,
                                   record=record)
        o = session.run()
        server = session.sources.server
        assert isinstance(server, ContainerServer)
        sim = engine.process
        assert sim is not None
    assert o.verdict == "ready", o.result.evidence
    assert server.argv == list(launch.argv)  # the CLI with the --cidfile added
    assert server.cli_exit() == 0  # `run -d` exits once the container started
    assert engine.created[0]["Cmd"] == run.inner and engine.created[0]["HostConfig"]["ContainerIDFile"] == str(
        tmp_path / "cid")
    assert engine.stops[0] == {"t": ["10"]}  # stopped after READY, with the grace (then the backstop's no-op)
    assert sim.returncode == 0  # the simulated server ends on SIGTERM as uvicorn does: exit 0
    assert server.stop(1.0).startswith("container stopped (docker stop -t 10 aa86eacfb3b3): exited with code 0; "
                                       "the docker CLI: already exited (code 0)")
    seen = [json.loads(line) for line in record.getvalue().splitlines()]
    assert ("stderr", "INFO Loading model weights") in {(r["stream"], r["text"]) for r in seen if r["kind"] == "log"}
    notes = [r["message"] for r in seen if r["kind"] == "note" and r["source"] == "container"]
    assert notes[0].startswith(f"docker container srv (aa86eacfb3b3), image example-image:1.0: init pid {sim.pid}")
    asked = [path for _, path in engine.requests if "/logs?" in path]
    assert len(asked) == 1 and "follow=1" in asked[0]  # detached: the log is the runtime's
