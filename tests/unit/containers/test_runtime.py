"""The container runtime's bounds as docs/kubernetes.md states them (``firstlight.containers.runtime``): every
runtime call has a timeout, ``inspect`` 30 s and ``stop`` the grace plus 30 s. The runtime's CLI itself is run in
``tests/e2e/containers/test_runtime.py``; here the call is caught before it starts, to read the timeout it gets."""

from __future__ import annotations

import re

import pytest

from firstlight.containers import runtime as rt
from firstlight.containers.runtime import Runtime, RuntimeFailure
from firstlight.containers.watch import describe
from tests.support.docs import PAGES

STATED = re.compile(r"Every runtime call has a timeout \(`inspect` (\d+) s, `stop` the grace plus (\d+) s\)")


def _stated() -> tuple[float, float]:
    m = STATED.search(" ".join(PAGES["docs/kubernetes.md"].split()))
    assert m, "docs/kubernetes.md no longer states the runtime's timeouts"
    return float(m[1]), float(m[2])


class _Caught(Exception):
    pass


def _timeouts(monkeypatch: pytest.MonkeyPatch, call: str) -> list[float]:
    """The timeout each runtime command of ``call`` would run under (none is started)."""
    seen: list[float] = []

    def run(self: Runtime, args: list[str], timeout: float) -> str:
        seen.append(timeout)
        raise _Caught

    monkeypatch.setattr(Runtime, "_run", run)
    r = Runtime("podman", "/nonexistent/podman")  # as the CLI makes it: the default timeout
    with pytest.raises(_Caught):
        r.inspect("c1") if call == "inspect" else r.stop("c1", 10.0)
    return seen


def test_the_runtimes_inspect_timeout_is_the_30_s_the_docs_state(monkeypatch: pytest.MonkeyPatch):
    inspect_s, _ = _stated()
    assert inspect_s == 30.0 == rt.INSPECT_TIMEOUT_S
    assert _timeouts(monkeypatch, "inspect") == [30.0]


def test_the_runtimes_stop_timeout_is_the_grace_plus_the_30_s_the_docs_state(monkeypatch: pytest.MonkeyPatch):
    _, extra_s = _stated()
    assert extra_s == 30.0 == rt.STOP_EXTRA_S
    assert _timeouts(monkeypatch, "stop") == [10.0 + 30.0]


def test_an_inspect_of_something_that_is_not_a_container_name_is_refused_before_it_runs():
    for ref in ("", "--all"):
        with pytest.raises(RuntimeFailure, match="not a container name or id"):
            Runtime("podman", "/nonexistent/podman").inspect(ref)


def test_every_word_of_an_inspect_is_printable_before_it_is_printed():
    """A runtime's inspect answer is another program's text: a name, an image or a state with escape sequences,
    bidi marks or newlines is printed without them (the start line, evidence, --json)."""
    hostile = "\x1b[2J\x1b]0;owned\x07evil\u202ename\nnext"
    c = rt.Container.from_inspect({
        "Id": "abc123", "Name": "/" + hostile, "Config": {"Image": hostile},
        "State": {"Status": hostile, "Running": True, "Pid": 42, "Health": {"Status": hostile}},
        "HostConfig": {"NetworkMode": hostile, "LogConfig": {"Type": hostile, "Path": "/var/log/x\x1b[31m.log"}}})
    for word in (c.name, c.image, c.status, c.health, c.network_mode, c.log_driver):
        assert word == "evilname next", word
    said = describe(c, Runtime("podman", "/nonexistent/podman"))
    assert "\x1b" not in said and "\u202e" not in said and "\n" not in said, said
    assert c.log_path == "/var/log/x\x1b[31m.log"  # a path the watch opens stays the runtime's own


def test_a_runtime_word_is_bounded():
    assert len(rt.Container.from_inspect({"Id": "a", "Name": "n" * 10_000}).name) <= 257


def _stopped(status: str, code: int | None, policy: str, retries: int = 0, count: int = 0,
             running: bool = False) -> rt.Container:
    state: dict[str, object] = {"Status": status, "Running": running, "StartedAt": "2026-01-01T00:00:00Z"}
    if code is not None:
        state["ExitCode"] = code
    return rt.Container.from_inspect({"Id": "c1", "Name": "/n", "State": state, "RestartCount": count,
                                      "HostConfig": {"RestartPolicy": {"Name": policy,
                                                                       "MaximumRetryCount": retries}}})


@pytest.mark.parametrize(("container", "due"), [
    (_stopped("restarting", None, "always", running=True), True),  # Docker: between two starts
    (_stopped("running", None, "always", running=True), False),  # running: nothing to restart
    (_stopped("exited", 1, "no"), False),
    (_stopped("exited", 1, ""), False),  # podman writes "" for no policy
    (_stopped("exited", 0, "always"), True),
    (_stopped("exited", 1, "unless-stopped"), True),
    (_stopped("stopped", 3, "on-failure"), True),  # podman's word; 0 retries: no limit
    (_stopped("exited", 0, "on-failure"), False),  # on-failure restarts a non-zero exit only
    (_stopped("exited", 137, "on-failure", retries=2, count=1), True),
    (_stopped("exited", 137, "on-failure", retries=2, count=2), False),  # its retries used up
], ids=["restarting", "running", "no", "none", "always-0", "unless-stopped", "on-failure-unlimited",
        "on-failure-exit-0", "retries-left", "retries-used"])
def test_a_restart_is_due_by_the_docker_and_podman_restart_policy_rules(container: rt.Container, due: bool):
    assert container.restart_due() is due


def test_the_restart_policy_and_count_are_read_from_inspect():
    c = _stopped("exited", 1, "on-failure", retries=3, count=2)
    assert (c.restart_policy, c.max_retries, c.restart_count) == ("on-failure", 3, 2)
    bare = rt.Container.from_inspect({"Id": "c1", "State": {"Status": "exited", "ExitCode": 1}, "RestartCount": True})
    assert (bare.restart_policy, bare.max_retries, bare.restart_count) == ("", 0, 0)
