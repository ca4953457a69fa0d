"""The container sampler's decisions, on the runtime's real answers replayed in order (podman 4.3.1's inspect
output in tests/fixtures/containers): a CLI that is done is not the server, a CLI that never made a container
is, and a container's end is named from its record."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psutil
import pytest

from firstlight.config import Config, HistoryConfig, JudgeConfig, ProbeConfig
from firstlight.containers import watch
from firstlight.containers.command import parse_run
from firstlight.containers.runtime import Container, Runtime, RuntimeFailure
from firstlight.containers.watch import (
    ContainerLog,
    ContainerOom,
    ContainerSampler,
    ContainerServer,
    ContainerSources,
    Tracker,
    _from_cli,
    container_oom,
    container_sources,
    describe,
)
from firstlight.engines import get_profile
from firstlight.framing import parse_rfc3339
from firstlight.logtext import LineEvent
from firstlight.redact import Redactor
from firstlight.report.base import QuietReporter
from firstlight.runner.session import Session
from firstlight.samplers.base import idle_cap
from firstlight.samplers.oom import kernel_log_cgroup_kills, memory_dirs
from firstlight.sim.fixtures import free_port
from firstlight.timeline import ProcessSample, SourceNote
from tests.support.common import drive, sim_cmd, wait_for
from tests.support.docker_engine import Engine, docker_engine

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
            session = Session(cfg, get_profile("generic"), QuietReporter(), Redactor(), record,
                              sources=container_sources(tracker, since=c.started_at))
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


@contextlib.contextmanager
def container_and_cli(docker_host: Path) -> Iterator[tuple[Engine, Tracker, ContainerServer, int]]:
    """The engine's container running (its init a real process of the test's) and its CLI (a stand-in, attached)
    launched: the engine, the tracker, the CLI's server and the init's pid."""
    init = subprocess.Popen(cli_stand_in(), start_new_session=True)
    try:
        with docker_engine(docker_host) as engine:
            engine.container["State"]["Pid"] = init.pid
            tracker = Tracker(Runtime("docker"), ref="funny_chatelet")
            server = ContainerServer(cli_stand_in(), tracker)
            server.start()
            yield engine, tracker, server, init.pid
    finally:
        init.kill()
        init.wait(CHECK_S)


def test_the_cli_lives_as_long_as_its_container_and_stopping_it_stops_the_container_first(
        docker_host: Path) -> None:
    with container_and_cli(docker_host) as (engine, _, server, init):
        assert server.poll() is None and server.how_to_stop == "docker stop aa86eacfb3b3"
        assert init in [p.pid for p in server.tree()] and server.adopted() == []
        how = server.stop(2.6)
        assert engine.stops[0] == {"t": ["3"]}  # firstlight's own stop, with the grace asked for
        assert how == ("container stopped (docker stop -t 3 aa86eacfb3b3): killed by SIGTERM (exit code 143); "
                       "the docker CLI: stopped with SIGTERM")
        assert server.poll() == -signal.SIGTERM  # the CLI's own status, once stopping


def test_a_container_that_ended_is_not_stopped_again_and_its_exit_is_the_servers(docker_host: Path) -> None:
    with docker_engine(docker_host) as engine:
        engine.finish(3)
        tracker = Tracker(Runtime("docker"), ref="funny_chatelet")
        server = ContainerServer(cli_stand_in(), tracker)
        server.start()
        assert server.poll() == 3  # the container's exit, while the CLI still runs
        how = server.stop(1.0)
        assert how.startswith("container aa86eacfb3b3 already ended: exited with code 3; the docker CLI: ")
        assert server.poll() == -signal.SIGTERM  # once stopping: the CLI's own status, not the container's 3
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
        assert isinstance(sampler._oom, ContainerOom) and sampler._oom.pid == init.pid  # the init's OOM traces
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


S1, S1_END, S2 = "2026-12-07T23:28:56.722786993Z", "2026-12-07T23:28:57.846560362Z", "2026-12-07T23:28:57.947865899Z"


def restarted(engine: Engine) -> None:
    """The engine's container as it is once its restart policy started it again: the second start runs, the
    first's end kept in FinishedAt, ExitCode reset to 0 (as podman 4.3 showed it; Docker's SetRunning too)."""
    engine.container["HostConfig"]["RestartPolicy"] = {"Name": "on-failure", "MaximumRetryCount": 3}
    engine.container["RestartCount"] = 1
    engine.container["State"].update({"Status": "running", "Running": True, "Pid": os.getpid(), "ExitCode": 0,
                                      "StartedAt": S2, "FinishedAt": S1_END})


def test_a_restarted_containers_log_keeps_the_watched_starts_lines_only(docker_host: Path) -> None:
    """`logs --follow` read on from before the start (the --since slack) and into the next one: each line is
    placed by the time the engine stamped it, against the boundaries of the start watched."""
    with docker_engine(docker_host) as engine:
        engine.lines = [(2, "RuntimeError: start 0 failed", "2026-12-07T23:28:56.100000000Z"),
                        (1, "INFO loading the weights, start 1", "2026-12-07T23:28:56.741656434Z"),
                        (2, "RuntimeError: start 1 failed", "2026-12-07T23:28:57.847014756Z"),
                        (1, "INFO loading the weights, start 2", "2026-12-07T23:28:57.955875081Z")]
        restarted(engine)
        tracker = Tracker(Runtime("docker"), ref=str(engine.container["Id"]))
        tracker.watching = S1
        assert tracker.get() is not None  # as `watch --container` starts: inspected
        tracker.known_at = parse_rfc3339(S1)  # ... when the first start ran: the later lines ask again
        lines = Lines()
        log = ContainerLog(tracker, lines, None, lambda: 0.0, None, since="2026-12-07T23:28:56.5Z")
        log.start()
        try:
            wait_for(lambda: log.popen is not None, CHECK_S, "the logs command")
            engine.ended.set()
            log.settle(CHECK_S)
        finally:
            log.stop()
    assert sorted(lines.texts()) == [("stderr", "RuntimeError: start 1 failed"),
                                     ("stdout", "INFO loading the weights, start 1")]
    assert log.until == pytest.approx(parse_rfc3339("2026-12-07T23:28:57.897213Z"), abs=1e-6)
    assert [o.lineno for o in lines.seen] == [1, 1]  # each stream numbered from the start's own first line


def test_a_start_the_runtime_restarted_ends_with_the_exit_its_die_event_recorded(docker_host: Path) -> None:
    """The restart came before the sampler's next look: the runtime's state is the next start's (ExitCode
    reset), so the watched start's exit is read from the runtime's event of its death."""
    with docker_engine(docker_host) as engine:
        cid = str(engine.container["Id"])
        restarted(engine)
        engine.events = [{"Type": "container", "Action": "die", "Actor": {"ID": cid, "Attributes": {
            "exitCode": "3", "name": "vllm"}}, "scope": "local", "time": 1796686137}]
        tracker = Tracker(Runtime("docker"), ref=cid)
        tracker.watching = S1
        out = ContainerSampler(tracker).sample()  # its processes never seen: the start before them had ended
        assert ContainerSampler(tracker)._container_exit() == 3  # as the tree sampler asks once its root is gone
        engine.events = []
        unknown = ContainerSampler(tracker).sample()
    dead = [o for o in out if isinstance(o, ProcessSample)]
    assert [(o.alive, o.exit_code) for o in dead] == [(False, 3)]
    note = next(o.message for o in out if isinstance(o, SourceNote))
    assert note == (f"docker container {cid[:12]}: the start of {S1} ended, the runtime started it again at {S2} "
                    "(restart 1, policy on-failure); docker events: died with exit code 3")
    assert [(o.alive, o.exit_code) for o in unknown if isinstance(o, ProcessSample)] == [(False, None)]
    assert any(isinstance(o, SourceNote) and o.message.endswith("docker events: no record of its death")
               for o in unknown)
    asked = [parse_qs(urlsplit(path).query) for _, path in engine.requests if "/events" in path]
    # the window: from the watched start to the next one (the CLI sends both as POSIX seconds)
    assert asked and all(float(q["since"][0]) == pytest.approx(parse_rfc3339(S1), abs=1e-3)
                         and float(q["until"][0]) == pytest.approx(parse_rfc3339(S2), abs=1e-3) for q in asked)


def test_a_restarted_start_whose_death_the_runtime_cannot_tell_ends_with_the_runtimes_own_line() -> None:
    class NoEvents(Replayed):
        def died(self, ref: str, since: str, until: str) -> int | None:
            raise RuntimeFailure("podman events: no answer within 30s")

    later = record("podman-4.3.1-running-published.json", StartedAt=S2, FinishedAt=S1_END)
    tracker = Tracker(NoEvents(later), ref=later.id)
    tracker.watching = S1
    out = ContainerSampler(tracker).sample()
    assert [(o.alive, o.exit_code) for o in out if isinstance(o, ProcessSample)] == [(False, None)]
    assert [o.message for o in out if isinstance(o, SourceNote)] == [
        f"podman container {later.short_id}: the start of {S1} ended, the runtime started it again at {S2} "
        f"(restart {later.restart_count}, policy {later.restart_policy or 'no'}); podman events: no answer within 30s"]


def test_a_line_newer_than_the_runtimes_word_is_the_starts_while_its_init_runs() -> None:
    """No inspect while the watched start's init process runs (no later start can have begun); once it is gone,
    the runtime is asked afresh, and a line stamped in the next start is left to it."""
    first = record("podman-4.3.1-running-published.json", Pid=os.getpid(), StartedAt=S1)
    runtime = Replayed(first)
    tracker = Tracker(runtime, ref=first.id)
    tracker.watching = S1
    assert tracker.get() == first and runtime.calls == 1
    log = ContainerLog(tracker, Lines(), None, lambda: 0.0, None)
    after = time.time() + 5  # stamped after the runtime last answered
    assert log._ours(LineEvent("INFO loading", True, ts=after)) and runtime.calls == 1  # its init runs
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(CHECK_S)
    second = dataclasses.replace(first, started_at=S2, finished_at=S1_END, pid=None)
    runtime.answers = [second]
    dead = ContainerLog(tracker, Lines(), None, lambda: 0.0, None)
    dead._init = gone.pid  # the watched start's init, exited
    assert not dead._ours(LineEvent("INFO loading, start 2", True, ts=after)) and runtime.calls == 2  # asked afresh
    assert dead.until == pytest.approx(parse_rfc3339("2026-12-07T23:28:57.897213Z"), abs=1e-6)
    assert dead._ours(LineEvent("RuntimeError: start 1 failed", True, ts=parse_rfc3339(S1_END)))
    assert dead._ours(LineEvent("a line no runtime stamped", True))


def test_a_line_stamped_after_its_starts_end_waits_briefly_for_a_restart_not_on_record_yet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime recorded the start's end but not yet its restart (under load, the next start prints before it
    is on record): the line is held until the restart is (then it is the next start's), or, once per log, for
    NEXT_START_WAIT_S (then it is a last line of the start's own)."""
    assert watch.NEXT_START_WAIT_S == 1.0  # as docs/kubernetes.md states it
    monkeypatch.setattr(watch, "NEXT_START_WAIT_S", 0.3)
    ended = record("podman-4.3.1-exited-137-memory-limit.json", StartedAt=S1, FinishedAt=S1_END)
    second = record("podman-4.3.1-running-published.json", StartedAt=S2, FinishedAt=S1_END, Pid=os.getpid())
    runtime = Replayed(ended, ended, second)
    tracker = Tracker(runtime, ref=ended.id)
    tracker.watching = S1
    assert tracker.get() == ended
    log = ContainerLog(tracker, Lines(), None, lambda: 0.0, None)
    late = parse_rfc3339("2026-12-07T23:28:57.955875081Z")
    assert not log._ours(LineEvent("INFO loading the weights, start 2", True, ts=late)) and runtime.calls == 3
    assert log.until == pytest.approx(parse_rfc3339("2026-12-07T23:28:57.897213Z"), abs=1e-6)
    runtime = Replayed(ended)  # no restart coming
    tracker = Tracker(runtime, ref=ended.id)
    tracker.watching = S1
    assert tracker.get() == ended
    log = ContainerLog(tracker, Lines(), None, lambda: 0.0, None)
    assert log._ours(LineEvent("a last line, read late", True, ts=parse_rfc3339(S1_END) + 0.01))
    asked = runtime.calls
    assert asked > 2 and log.until is None  # asked again while it waited
    assert log._ours(LineEvent("another", True, ts=parse_rfc3339(S1_END) + 0.02)) and runtime.calls == asked


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
        wait_for(lambda: any("/logs?" in path for _, path in engine.requests) and log.popen is not None, CHECK_S,
                 "the logs request, and Popen returned on the log's thread")
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
    # (the command can run before Popen has returned on the log's thread: both waited for)
    wait_for(lambda: ready.exists() and log.popen is not None, CHECK_S, "the logs command's TERM trap")
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
        tracker = watch.launched(Runtime("docker", run.argv[0]), tmp_path / "cid")
        cfg = Config(command=list(launch.argv), watched_command=run.inner, engine="sglang", after_ready="stop",
                     probe=ProbeConfig(url=f"http://127.0.0.1:{port}"), history=HistoryConfig(enabled=False),
                     sample_interval=0.2, echo_server_output=False)
        session = Session(cfg, get_profile("sglang"), QuietReporter(), Redactor(), record,
                          sources=container_sources(tracker, launch))
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


