"""A leader and its members, each under its own ``firstlight up --serve-readiness 127.0.1.N:PORT`` with a simulated
engine: the group verdict on the leader's /readyz (docs/multinode.md, firstlight/group.py, runner/members.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from firstlight.runner.members import AFTER_READY_BOUND_S
from tests.support.common import firstlight_cmd, sim_cmd, wait_for
from tests.support.multinode import free_port_on, readyz

STALL_S = 4.0  # small stall timeouts, generous deadlines
DEADLINE_S = 90.0


class Group:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def node(self, n: int, scenario: str, members: tuple[str, ...] = (), extra: tuple[str, ...] = (),
             sim_extra: tuple[str, ...] = ()) -> str:
        host = f"127.0.1.{n}"
        rport, eport = free_port_on(host), free_port_on(host)
        cmd = firstlight_cmd("up", "--plain", "--serve-readiness", f"{host}:{rport}", "--stall-timeout",
                             str(STALL_S), "--url", f"http://{host}:{eport}",
                             *[a for m in members for a in ("--member", m)], *extra,
                             "--", *sim_cmd(scenario, eport, "--host", host, *sim_extra))
        self.procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                           stdin=subprocess.DEVNULL, start_new_session=True))
        return f"http://{host}:{rport}"

    def close(self) -> None:
        for p in self.procs:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            p.wait(timeout=30)


@pytest.fixture
def group() -> Iterator[Group]:
    g = Group()
    yield g
    g.close()


def _group(url: str, verdict: str) -> dict[str, Any] | None:
    _status, body = readyz(url)
    g = body.get("group") or {}
    return body if g.get("verdict") == verdict else None


def _member_verdict(url: str, verdict: str, member: str) -> dict[str, Any] | None:
    """The leader's body once its group has ``verdict`` and the member's own judge too: the group may say hung
    from the member's old progress a moment before the member's own stall timeout runs out."""
    body = _group(url, verdict)
    seen = next((m for m in body["members"] if m["url"] == member), None) if body else None
    return body if seen is not None and seen["verdict"] == verdict else None


def _wait_group(group: Group, cond: Any, what: str, nodes: list[str]) -> Any:
    """``wait_for`` on the leader, and on a timeout a message that says what each node said and wrote: a group
    that never reaches its verdict must say why (hunt P: 90 s of waiting, no more than its name)."""
    try:
        return wait_for(cond, DEADLINE_S, what)
    except AssertionError as e:
        said = {u: {k: b.get(k) for k in ("verdict", "phase", "state", "group", "evidence")}
                for u in nodes for b in [readyz(u)[1]]}
        group.close()
        wrote = [(p.stdout.read() if p.stdout else "")[-1500:] for p in group.procs]
        raise AssertionError(f"{e}\nnodes: {json.dumps(said)[-6000:]}\noutput: {wrote}") from None


def _scrape(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def test_healthy_group_is_ready_with_every_member_listed(group: Group) -> None:
    members = [group.node(2, "normal"), group.node(3, "normal")]
    mport = free_port_on("127.0.1.1")
    leader = group.node(1, "normal", tuple(members), ("--metrics-port", f"127.0.1.1:{mport}", "--json"))
    body = wait_for(lambda: readyz(leader)[0] == 200 and readyz(leader)[1], DEADLINE_S, "group READY")
    assert body["group"]["verdict"] == "ready" and body["group"]["serving"]
    assert [m["url"] for m in body["members"]] == members
    assert all(m["state"] == "ready" and m["last_progress_at"] for m in body["members"])
    # the scrape says the same: the group's verdict and each member by its address and rank
    metrics = wait_for(lambda: (t := _scrape(f"http://127.0.1.1:{mport}/metrics"))
                       and "firstlight_group_serving 1.0" in t and t, 30, "the group in the scrape")
    assert 'firstlight_group_verdict{firstlight_group_verdict="ready"} 1.0' in metrics
    for m in members:
        address = m.removeprefix("http://")
        assert f'firstlight_group_member_ready{{member="{address}",node_rank=""}} 1.0' in metrics, metrics[-3000:]
    # and the leader's --json says it: a group object at each change, the last one ready with every member
    group.close()
    lines = (group.procs[-1].stdout.read() if group.procs[-1].stdout else "").splitlines()
    objs = [json.loads(line) for line in lines if line.startswith('{"event": "group"')]
    assert objs and objs[-1]["verdict"] == "ready" and objs[-1]["serving"], lines[-20:]
    assert [m["url"] for m in objs[-1]["members"]] == members and all(m["ok"] for m in objs[-1]["members"])


def test_a_leader_without_serve_readiness_still_reads_its_members_and_tells_the_group(group: Group) -> None:
    """A CI check of a group start: `up --stop-when-ready --json --member ...` with no endpoint of its own: the
    group is decided and told in --json all the same."""
    members = [group.node(2, "normal"), group.node(3, "normal")]
    for m in members:
        wait_for(lambda m=m: readyz(m)[0] == 200, DEADLINE_S, "a member READY")
    eport = free_port_on("127.0.1.1")
    cmd = firstlight_cmd("up", "--json", "--stop-when-ready", "--no-history", "--url", f"http://127.0.1.1:{eport}",
                         *[a for m in members for a in ("--member", m)],
                         "--", *sim_cmd("normal", eport, "--host", "127.0.1.1"))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-3000:]
    objs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith('{"event": "group"')]
    assert objs and objs[-1]["verdict"] == "ready" and [m["url"] for m in objs[-1]["members"]] == members, p.stdout
    assert "the group's state is not served: no --serve-readiness" in p.stdout + p.stderr


def test_a_member_hung_at_start_hangs_the_group_naming_it(group: Group) -> None:
    members = [group.node(2, "normal"), group.node(3, "hang")]
    leader = group.node(1, "normal", tuple(members))
    body = wait_for(lambda: _group(leader, "hung"), DEADLINE_S, "group hung")
    assert body["group"]["culprit"] == members[1]
    assert members[1] in body["group"]["evidence"][0]["message"]
    assert readyz(leader)[0] == 503


def test_a_member_that_dies_fails_the_group_naming_it(group: Group) -> None:
    members = [group.node(2, "normal"), group.node(3, "crash_oom")]
    leader = group.node(1, "normal", tuple(members))
    body = wait_for(lambda: _group(leader, "failed"), DEADLINE_S, "group failed")
    assert body["group"]["culprit"] == members[1]
    assert "failed" in body["group"]["evidence"][0]["message"]
    assert readyz(leader)[0] == 503


def test_after_ready_a_frozen_member_turns_the_leader_503_within_the_bound(group: Group) -> None:
    members = [group.node(2, "normal"), group.node(3, "normal")]
    leader = group.node(1, "normal", tuple(members))
    wait_for(lambda: readyz(leader)[0] == 200, DEADLINE_S, "group READY")
    assert AFTER_READY_BOUND_S == 3.0  # docs/multinode.md
    os.killpg(group.procs[1].pid, signal.SIGSTOP)  # the member's firstlight and its engine
    t0 = time.monotonic()
    wait_for(lambda: readyz(leader)[0] == 503, DEADLINE_S, "leader 503")
    took = time.monotonic() - t0
    assert took <= AFTER_READY_BOUND_S + 5.0, took  # the bound plus a busy machine's slack
    assert readyz(leader)[1]["group"]["culprit"] == members[1]


def test_sglang_worker_nodes_are_ready_by_their_port_never_by_their_dummy_health(group: Group) -> None:
    """SGLang's nodes of rank >= 1 run only schedulers, then a dummy /health that answers 200 forever: each is a
    worker (the command reader reads --node-rank), READY when its port is seen listening, never by a generation it
    cannot give (it has no /generate); the group READY after the leader's generation."""
    workers = [group.node(n, "normal", extra=("--engine", "sglang"), sim_extra=("--node-rank", str(n - 1)))
               for n in (2, 3)]
    for w in workers:
        body = wait_for(lambda w=w: (r := readyz(w)) and r[0] == 200 and r[1], DEADLINE_S, "a worker node READY")
        assert (body["role"], body["level"]) == ("worker", "port")
        assert "worker ready: pid" in body["evidence"][0]["value"], body["evidence"]
        serving = wait_for(lambda w=w: readyz(w)[1].get("serving"), DEADLINE_S, "its serving checks")
        assert body["phase"] == "ready" and serving["reason"] == "READY: the worker's port listens", serving
    leader = group.node(1, "normal", tuple(workers), ("--engine", "sglang"))
    body = wait_for(lambda: readyz(leader)[0] == 200 and readyz(leader)[1], DEADLINE_S, "group READY")
    assert body["role"] == "server" and body["evidence"][0]["signal"] == "probe:generation"
    assert body["group"]["verdict"] == "ready" and all(m["state"] == "ready" for m in body["members"])


