"""A container the runtime has no record of is gone (removed by ``--rm`` or ``rm -f``): told from the runtime's
own words, as docker 28 and podman 4 print them, and never from a daemon that is down or slow."""

from __future__ import annotations

import pytest

from firstlight.containers.runtime import _NO_SUCH, Container
from firstlight.containers.watch import LOG_SINCE_SLACK_S, log_since, start_boundary
from firstlight.framing import parse_rfc3339


@pytest.mark.parametrize("said", [
    "Error: No such container: fl-test-1",  # docker container inspect
    "Error response from daemon: No such container: 3f2a",  # docker, from the daemon
    "Error: No such object: fl-test-1",  # docker inspect
    "Error: no such container fl-test-1",  # podman 4
    "Error: inspecting object: no such container fl-test-1",  # podman 4, container inspect
    "Error: no container with name or ID \"fl-test-1\" found: no such container",  # podman
])
def test_the_runtimes_words_for_no_such_container_are_gone(said: str) -> None:
    assert _NO_SUCH.search(said) is not None


@pytest.mark.parametrize("said", [
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
    "Error: context deadline exceeded",
    "Error: container fl-test-1 is not running",
])
def test_other_failures_are_not_gone(said: str) -> None:
    assert _NO_SUCH.search(said) is None


def started(at: str | None, finished: str | None = None) -> Container:
    return Container(id="c" * 64, name="x", status="running", running=True, pid=1, exit_code=None,
                     oom_killed=False, health=None, started_at=at, log_path=None, log_driver=None, image=None,
                     finished_at=finished)


@pytest.mark.parametrize(("at", "since"), [
    ("2026-12-04T10:00:00.000000000Z", "2026-12-04T09:59:59.000000Z"),
    ("2026-12-04T10:00:00.5Z", "2026-12-04T09:59:59.500000Z"),
    ("2026-12-04T10:00:00.123456789+01:00", "2026-12-04T08:59:59.123457Z"),
    ("not a time", "not a time"),  # handed on as the runtime wrote it
    (None, None),
])
def test_a_watched_containers_log_is_read_from_a_second_before_its_start(at: str | None, since: str | None) -> None:
    assert LOG_SINCE_SLACK_S == 1.0
    assert log_since(started(at)) == since


@pytest.mark.parametrize(("finished", "since"), [
    # podman 4.3's restart by on-failure: the start before ended 0.1 s earlier (its last line stamped 0.45 ms
    # after that FinishedAt, the new start's first 8 ms after its StartedAt): read from halfway between
    ("2026-12-07T23:28:57.846560362Z", "2026-12-07T23:28:57.897213Z"),
    ("2026-12-07T23:28:00Z", "2026-12-07T23:28:56.947866Z"),  # long before: a second before, as for a first start
    ("2026-12-07T23:28:58Z", "2026-12-07T23:28:56.947866Z"),  # not before it (a clock step): a second before
])
def test_a_restarted_containers_log_begins_halfway_from_the_start_before(finished: str, since: str) -> None:
    assert log_since(started("2026-12-07T23:28:57.947865899Z", finished)) == since
    assert start_boundary(started("2026-12-07T23:28:57.947865899Z", finished)) == pytest.approx(
        parse_rfc3339(since), abs=1e-6)