def test_up_docker_run_naming_a_container_another_holds_never_watches_nor_stops_that_one(
        docker_host: Path, tmp_path: Path) -> None:
    """The runtime refuses the name (409); the container that holds it is not firstlight's: never taken for the
    server, never stopped. The start ends with the CLI's own code."""
    port = free_port()
    argv = ["docker", "run", "-d", "--name", "srv", "-p", f"{port}:{port}", "example-image:1.0",
            *sim_cmd("normal", port)]
    run = parse_run(argv)
    assert run is not None
    launch = run.with_cidfile(tmp_path / "cid")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        with docker_engine(docker_host) as engine:
            engine.init_pid = other.pid
            engine.start()  # the other "srv", running
            engine.names_in_use.add("srv")
            tracker = watch.launched(Runtime("docker", run.argv[0]), tmp_path / "cid")
            cfg = Config(command=list(launch.argv), watched_command=run.inner, engine="sglang", after_ready="stop",
                         probe=ProbeConfig(url=f"http://127.0.0.1:{port}"), history=HistoryConfig(enabled=False),
                         judge=JudgeConfig(timeout=CHECK_S), sample_interval=0.2, echo_server_output=False)
            o = Session(cfg, get_profile("sglang"), QuietReporter(), Redactor(),
                        sources=container_sources(tracker, launch)).run()
            asked = [path for _, path in engine.requests]
        assert o.verdict == "failed", o.result.evidence
        assert engine.refused and not engine.created
        assert engine.stops == [] and not [p for p in asked if p.rstrip("/").endswith(("/srv/json", "/srv/stop"))]
        assert other.poll() is None  # the other container's process was never signalled
    finally:
        other.kill()
        other.wait(10)


