"""What happens to a launched server once the verdict is in (``firstlight.runner.policy``), in process: the choice
for each verdict and option, and each strategy against a scripted server (its exits, its daemon, its stop) and a
scripted serving watch. The real servers behind the same policies: ``tests/e2e/runner/test_after_ready_live.py``,
``tests/e2e/cli/test_crash_after_ready.py``."""

from __future__ import annotations

import queue
from dataclasses import dataclass, field
from typing import Any

import pytest

from firstlight.config import Config
from firstlight.result import RunResult
from firstlight.runner import policy
from firstlight.timeline import Interrupted, Observation

READY = RunResult(verdict="ready", phase="ready", started_at=100.0, ended_at=160.0, engine="vllm",
                  url="http://127.0.0.1:1", ready_at=160.0, pid=4242)


@dataclass
class Server:
    """A ServerProcess as the policies use it: ``exits`` are poll()'s answers in turn (the last one repeats)."""

    pid: int = 4242
    exits: list[int | None] = field(default_factory=lambda: [None])
    daemon: list[list[Any]] = field(default_factory=list)  # daemon_serving()'s answers in turn
    how_to_stop: str = "kill -TERM -4242"
    calls: list[Any] = field(default_factory=list)

    def poll(self) -> int | None:
        self.calls.append("poll")
        return self.exits.pop(0) if len(self.exits) > 1 else self.exits[0]

    def stop(self, grace: float) -> str:
        self.calls.append(("stop", grace))
        return "SIGTERM, exited 0"

    def release(self) -> None:
        self.calls.append("release")

    def daemon_serving(self) -> list[Any]:
        return self.daemon.pop(0) if self.daemon else []

    def exit_of(self, pids: list[int]) -> int | None:
        self.calls.append(("exit_of", list(pids)))
        return -11


@dataclass
class Proc:
    pid: int


class Watch:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def start(self) -> None:
        self.calls.append("watch.start")

    def step(self) -> None:
        self.calls.append("watch.step")

    def stop(self) -> None:
        self.calls.append("watch.stop")


def _ctx(server: Server, **kw: Any) -> tuple[policy.Context, list[str]]:
    said: list[str] = []
    q: queue.Queue[Observation] = kw.pop("q", queue.Queue())
    return policy.Context(server=server, cfg=Config(grace=7.5), say=said.append, q=q,  # type: ignore[arg-type]
                          clock=lambda: 200.0, server_log="/tmp/server.log", **kw), said


@pytest.mark.parametrize(("verdict", "after_ready", "keep", "chosen"), [
    ("interrupted", "supervise", True, policy.StopServer),
    ("ready", "supervise", False, policy.Supervise),
    ("ready", "detach", False, policy.Detach),
    ("ready", "stop", False, policy.StopServer),
    ("regression", "supervise", False, policy.Supervise),  # a finding about a server that serves
    ("regression", "detach", True, policy.Detach),
    ("failed", "supervise", True, policy.KeepOnFailure),
    ("hung", "detach", True, policy.KeepOnFailure),
    ("failed", "detach", False, policy.StopServer),
    ("timeout", "supervise", False, policy.StopServer),
])
def test_the_policy_for_each_verdict_and_option(verdict: str, after_ready: str, keep: bool, chosen: type):
    result = RunResult(verdict=verdict, phase="ready", started_at=0.0, ended_at=1.0, engine="vllm", url="u")
    assert type(policy.choose(Config(after_ready=after_ready, keep_on_failure=keep), result)) is chosen


def test_stop_stops_the_group_within_the_grace_and_says_how():
    server = Server()
    ctx, said = _ctx(server)
    out = policy.StopServer().apply(ctx, READY)
    assert server.calls == [("stop", 7.5)] and out.server_stopped == "SIGTERM, exited 0"
    assert said == ["server process group 4242: SIGTERM, exited 0"] and out.verdict == "ready"


def test_detach_releases_the_server_and_says_where_its_output_goes_and_how_to_stop_it():
    server = Server()
    ctx, said = _ctx(server)
    assert policy.Detach().apply(ctx, READY) is READY and server.calls == ["release"]
    assert said == ["detached: server pid 4242 keeps running; its output goes to /tmp/server.log; stop it with: "
                    "kill -TERM -4242"]


def test_keep_on_failure_releases_the_server_and_says_how_to_stop_it():
    server = Server()
    ctx, said = _ctx(server)
    assert policy.KeepOnFailure().apply(ctx, READY) is READY and server.calls == ["release"]
    assert said == ["--keep-on-failure: server left running, pid 4242, process group 4242; stop it with: "
                    "kill -TERM -4242"]


def test_supervise_tells_ready_first_then_watches_until_the_server_dies(monkeypatch: pytest.MonkeyPatch):
    server = Server(exits=[None, None, 1])
    told: list[Any] = []
    watched: list[RunResult] = []
    ctx, said = _ctx(server, on_serving=told.append, serving=lambda r: watched.append(r) or Watch(server.calls),
                     oom=lambda: ("memory.events: oom_kill 0 -> 1",))
    monkeypatch.setattr(policy.Supervise, "poll_s", 0.001)
    out = policy.Supervise().apply(ctx, READY)
    assert watched == [READY]  # the serving checks watch the result READY gave
    assert told == [READY] and said == ["supervising server pid 4242; Ctrl-C or SIGTERM stops it",
                                        "server process group 4242: SIGTERM, exited 0"]
    assert server.calls == ["watch.start", "poll", "watch.step", "poll", "watch.step", "poll", ("stop", 7.5),
                            "watch.stop"]  # what is left of a server that died is stopped with the grace
    assert (out.verdict, out.phase, out.failure, out.ended_at) == ("failed", "serving", "other", 200.0)
    assert out.server_stopped == "SIGTERM, exited 0"
    assert out.evidence[0]["value"] == "server exited with code 1 after serving for 40s"