def test_an_sglang_worker_node_that_dies_while_capturing_fails_the_group_naming_it(group: Group) -> None:
    workers = [group.node(2, "normal", extra=("--engine", "sglang"), sim_extra=("--node-rank", "1")),
               group.node(3, "crash_oom", extra=("--engine", "sglang"), sim_extra=("--node-rank", "1"))]
    leader = group.node(1, "normal", tuple(workers), ("--engine", "sglang"))
    body = wait_for(lambda: _group(leader, "failed"), DEADLINE_S, "group failed")
    assert body["group"]["culprit"] == workers[1]
    assert "CUDA out of memory" in json.dumps(body["group"]["evidence"][0]), body["group"]


def _vllm(group: Group, n: int, scenario: str, master: tuple[str, int], members: tuple[str, ...] = (),
          sim_extra: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> str:
    """A vLLM node: the head (node 1) listens on the process group's port; the others are ``--headless`` and join
    it (docs/serving/parallelism_scaling.md)."""
    host, port = master
    role = ("--nnodes", "3") if n == 1 else ("--headless", "--node-rank", str(n - 1), "--nnodes", "3")
    return group.node(n, scenario, members, ("--engine", "vllm", *extra),
                      ("--dialect", "vllm", *role, "--master-addr", host, "--master-port", str(port), *sim_extra))


def test_vllm_headless_nodes_are_ready_by_their_engines_and_their_connection_to_the_head(group: Group) -> None:
    """A vLLM --headless node serves no HTTP: READY once its engines said they are up (``init engine ... took``,
    ``Graph capturing finished``) and its process tree holds its connection to the head, seen in /proc; the group
    READY after the head's real generation and both nodes' READY."""
    master = ("127.0.1.1", free_port_on("127.0.1.1"))
    workers = [_vllm(group, n, "normal", master) for n in (2, 3)]
    leader = _vllm(group, 1, "normal", master, tuple(workers))
    body = wait_for(lambda: readyz(leader)[0] == 200 and readyz(leader)[1], DEADLINE_S, "group READY")
    assert body["role"] == "server" and body["evidence"][0]["signal"] == "probe:generation"
    assert body["group"]["verdict"] == "ready" and [m["url"] for m in body["members"]] == workers
    assert all(m["state"] == "ready" for m in body["members"]), body["members"]
    for w in workers:
        status, wbody = readyz(w)
        assert status == 200 and (wbody["role"], wbody["level"]) == ("worker", "port"), wbody
        seen = [e["value"] for e in wbody["evidence"]]
        assert f"is connected to its head {master[0]}:{master[1]}" in seen[0], seen
        assert "init engine" in seen[1] or "Graph capturing finished" in seen[1], seen
        serving = wait_for(lambda w=w: readyz(w)[1].get("serving"), DEADLINE_S, "its serving checks")
        assert serving["reason"] == "READY: the worker's engines are up and it holds its connection to its head"


def test_a_vllm_headless_node_is_not_ready_before_its_engines_say_so(group: Group) -> None:
    """Connected to its head from its first second (the handshake comes before the weights), a headless node that
    hangs while loading is never READY: the group hung, naming it."""
    master = ("127.0.1.1", free_port_on("127.0.1.1"))
    workers = [_vllm(group, 2, "normal", master), _vllm(group, 3, "hang", master)]
    leader = _vllm(group, 1, "normal", master, tuple(workers))
    body = _wait_group(group, lambda: (b := _group(leader, "hung")) and b["group"]["culprit"] == workers[1] and b,
                       "group hung naming the node", [leader, *workers])
    member = next(m for m in body["members"] if m["url"] == workers[1])
    assert member["phase"] == "weights_loading" and not member["ok"], member


def test_a_vllm_headless_node_that_dies_fails_the_group_naming_it(group: Group) -> None:
    master = ("127.0.1.1", free_port_on("127.0.1.1"))
    workers = [_vllm(group, 2, "normal", master), _vllm(group, 3, "crash_oom", master)]
    leader = _vllm(group, 1, "normal", master, tuple(workers))
    body = wait_for(lambda: _group(leader, "failed"), DEADLINE_S, "group failed")
    assert body["group"]["culprit"] == workers[1]
    assert "CUDA out of memory" in json.dumps(body["group"]["evidence"][0]), body["group"]


def test_a_vllm_headless_node_whose_head_never_answers_fails_with_the_handshake_error(group: Group) -> None:
    master = ("127.0.1.1", free_port_on("127.0.1.1"))  # nobody listens there
    worker = _vllm(group, 2, "normal", master, sim_extra=("--join-timeout", "1"))
    body = wait_for(lambda: (r := readyz(worker)[1]) and r.get("verdict") == "failed" and r, DEADLINE_S, "failed")
    assert "Did not receive response from front-end process" in body["evidence"][0]["value"], body["evidence"]


def test_after_ready_a_headless_node_whose_head_went_away_stops_serving(group: Group) -> None:
    """The connection is the headless node's only sign of serving: the head killed, the kernel closes it, and the
    node's /readyz turns 503 within the bound while its process lives on."""
    master = ("127.0.1.1", free_port_on("127.0.1.1"))
    worker = _vllm(group, 2, "normal", master, extra=("--serving-interval", "1"))
    _vllm(group, 1, "normal", master)
    wait_for(lambda: readyz(worker)[0] == 200, DEADLINE_S, "the node READY")
    head = _engine_of(group, 1)
    os.kill(head, signal.SIGKILL)  # the head's engine: the kernel closes its end of the connection
    t0 = time.monotonic()
    wait_for(lambda: readyz(worker)[0] == 503, DEADLINE_S, "the node 503")
    assert time.monotonic() - t0 <= 1.0 + 10.0  # its next check (--serving-interval 1) plus a busy machine's slack
    serving = readyz(worker)[1]["serving"]
    assert serving["state"] != "serving" and "connected to its head" in json.dumps(serving), serving


def _engine_of(group: Group, index: int) -> int:
    """The engine process a node's firstlight launched (its only child)."""
    fl = psutil.Process(group.procs[index].pid)
    return int(wait_for(lambda: (c := fl.children()) and c[0].pid, 30, "the node's engine"))


@pytest.mark.parametrize("fault", ["SIGSTOP", "SIGKILL"])
def test_a_vllm_headless_node_frozen_or_killed_while_loading_is_named_by_the_group(group: Group, fault: str) -> None:
    """A real fault on the engine of a headless node in the middle of its weights: frozen (SIGSTOP), its own
    firstlight says hung after --stall-timeout and the group hung names it; killed (SIGKILL), failed, named."""
    master = ("127.0.1.1", free_port_on("127.0.1.1"))
    workers = [_vllm(group, 2, "normal", master), _vllm(group, 3, "normal", master, sim_extra=("--load-seconds", "60"))]
    leader = _vllm(group, 1, "normal", master, tuple(workers))
    wait_for(lambda: readyz(workers[1])[1].get("phase") == "weights_loading", DEADLINE_S, "the node loading")
    os.kill(_engine_of(group, 1), getattr(signal, fault))
    verdict = "hung" if fault == "SIGSTOP" else "failed"
    body = _wait_group(group, lambda: _member_verdict(leader, verdict, workers[1]), f"group and node {verdict}",
                       [leader, *workers])
    assert body["group"]["culprit"] == workers[1], body["group"]
    member = next(m for m in body["members"] if m["url"] == workers[1])
    assert (member["verdict"], member["phase"]) == (verdict, "weights_loading"), member
    if fault == "SIGKILL":
        assert "SIGKILL" in json.dumps(body["group"]["evidence"]), body["group"]["evidence"]


def test_an_sglang_worker_node_hung_while_loading_hangs_the_group_naming_it(group: Group) -> None:
    workers = [group.node(2, "normal", extra=("--engine", "sglang"), sim_extra=("--node-rank", "1")),
               group.node(3, "hang", extra=("--engine", "sglang"), sim_extra=("--node-rank", "2"))]
    leader = group.node(1, "normal", tuple(workers), ("--engine", "sglang"))
    body = _wait_group(group, lambda: _member_verdict(leader, "hung", workers[1]), "group and node hung",
                       [leader, *workers])
    assert body["group"]["culprit"] == workers[1]
    member = next(m for m in body["members"] if m["url"] == workers[1])
    assert (member["verdict"], member["phase"], member["role"]) == ("hung", "weights_loading", "worker"), member


def test_a_sidecar_judges_a_headless_vllm_node_by_its_log_and_its_connection_as_the_manifest_runs_it(
        tmp_path: Path) -> None:
    """deploy/k8s/vllm-lws.yaml's worker: `watch URL --pid-from ... --engine vllm --log FILE --serve-readiness`
    beside an engine that was started on its own (`vllm serve ... --headless`, here the simulator's vLLM dialect),
    its output teed to the file: READY once its engines said so and it holds its connection to the head; the head
    killed, 503."""
    master = ("127.0.1.1", free_port_on("127.0.1.1"))
    head = subprocess.Popen(sim_cmd("normal", free_port_on("127.0.1.1"), "--host", "127.0.1.1", "--dialect", "vllm",
                                    "--master-addr", master[0], "--master-port", str(master[1])),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    log, token = tmp_path / "engine.log", f"node-{os.getpid()}-{time.monotonic_ns()}"
    rport = free_port_on("127.0.1.2")
    sidecar = subprocess.Popen(firstlight_cmd("watch", "http://127.0.1.2:8000", "--pid-from", token, "--engine", "vllm",
                                              "--log", str(log), "--serve-readiness", f"127.0.1.2:{rport}",
                                              "--serving-interval", "1", "--stall-timeout", str(STALL_S),
                                              "--no-history"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    node: subprocess.Popen[bytes] | None = None
    try:
        url = f"http://127.0.1.2:{rport}"
        wait_for(lambda: readyz(url)[0] == 503, DEADLINE_S, "the sidecar listening")
        with log.open("wb") as out:
            node = subprocess.Popen(sim_cmd("normal", None, "--host", "127.0.1.2", "--dialect", "vllm", "--headless",
                                            "--master-addr", master[0], "--master-port", str(master[1]),
                                            "--served-model-name", token),
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        body = wait_for(lambda: (r := readyz(url)) and r[0] == 200 and r[1], DEADLINE_S, "the node READY")
        assert (body["role"], body["pid"]) == ("worker", node.pid), body
        seen = [e["value"] for e in body["evidence"]]
        assert f"is connected to its head {master[0]}:{master[1]}" in seen[0] and "Graph capturing" in seen[1], seen
        head.kill()  # the head goes: the kernel closes the node's connection
        wait_for(lambda: readyz(url)[0] == 503, DEADLINE_S, "the node 503 once its head is gone")
    finally:
        for p in (sidecar, head, node):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