# -- what each part is built with, and the remaining edges -------------------------------------------------------

def test_the_sampler_ticks_on_its_interval_and_clock_and_tells_the_end_once(tmp_path: Path) -> None:
    killed = record("podman-4.3.1-exited-137-memory-limit.json")
    (tmp_path / "cid").write_text(killed.id)
    sampler = ContainerSampler(Tracker(Replayed(killed), cidfile=tmp_path / "cid"), interval=0.7,
                               clock=lambda: 42.0, launcher_exit=lambda: 0)  # `run -d` exited 0: not the end
    assert sampler.interval == 0.7
    out = sampler.sample()
    assert [(type(o).__name__, o.t) for o in out] == [("SourceNote", 42.0), ("ProcessSample", 42.0)]
    assert isinstance(out[0], SourceNote) and out[0].source == "container"
    assert [o.exit_code for o in out if isinstance(o, ProcessSample)] == [-9]  # the container's 137, not the CLI's 0
    assert sampler.sample() == []  # told once


def test_a_sampler_without_a_cli_waits_for_the_container(tmp_path: Path) -> None:
    assert ContainerSampler(Tracker(Replayed(), cidfile=tmp_path / "cid")).sample() == []


def test_a_clean_exit_reads_no_oom_record_and_a_kill_without_one_has_none(tmp_path: Path) -> None:
    clean = record("podman-4.3.1-exited-3-host-network.json", ExitCode=0, OOMKilled=True)
    (tmp_path / "cid").write_text(clean.id)
    out = ContainerSampler(Tracker(Replayed(clean), cidfile=tmp_path / "cid"), launcher_exit=lambda: 0).sample()
    assert [(o.exit_code, o.oom) for o in out if isinstance(o, ProcessSample)] == [(0, ())]
    killed = record("podman-4.3.1-exited-137-memory-limit.json")  # SIGKILL, State.OOMKilled false
    (tmp_path / "cid").write_text(killed.id)
    out = ContainerSampler(Tracker(Replayed(killed), cidfile=tmp_path / "cid"), launcher_exit=lambda: 137).sample()
    dead = [o for o in out if isinstance(o, ProcessSample)]
    assert dead[0].exit_code == -9 and not any("OOMKilled" in line for line in dead[0].oom)