def test_a_kill_while_serving_with_an_oom_trace_is_an_oom():
    server = Server(exits=[-9])
    ctx, _ = _ctx(server, oom=lambda: ("memory.events: oom_kill 0 -> 1",))
    out = policy.Supervise().apply(ctx, READY)
    assert (out.failure, out.evidence[1]["value"]) == ("oom", "OOM kill: memory.events: oom_kill 0 -> 1")


def test_a_stop_signal_while_serving_stops_the_server():
    q: queue.Queue[Observation] = queue.Queue()
    q.put(Interrupted(190.0, "SIGTERM"))
    server = Server()
    ctx, said = _ctx(server, q=q, serving=lambda r: Watch(server.calls))
    out = policy.Supervise().apply(ctx, READY)
    assert out.verdict == "interrupted" and out.server_stopped == "SIGTERM, exited 0"
    assert out.evidence[0]["value"] == "SIGTERM received while serving" and out.evidence[0]["since"] == 190.0
    # the server is asked once more at the signal: alive, so the stop is the operator's
    assert server.calls == ["watch.start", "poll", "watch.step", "poll", ("stop", 7.5), "watch.stop"]
    assert said[-1] == "server process group 4242: SIGTERM, exited 0"


def test_a_stop_signal_that_finds_the_server_already_dead_reports_its_death():
    """Killed, then Ctrl-C a moment later, both before the loop looked: the death is what happened to it."""
    q: queue.Queue[Observation] = queue.Queue()
    q.put(Interrupted(190.0, "SIGINT"))
    server = Server(exits=[None, -9])
    ctx, _ = _ctx(server, q=q, oom=lambda: ())
    out = policy.Supervise().apply(ctx, READY)
    assert (out.verdict, out.phase) == ("failed", "serving"), out.evidence
    assert "SIGINT" not in str(out.evidence) and out.server_stopped == "SIGTERM, exited 0"


def test_other_observations_do_not_end_supervision():
    q: queue.Queue[Observation] = queue.Queue()
    q.put(Observation(150.0))
    q.put(Interrupted(190.0, "SIGINT"))
    ctx, _ = _ctx(Server(), q=q)
    assert policy.Supervise().apply(ctx, READY).evidence[0]["value"] == "SIGINT received while serving"


def test_supervise_waits_on_the_queue_its_poll_period():
    waits: list[float | None] = []

    class Timed(queue.Queue):  # type: ignore[type-arg]
        def get(self, block: bool = True, timeout: float | None = None) -> Any:
            waits.append(timeout)
            if len(waits) < 3:
                raise queue.Empty
            return Interrupted(190.0, "SIGTERM")

    ctx, _ = _ctx(Server(), q=Timed())
    policy.Supervise().apply(ctx, READY)
    assert waits == [0.2, 0.2, 0.2] and policy.Supervise.poll_s == 0.2


def test_a_launcher_that_daemonized_is_supervised_through_its_daemon_said_once(monkeypatch: pytest.MonkeyPatch):
    server = Server(exits=[0], daemon=[[Proc(5001), Proc(5002)], [Proc(5001)], []])
    ctx, said = _ctx(server)
    monkeypatch.setattr(policy.Supervise, "poll_s", 0.001)
    out = policy.Supervise().apply(ctx, READY)
    assert said[1:] == ["the launcher (pid 4242) exited 0 and left the server running as pid 5001, 5002: "
                        "supervising that; it is stopped with firstlight",
                        "server process group 4242: SIGTERM, exited 0"]
    assert server.calls.index(("exit_of", [5001, 5002])) < server.calls.index(("stop", 7.5))  # its end read first
    assert server.daemon == [] and server.calls.count("poll") == 3  # followed until the daemon was gone
    assert ("exit_of", [5001, 5002]) in server.calls  # the daemon's own end is the code
    assert (out.failure, out.evidence[0]["value"]) == ("crashed",
                                                       "server died of SIGSEGV (signal 11) after serving for 40s")


def test_a_launcher_that_exits_non_zero_is_not_asked_about_a_daemon():
    server = Server(exits=[3], daemon=[[Proc(5001)]])
    ctx, said = _ctx(server)
    out = policy.Supervise().apply(ctx, READY)
    assert len(said) == 2 and out.evidence[0]["value"] == "server exited with code 3 after serving for 40s"
    assert not any(isinstance(c, tuple) and c[0] == "exit_of" for c in server.calls)


def test_the_watch_is_stopped_when_supervision_fails():
    server = Server()
    calls: list[Any] = []

    class Broken(Watch):
        def step(self) -> None:
            raise RuntimeError("the check broke")

    ctx, _ = _ctx(server, serving=lambda r: Broken(calls))
    with pytest.raises(RuntimeError, match="the check broke"):
        policy.Supervise().apply(ctx, READY)
    assert calls == ["watch.start", "watch.stop"]
