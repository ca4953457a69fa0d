"""The container sampler's decisions, on the runtime's real answers replayed in order (podman 4.3.1's inspect
output in tests/fixtures/containers): a CLI that is done is not the server, a CLI that never made a container
is, and a container's end is named from its record."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from firstlight.containers.runtime import Container, Runtime, RuntimeFailure
from firstlight.containers.watch import ContainerSampler, Tracker
from firstlight.timeline import ProcessSample, SourceNote

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "containers"


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


def test_a_detached_cli_that_exited_0_is_not_the_servers_exit(tmp_path: Path):
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


def test_a_cli_that_never_made_a_container_ends_the_start_with_its_code(tmp_path: Path):
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")  # no id written: the image was not found
    out = ContainerSampler(tracker, launcher_exit=lambda: 125).sample()
    dead = [o for o in out if isinstance(o, ProcessSample)]
    assert len(dead) == 1 and not dead[0].alive and dead[0].exit_code == 125
    assert any(isinstance(o, SourceNote) and "exited with code 125 before a container ran" in o.message for o in out)


def test_a_cli_that_is_still_creating_it_is_waited_for(tmp_path: Path):
    tracker = Tracker(Replayed(), cidfile=tmp_path / "cid")
    assert ContainerSampler(tracker, launcher_exit=lambda: None).sample() == []


def test_a_container_that_ended_unseen_is_named_from_its_record(tmp_path: Path):
    ended = record("podman-4.3.1-exited-137-memory-limit.json")
    (tmp_path / "cid").write_text(ended.id)
    tracker = Tracker(Replayed(ended), cidfile=tmp_path / "cid")
    out = ContainerSampler(tracker, launcher_exit=lambda: 137).sample()
    dead = [o for o in out if isinstance(o, ProcessSample)]
    assert len(dead) == 1 and dead[0].exit_code == -9  # 137 = 128 + SIGKILL
    assert any(isinstance(o, SourceNote) and "killed by SIGKILL (exit code 137)" in o.message for o in out)


def test_inspect_is_asked_at_most_once_a_second(tmp_path: Path):
    running = record("podman-4.3.1-running-published.json")
    runtime = Replayed(running)
    tracker = Tracker(runtime, ref=running.id)
    for _ in range(20):
        tracker.get()
    assert runtime.calls == 1
    tracker.get(fresh=True)
    assert runtime.calls == 2