def test_a_removed_containers_exit_is_read_as_soon_as_the_cli_passes_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "EXIT_SETTLE_S", 60.0)
    running = record("podman-4.3.1-running-published.json")
    runtime = Replayed(running)
    tracker = Tracker(runtime, ref=running.id)
    tracker.get()
    runtime.answers = []  # --rm: gone
    before = time.monotonic()
    assert ContainerSampler(tracker, launcher_exit=lambda: 137)._container_exit() == -9
    assert time.monotonic() - before < 30  # not the whole settle bound: the CLI had the status


def test_the_oom_evidence_is_the_runtimes_record_then_the_traces_then_the_kernels_kills_in_its_cgroup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    killed = record("podman-4.3.1-exited-137-memory-limit.json", OOMKilled=True)
    kmsg = tmp_path / "kmsg"
    kill = (f"oom-kill:constraint=CONSTRAINT_MEMCG,task_memcg=/machine.slice/libpod-{killed.id}.scope,task=python3,"
            "pid=5151")
    kmsg.write_text(f"6,1,1,-;{kill}\n3,2,2,-;Memory cgroup out of memory: Killed process 5151 (python3)\n")
    monkeypatch.setattr(watch, "kernel_log_cgroup_kills", functools.partial(kernel_log_cgroup_kills, kmsg=kmsg))
    tracker = Tracker(Replayed(killed), ref=killed.id)
    tracker.get()
    told = f"kernel log: {kill}"
    assert container_oom(tracker, ["a trace of the init pid", told]) == (
        f"podman inspect {killed.short_id}: State.OOMKilled true, killed by SIGKILL (exit code 137); "
        "State.OOMKilled true",
        "a trace of the init pid", told,  # already told: not repeated
        "kernel log: Memory cgroup out of memory: Killed process 5151 (python3)")
    never = Tracker(Replayed(), ref=None)
    assert container_oom(never) == ()


def test_the_log_thread_is_named_and_never_holds_the_exit(tmp_path: Path) -> None:
    log = ContainerLog(Tracker(Replayed(), cidfile=tmp_path / "cid"), Lines(), None, lambda: 0.0, None)
    assert log.thread.name == "firstlight-container-logs" and log.thread.daemon


def test_the_logs_command_reads_nothing_of_firstlights_stdin_and_its_lines_carry_the_clock_and_echo(
        tmp_path: Path) -> None:
    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\nreadlink /proc/self/fd/0 > {tmp_path / 'stdin'}\necho 'INFO from the container'\n")
    fake.chmod(0o755)
    (tmp_path / "cid").write_text("abc")
    lines, echoed = Lines(), []

    def backlog() -> int:
        return 0

    log = ContainerLog(Tracker(Runtime("docker", binary=str(fake)), cidfile=tmp_path / "cid"), lines,
                       lambda stream, text: echoed.append((stream, text)), lambda: 42.0, backlog)
    ours = os.dup(0)
    r, w = os.pipe()
    os.dup2(r, 0)  # firstlight's stdin a pipe (as under systemd or a script): the child must not share it
    try:
        log.start()
        wait_for(lambda: lines.texts(), CHECK_S, "the container's line")
        log.settle(CHECK_S)
        log.stop()
    finally:
        os.dup2(ours, 0)
        for fd in (ours, r, w):
            os.close(fd)
    assert (tmp_path / "stdin").read_text().strip() == "/dev/null"
    assert [reader.delivery.backlog for reader in log.readers] == [backlog, backlog]  # paced by the session
    assert lines.texts() == [("stdout", "INFO from the container")] and lines.seen[0].t == 42.0
    assert echoed == [("stdout", "INFO from the container")]


def test_a_logs_command_that_cannot_run_is_a_note_of_the_containers_at_the_clock(tmp_path: Path) -> None:
    lines = Lines()
    tracker = Tracker(Runtime("docker", binary=str(tmp_path / "no-docker")))
    tracker.last = record("podman-4.3.1-running-published.json")
    log = ContainerLog(tracker, lines, None, lambda: 42.0, None)
    log.start()
    log.settle(CHECK_S)
    note = lines.seen[0]
    assert isinstance(note, SourceNote) and (note.t, note.source) == (42.0, "container")


class Stoppable(Replayed):
    """Replayed, and `stop`: recorded, after which inspect answers ``after`` (none: the container is gone)."""

    def __init__(self, *answers: Container, after: list[Container], fail: str | None = None) -> None:
        super().__init__(*answers)
        self.after, self.fail, self.stops = after, fail, 0

    def stop(self, ref: str, grace: float) -> str:
        self.stops += 1
        if self.fail:
            raise RuntimeFailure(self.fail)
        self.answers = list(self.after)
        return f"podman stop -t {round(grace)} {ref[:12]}"


def stand_in_server(tracker: Tracker) -> ContainerServer:
    s = ContainerServer(cli_stand_in(), tracker)
    s.start()
    return s


def test_a_container_removed_by_its_stop_is_said_so() -> None:
    running = record("podman-4.3.1-running-published.json")
    tracker = Tracker(Stoppable(running, after=[]), ref=running.id)
    tracker.get()
    server = stand_in_server(tracker)
    assert server.stop(1.0).startswith(f"container stopped (podman stop -t 1 {running.short_id}): removed (--rm); ")


def test_a_container_that_cannot_be_stopped_is_said_so_by_its_short_id() -> None:
    running = record("podman-4.3.1-running-published.json")
    runtime = Stoppable(running, after=[], fail="podman stop: timed out after 11 s")
    tracker = Tracker(runtime, ref=running.id)
    tracker.get()
    server = stand_in_server(tracker)
    assert server.stop(1.0).startswith(f"could not stop container {running.short_id}: podman stop: timed out after "
                                       "11 s; the podman CLI: ")


def test_the_stop_asks_the_runtime_afresh_and_never_stops_a_container_that_just_ended() -> None:
    running = record("podman-4.3.1-running-published.json")
    ended = record("podman-4.3.1-exited-3-host-network.json")
    runtime = Stoppable(running, after=[ended])
    tracker = Tracker(runtime, ref=running.id)
    assert tracker.get() == running
    runtime.answers = [ended]  # it ended within the second: the last answer is stale
    server = stand_in_server(tracker)
    assert server.stop(1.0).startswith(f"container {ended.short_id} already ended: exited with code 3; ")
    assert runtime.stops == 0


def test_a_container_in_no_known_state_ends_with_its_clis_status() -> None:
    odd = record("podman-4.3.1-running-published.json", Running=False, Status="unknown",
                 StartedAt="0001-01-01T00:00:00Z")
    assert odd.exit_code is None and not odd.running
    tracker = Tracker(Replayed(odd), ref=odd.id)
    server = ContainerServer([sys.executable, "-c", "raise SystemExit(4)"], tracker)
    server.start()
    wait_for(lambda: server.cli_exit() is not None, CHECK_S, "the CLI's exit")
    assert server.poll() == 4
    server.stop(1.0)


class LateCid(Tracker):
    """The CLI writes the id between the tracker's read of it and the poll's: inspect has not been asked yet."""

    def get(self, fresh: bool = False) -> Container | None:
        found = super().get(fresh)
        assert self.cidfile is not None
        self.cidfile.write_text("4f1d9e7f0a8b")
        return found


def test_a_cli_that_exited_as_it_wrote_the_id_is_not_the_end_yet(tmp_path: Path) -> None:
    tracker = LateCid(Replayed(), cidfile=tmp_path / "cid")
    server = ContainerServer([sys.executable, "-c", "pass"], tracker)
    server.start()
    wait_for(lambda: server.cli_exit() is not None, CHECK_S, "the CLI's exit")
    assert server.poll() is None  # the container's state is asked next
    server.stop(1.0)


def test_the_tree_is_the_cli_the_monitor_and_the_containers_processes_below_them() -> None:
    chain = [sys.executable, "-c", "import subprocess, sys, time\n"
             "c = subprocess.Popen([sys.executable, '-c', 'import subprocess, sys, time; "
             "g = subprocess.Popen([sys.executable, \"-c\", \"import time; time.sleep(120)\"]); "
             "print(g.pid, flush=True); time.sleep(120)'], stdout=subprocess.PIPE)\n"
             "print(c.pid, c.stdout.readline().decode().strip(), flush=True)\n"
             "time.sleep(120)\n"]
    monitor = subprocess.Popen(chain, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert monitor.stdout is not None
        child, grandchild = map(int, monitor.stdout.readline().split())
        running = record("podman-4.3.1-running-published.json", Pid=2_000_000_000, ConmonPid=monitor.pid)
        assert running.pid == 2_000_000_000  # gone: skipped, never an error
        tracker = Tracker(Replayed(running), ref=running.id)
        server = stand_in_server(tracker)
        try:
            pids = [p.pid for p in server.tree()]
            assert {server.pid, monitor.pid, child, grandchild} <= set(pids) and os.getpid() not in pids
        finally:
            server.send(signal.SIGKILL)
            assert server.popen is not None
            server.popen.wait(CHECK_S)
            server.release()
    finally:
        os.killpg(monitor.pid, signal.SIGKILL)
        monitor.wait(CHECK_S)


def test_the_tracker_tells_the_first_sight_once_and_ended_asks_afresh() -> None:
    running = record("podman-4.3.1-running-published.json")
    ended = record("podman-4.3.1-exited-3-host-network.json")
    runtime = Replayed(running)
    now = [0.0]
    tracker = Tracker(runtime, ref=running.id, clock=lambda: now[0])
    seen: list[Container] = []
    tracker.on_found = seen.append
    assert tracker.error is None and tracker.get() == running
    tracker.get(fresh=True)
    assert seen == [running]  # once
    runtime.answers = [ended]
    assert tracker.get() == running  # the same second: the answer known
    assert tracker.ended(settle_s=0.0) == ended  # the end is asked, never taken from the last second


def test_the_watchdog_stops_the_container_when_firstlight_dies(docker_host: Path) -> None:
    """firstlight SIGKILLed: its watchdog, told the container once it was found, runs `docker stop`."""
    with container_and_cli(docker_host) as (engine, tracker, server, _):
        w = server.watchdog
        assert w is not None and w.stdin is not None
        wait_for(lambda: psutil.Process(w.pid).cmdline()[-2:] == [str(server.pid), "10"], CHECK_S,
                 "the watchdog's command line")
        assert tracker.get() is not None  # found: the watchdog is told
        w.stdin.close()  # what firstlight's death does to its pipe
        assert w.wait(CHECK_S) == 0
        assert engine.stops == [{"t": ["10"]}]
        assert server.popen is not None and server.popen.wait(CHECK_S) == -signal.SIGTERM
        server.stop(1.0)


def test_the_container_server_keeps_its_output_and_detachability(tmp_path: Path) -> None:
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")
    s = ContainerServer(["docker", "run", "img"], tracker, output=tmp_path / "out", detachable=False)
    assert (s.output, s.detachable, s.container_stop) == (tmp_path / "out", False, None)


def sources_of(cfg: Config, tracker: Tracker, run: Any = None) -> tuple[ContainerSources, Lines]:
    lines = Lines()
    return ContainerSources(cfg, lines, lambda stream, text: None, False, lambda: 42.0, lambda: 0, None,
                            tracker=tracker, run=run, since=None), lines


def test_the_launched_cli_is_the_run_command_with_its_cidfile(tmp_path: Path) -> None:
    run = parse_run(["docker", "run", "-d", "--name", "srv", "img", "vllm", "serve", "m"])
    assert run is not None
    launch = run.with_cidfile(tmp_path / "cid")
    tracker = Tracker(Replayed(), ref=run.name, cidfile=launch.cidfile)
    sources, _ = sources_of(Config(command=["docker", "run", "img"]), tracker, launch)
    server = sources.make_server(tmp_path / "out", True)
    assert isinstance(server, ContainerServer) and server.argv == list(launch.argv)
    assert (server.tracker, server.output, server.detachable) == (tracker, tmp_path / "out", True)
    assert sources.make_server(None, True).detachable is True  # --keep-on-failure: no output file, handed over
    bare, _ = sources_of(Config(command=["docker", "run", "img"]), tracker)
    assert bare.make_server(None, False).argv == ["docker", "run", "img"]  # no run parsed: the command as given


def test_the_container_sampler_reads_the_clis_exit_and_backs_off_while_idle(tmp_path: Path) -> None:
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")
    sources, _ = sources_of(Config(sample_interval=0.3, judge=JudgeConfig(stall_timeout=40)), tracker)
    sampler = sources.process_sampler()
    assert isinstance(sampler, ContainerSampler) and sampler.launcher_exit is None  # watched: no CLI
    assert sampler.backoff is not None and (sampler.backoff.base, sampler.backoff.cap) == (0.3, idle_cap(40))
    sources.server = ContainerServer(["docker", "run", "img"], tracker)
    launched = sources.process_sampler()
    assert isinstance(launched, ContainerSampler) and launched.launcher_exit == sources.server.cli_exit


def test_a_model_path_in_the_container_is_not_sized_on_the_host(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"x" * 1024)
    cfg = Config(watched_command=["vllm", "serve", str(tmp_path)])
    sources, lines = sources_of(cfg, Tracker(Replayed(), ref="x"))
    sources._size_weights()
    assert lines.seen == []
    sized, lines = sources_of(Config(watched_command=["vllm", "serve", "m"], model_path=tmp_path),
                                     Tracker(Replayed(), ref="x"))
    sized._size_weights()  # a path the host has too (-v): sized
    assert [type(o).__name__ for o in lines.seen] == ["WeightsTotal"]


def test_a_watched_containers_log_is_the_runtimes_echoed_as_asked_and_stopped_with_the_watch(
        docker_host: Path) -> None:
    with docker_engine(docker_host) as engine:
        runtime = Runtime("docker")
        tracker = Tracker(runtime, ref="funny_chatelet")
        assert tracker.get() is not None
        for n, echo in enumerate((False, True), 1):
            cfg = Config(pid=os.getpid(), watched_command=["vllm", "serve", "m"], echo_server_output=echo,
                         probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}"))
            sources, _ = sources_of(cfg, tracker)
            assert sources.start() is None
            log = sources.log
            assert log is not None and (log.echo is sources.echo if echo else log.echo is None)
            assert log.backlog is sources.backlog and log.clock is sources.clock
            wait_for(lambda: len([p for _, p in engine.requests if "/logs?" in p]) == n,  # noqa: B023
                     CHECK_S, "the logs command's request")
            sources.stop()
            assert log.popen is not None and log.popen.returncode is not None  # stopped: not left following
        assert len([p for _, p in engine.requests if "/logs?" in p]) == 2


def test_a_container_session_is_built_on_the_container_sources(tmp_path: Path) -> None:
    run = parse_run(["docker", "run", "-d", "img"])
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")
    cfg = Config(command=["docker", "run", "-d", "img"], history=HistoryConfig(enabled=False))
    session = Session(cfg, get_profile("generic"), QuietReporter(), Redactor(), clock=lambda: 42.0,
                      sources=container_sources(tracker, run, since="2026-12-04T10:00:00Z"))
    sources = session.sources
    assert isinstance(sources, ContainerSources)
    assert (sources.tracker, sources.run, sources.since, sources.clock()) == (tracker, run, "2026-12-04T10:00:00Z",
                                                                              42.0)
    assert sources.echo == session.feed.echo and sources.backlog == session.q.qsize
    assert sources.identify == session.detect and session.clock() == 42.0


def test_settling_the_log_is_bounded_while_the_container_still_runs_or_was_never_found(tmp_path: Path) -> None:
    follows = tmp_path / "docker"
    follows.write_text("#!/bin/sh\necho 'INFO following'\nexec sleep 120\n")
    follows.chmod(0o755)
    (tmp_path / "cid").write_text("abc")
    lines = Lines()
    log = ContainerLog(Tracker(Runtime("docker", binary=str(follows)), cidfile=tmp_path / "cid"), lines, None,
                       lambda: 0.0, None)
    never = ContainerLog(Tracker(Replayed(), cidfile=tmp_path / "none"), Lines(), None, lambda: 0.0, None)
    log.start()
    never.start()
    try:
        wait_for(lambda: lines.texts(), CHECK_S, "the line")
        before = time.monotonic()
        log.settle(0.3)  # `logs --follow` runs on: each bound is waited once, then on
        never.settle(0.3)  # no id yet: its thread still waits for one
        assert time.monotonic() - before < CHECK_S / 2
        assert log.popen is not None and log.popen.poll() is None
    finally:
        log.stop()
        never.stop()


def test_the_containers_oom_traces_are_its_init_pids_cgroup_and_the_runtimes_record(tmp_path: Path) -> None:
    tracker = Tracker(Replayed(), ref="x")
    oom = ContainerOom(os.getpid(), tracker)  # a live process: its memory cgroup, read from /proc
    assert oom.pid == os.getpid() and oom.directories == memory_dirs(os.getpid())
    d = tmp_path / "cg"
    d.mkdir()
    (d / "memory.events").write_text("oom_kill 0\n")
    oom.before = {d: {"memory.events oom_kill": 0}}
    (d / "memory.events").write_text("oom_kill 1\n")
    assert f"{d / 'memory.events'}: oom_kill 0 -> 1" in oom.evidence()


def test_an_attached_runs_log_is_the_clis_own_output_and_settling_is_bounded(docker_host: Path) -> None:
    """Attached (`docker run` without -d): the CLI's output is the container's, no `logs` command runs; watched,
    the runtime's `logs --follow` runs, and settling it while the container runs is bounded."""
    attached = parse_run(["docker", "run", "img"])
    sources, _ = sources_of(Config(command=["docker", "run", "img"]), Tracker(Replayed(), ref="x"), attached)
    assert sources.log is None
    sources.settle_logs(0.1)  # nothing to settle: no error
    sources.stop()
    with docker_engine(docker_host) as engine:
        tracker = Tracker(Runtime("docker"), ref="funny_chatelet")
        assert tracker.get() is not None
        cfg = Config(pid=os.getpid(), watched_command=["vllm", "serve", "m"],
                     probe=ProbeConfig(url=f"http://127.0.0.1:{free_port()}"))
        watched, _ = sources_of(cfg, tracker)
        assert watched.start() is None
        try:
            wait_for(lambda: any("/logs?" in p for _, p in engine.requests), CHECK_S, "the logs request")
            before = time.monotonic()
            watched.settle_logs(0.3)  # the container runs on: `logs --follow` with it
            assert time.monotonic() - before < CHECK_S / 2
        finally:
            watched.stop()
