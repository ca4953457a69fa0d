"""Containers as the thing watched, against the real podman (Debian's package, rootful): `up -- podman run ...`
watches the container the CLI starts and stops it, `watch --container` attaches to one, and how a container
ended comes from the runtime's record and the kernel's.

The image is built here without a registry: `podman import` of an empty root filesystem; the host's /usr, this
Python and this checkout are mounted read-only, so the container runs the real simulator (`firstlight.sim`)
with this interpreter. On these machines podman's default ulimits are refused (`setrlimit RLIMIT_NPROC`/`NOFILE:
Operation not permitted`: podman asks for more than its own limits); a containers.conf with lower ones runs
(see the README's "Containers"), proven on the development machine, so under CI a podman that cannot run a
container fails these tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import IN_CI, REPO, Run, firstlight_cmd, require, run_firstlight, wait_for
from tests.support.llama_server import llama  # noqa: F401  the fixture: the set-up's llama-server and model

PODMAN_S = 120  # one podman call, on a loaded 2-core machine
RUN_S = 240  # one firstlight run
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=16384:16384"]
[engine]
events_logger = "file"
cgroup_manager = "cgroupfs"
"""


def podman(*args: str, env: dict[str, str], check: bool = True, timeout: float = PODMAN_S
           ) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=env,
                       stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {p.returncode}: {p.stderr[-2000:]}")
    return p


class Podman:
    def __init__(self, env: dict[str, str], image: str, mounts: list[str]) -> None:
        self.env, self.image, self.mounts = env, image, mounts
        self.names: list[str] = []

    def name(self) -> str:
        n = f"fl-test-{uuid.uuid4().hex[:10]}"
        self.names.append(n)
        return n

    def inspect(self, name: str) -> dict[str, Any] | None:
        p = podman("container", "inspect", name, env=self.env, check=False)
        return json.loads(p.stdout)[0] if p.returncode == 0 else None

    def state(self, name: str) -> dict[str, Any] | None:
        found = self.inspect(name)
        return found["State"] if found is not None else None

    def python(self, *args: str) -> list[str]:
        """The arguments after `podman run` that run this Python in the image, with ``args``."""
        return [*self.mounts, self.image, sys.executable, *args]


@pytest.fixture(scope="module")
def real_podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    import shutil
    require(shutil.which("podman") is not None, "podman (Debian's package: scripts/test.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("podman is proven to run containers here as root only (rootless: not tried)")
    work = tmp_path_factory.mktemp("podman")
    (work / "containers.conf").write_text(CONTAINERS_CONF)
    env = {**os.environ, "CONTAINERS_CONF": str(work / "containers.conf")}
    if shutil.which("runc") is not None:  # crun refused these machines' limits first; runc is what was proven
        env["CONTAINERS_CONF"] = str(work / "containers.conf")
        (work / "containers.conf").write_text(CONTAINERS_CONF + 'runtime = "runc"\n')
    rootfs = work / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:  # an empty root filesystem: the host's /usr is mounted in
        for d in ("usr", "tmp", "proc", "sys", "dev", "etc", "root", "run", "var"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    image = f"localhost/firstlight-test:{os.getpid()}"
    podman("import", str(rootfs), image, env=env)
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), REPO.resolve()}
    mounts = ["-v", "/usr:/usr:ro"]
    for root in sorted(roots):
        if not str(root).startswith("/usr/"):
            mounts += ["-v", f"{root}:{root}:ro"]
    ok = podman("run", "--rm", "--network", "host", *mounts, image, sys.executable, "-c", "print('ok')",
                env=env, check=False)
    if ok.returncode != 0 or "ok" not in ok.stdout:
        why = f"podman cannot run a container here: {ok.stderr.strip().splitlines()[-1:]}"
        if IN_CI:
            pytest.fail(f"CI: {why}", pytrace=False)
        pytest.skip(why)
    pod = Podman(env, image, mounts)
    yield pod
    for n in pod.names:
        podman("rm", "-f", "-t", "0", n, env=env, check=False)
    podman("rmi", "-f", image, env=env, check=False)


def sim(pod: Podman, port: int, weights: Path, *extra: str) -> list[str]:
    return ["-v", f"{weights}:{weights}:ro", *pod.python("-m", "firstlight.sim", "--dialect", "sglang", "--port",
                                                         str(port), "--model-path", str(weights), *extra)]


def notes(run: Run | list[dict[str, Any]]) -> list[str]:
    events = run.events if isinstance(run, Run) else run
    return [str(e.get("message") or e.get("text") or e) for e in events if e.get("event") == "note"]


def init_pid(texts: list[str]) -> int:
    found = [t for t in texts if "init pid " in t]
    assert found, texts
    return int(found[0].split("init pid ")[1].split(";")[0])


def test_up_watches_the_container_podman_starts_and_a_stop_signal_stops_the_container(
        real_podman: Podman, weights: Path, tmp_path: Path):
    port, name = free_port(), real_podman.name()
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        p = subprocess.Popen(firstlight_cmd("up", "--json", "--engine", "sglang", "--quiet-server", "--grace", "20",
                                            "--", "podman", "run", "--rm", "--name", name, "--network", "host",
                                            *sim(real_podman, port, weights, "--workers", "2")),
                             stdout=f, stderr=subprocess.PIPE, text=True, env=real_podman.env,
                             stdin=subprocess.DEVNULL)
    try:
        def events() -> list[dict[str, Any]]:  # whole lines only: the last one may be half written
            return [json.loads(line) for line in out.read_text().split("\n")[:-1] if line.startswith("{")]
        wait_for(lambda: any(e.get("event") == "summary" for e in events()), RUN_S, "the READY summary")
        ready = next(e for e in events() if e.get("event") == "summary")
        assert ready["verdict"] == "ready", ready
        pid = init_pid(notes(events()))
        state = real_podman.state(name)
        assert state is not None and state["Running"] and state["Pid"] == pid  # the container's, not the CLI's
        workers = psutil.Process(pid).children(recursive=True)
        assert len(workers) >= 2  # the init process's tree: the simulator's TP workers
        p.send_signal(signal.SIGTERM)  # while supervising: the container is stopped, not only the CLI
        _, err = p.communicate(timeout=RUN_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=30)
    assert p.returncode == 130, err[-3000:]
    assert "container stopped (podman stop -t 20" in err, err[-3000:]
    wait_for(lambda: real_podman.state(name) is None, PODMAN_S, "the --rm container to be gone")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_stop_when_ready_stops_a_detached_container_read_through_podman_logs(
        real_podman: Podman, weights: Path):
    port, name = free_port(), real_podman.name()
    # loading outlasts the start of `podman logs` (a second or more on a loaded machine): its lines are read live
    run = run_firstlight("up", "--json", "--engine", "sglang", "--stop-when-ready", "--", "podman", "run", "-d",
                         "--name", name, "--network", "host", *sim(real_podman, port, weights, "--load-seconds", "5"),
                         timeout=RUN_S, env=real_podman.env)
    assert run.rc == 0, run.stderr[-3000:]
    s = run.summary
    assert s["verdict"] == "ready"
    phases = [e["phase"] for e in run.events if e.get("event") == "phase"]
    assert "weights_loading" in phases  # the log's lines came through `podman logs --follow` (-d: no output)
    # the CLI's exit 0 (-d) is not the server's: no "server process exited" while the container runs
    assert not [e for e in run.events if e.get("event") == "warning"], run.events
    found = real_podman.inspect(name)
    assert found is not None and not found["State"]["Running"]  # stopped, not left running
    assert f"container stopped (podman stop -t 10 {found['Id'][:12]}" in run.stderr


@pytest.mark.parametrize("detach", [True, False], ids=["detached", "attached"])
def test_a_container_removed_from_outside_after_ready_ends_the_supervision(
        real_podman: Podman, weights: Path, tmp_path: Path, detach: bool):
    """``podman rm -f`` while firstlight supervises: the runtime then has no such container, and the start ends
    (it was reported running until firstlight was killed)."""
    port, name = free_port(), real_podman.name()
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        p = subprocess.Popen(firstlight_cmd("up", "--json", "--engine", "sglang", "--quiet-server", "--no-history",
                                            "--", "podman", "run", *(["-d"] if detach else []), "--rm", "--name",
                                            name, "--network", "host", *sim(real_podman, port, weights)),
                             stdout=f, stderr=subprocess.PIPE, text=True, env=real_podman.env,
                             stdin=subprocess.DEVNULL)
    try:
        def events() -> list[dict[str, Any]]:  # whole lines only: the last one may be half written
            return [json.loads(line) for line in out.read_text().split("\n")[:-1] if line.startswith("{")]
        wait_for(lambda: any(e.get("event") == "summary" for e in events()), RUN_S, "the READY summary")
        assert next(e for e in events() if e.get("event") == "summary")["verdict"] == "ready"
        podman("rm", "-f", "-t", "0", name, env=real_podman.env)
        _, err = p.communicate(timeout=RUN_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=30)
    summaries = [e for e in events() if e.get("event") == "summary"]
    assert len(summaries) == 2 and summaries[-1]["verdict"] == "failed", (summaries, err[-3000:])
    assert p.returncode == 1, err[-3000:]
    assert "already ended and is gone" in err, err[-3000:]


def test_a_container_killed_from_outside_is_named_from_the_runtimes_record(real_podman: Podman, weights: Path):
    port, name = free_port(), real_podman.name()
    p = subprocess.Popen(firstlight_cmd("up", "--json", "--engine", "sglang", "--", "podman", "run", "-d", "--name",
                                        name, "--network", "host", *sim(real_podman, port, weights,
                                                                        "--load-seconds", "120")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=real_podman.env,
                         stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: (real_podman.state(name) or {}).get("Running"), PODMAN_S, "the container to run")
        podman("kill", "-s", "KILL", name, env=real_podman.env)
        out, err = p.communicate(timeout=RUN_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=30)
    run = Run(p.returncode, out, err)
    assert run.rc == 1, err[-3000:]
    s = run.summary
    assert s["verdict"] == "failed" and s["failure"] != "oom"
    values = " | ".join(e["value"] for e in s["evidence"])
    assert "SIGKILL" in values and "from outside" in values
    # the runtime's record: what `podman inspect` says, also when the container ended before its processes were seen
    assert any("killed by SIGKILL (exit code 137)" in t for t in notes(run)), notes(run)


def test_a_container_over_its_memory_limit_is_an_oom_kill(real_podman: Podman):
    require(os.access("/dev/kmsg", os.R_OK), "a readable kernel log (/dev/kmsg): podman on cgroup v1 does not "
            "record OOMKilled")
    port = free_port()
    hog = "import sys; print('loading weights', flush=True); x = b'x' * (512 << 20); print(len(x))"
    run = run_firstlight("up", "--json", "--url", f"http://127.0.0.1:{port}", "--", "podman", "run", "--rm",
                         "--network", "host", "--memory", "64m", "--memory-swap", "64m",
                         *real_podman.python("-c", hog), timeout=RUN_S, env=real_podman.env)
    assert run.rc == 1, run.stderr[-3000:]
    s = run.summary
    assert s["verdict"] == "failed" and s["failure"] == "oom", s
    values = " | ".join(e["value"] for e in s["evidence"])
    assert "SIGKILL" in values and "Memory cgroup out of memory" in values


def test_watch_container_attaches_and_leaves_it_running(real_podman: Podman, weights: Path):
    port, name = free_port(), real_podman.name()
    podman("run", "-d", "--name", name, "--network", "host", *sim(real_podman, port, weights, "--load-seconds", "3"),
           env=real_podman.env)
    run = run_firstlight("watch", "--container", name, "--engine", "sglang", "--json", timeout=RUN_S,
                         env=real_podman.env)
    assert run.rc == 0, run.stderr[-3000:]
    assert run.summary["verdict"] == "ready"
    assert run.summary["url"] == f"http://127.0.0.1:{port}"  # from the command line, on the host's network
    state = real_podman.state(name)
    assert state is not None and init_pid(notes(run)) == state["Pid"]
    assert state["Running"]  # watch never stops what it did not start


def test_watch_container_reads_the_containers_first_lines(real_podman: Podman, tmp_path: Path):
    """The log is read from a moment before the runtime's ``StartedAt`` (podman may stamp it after the init process
    printed its first lines), so a container's first line counts."""
    name = real_podman.name()
    podman("run", "-d", "--name", name, "--network", "host",
           *real_podman.python("-c", "print('INFO the first line', flush=True); import time; time.sleep(120)"),
           env=real_podman.env)
    wait_for(lambda: "the first line" in podman("logs", name, env=real_podman.env).stdout, PODMAN_S,
             "the container's first line in its log")
    record = tmp_path / "rec.jsonl"
    run = run_firstlight("watch", "--container", name, "--url", f"http://127.0.0.1:{free_port()}", "--timeout", "8",
                         "--record", str(record), "--json", timeout=RUN_S, env=real_podman.env)
    assert run.summary["verdict"] == "timeout", run.stderr[-3000:]
    texts = [json.loads(line).get("text") for line in record.read_text().splitlines()]
    assert "INFO the first line" in texts, texts


def test_watch_of_no_such_container_is_a_usage_error(real_podman: Podman):
    run = run_firstlight("watch", "--container", f"no-such-{uuid.uuid4().hex[:8]}", "--runtime", "podman",
                         timeout=RUN_S, env=real_podman.env)
    assert run.rc == 64
    assert "no such container" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_the_watchdog_stops_the_container_when_firstlight_is_killed_with_sigkill(
        real_podman: Podman, weights: Path, tmp_path: Path):
    """firstlight dies without stopping anything (SIGKILL): its watchdog stops the container, not only the CLI."""
    port, name = free_port(), real_podman.name()
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        p = subprocess.Popen(firstlight_cmd("up", "--json", "--engine", "sglang", "--quiet-server", "--", "podman",
                                            "run", "--name", name, "--network", "host",
                                            *sim(real_podman, port, weights, "--load-seconds", "120")),
                             stdout=f, stderr=subprocess.DEVNULL, env=real_podman.env, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: any("init pid " in n for n in notes(
            [json.loads(x) for x in out.read_text().split("\n")[:-1] if x.startswith("{")])), RUN_S,
            "firstlight to find the container")
        p.kill()
        p.wait(timeout=60)
        wait_for(lambda: not (real_podman.state(name) or {}).get("Running"), RUN_S,
                 "the watchdog to stop the container")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)


@pytest.mark.parametrize("args, says", [
    (["up", "--", "podman", "run", "--rm", "img", "llama-server", "--port", "8080"], "not published with -p"),
    (["watch", "--container", "x", "--pid", "1"], "drop --pid"),
    (["watch", "--container", "x", "--serve-readiness", "8081"], "not supported"),
])
def test_container_usage_errors_are_one_line(args: list[str], says: str):
    run = run_firstlight(*args, timeout=RUN_S)
    assert run.rc == 64 and says in run.stderr and "Traceback" not in run.stderr, run.stderr


@pytest.mark.llama
def test_the_real_llama_server_in_a_container_on_a_published_port(
        real_podman: Podman, llama: dict[str, str]):  # noqa: F811 (the fixture imported above)
    """The real llama-server (the set-up's build) in the imported image, its port published with -p: the URL
    is the host port, the port held by podman's conmon counts as the server's, READY after a real generation."""
    host_port, name = free_port(), real_podman.name()
    cache = Path(llama["llama_server"]).resolve().parents[3]  # ~/.cache/firstlight: the binary and the model
    assert Path(llama["model"]).resolve().is_relative_to(cache)
    run = run_firstlight("up", "--json", "--stop-when-ready", "--", "podman", "run", "--rm", "--name", name,
                         "-p", f"{host_port}:8080", "-v", "/usr:/usr:ro", "-v", f"{cache}:{cache}:ro",
                         real_podman.image, llama["llama_server"], "-m", llama["model"], "--host", "0.0.0.0",
                         "--port", "8080", "-np", "1", "-c", "2048", timeout=RUN_S, env=real_podman.env)
    assert run.rc == 0, run.stderr[-3000:]
    s = run.summary
    assert s["verdict"] == "ready" and s["engine"] == "llamacpp", s
    assert s["url"] == f"http://127.0.0.1:{host_port}"
    assert "container stopped (podman stop -t 10" in run.stderr
    wait_for(lambda: real_podman.state(name) is None, PODMAN_S, "the --rm container to be gone")


def test_a_runtime_that_never_answers_is_given_up_on_at_its_timeout(tmp_path: Path):
    """Every runtime call is bounded: a stand-in `podman` that hangs (the point here is the hang itself)."""
    import time

    from firstlight.containers.runtime import Runtime, RuntimeFailure
    hung = tmp_path / "podman"
    hung.write_text("#!/bin/sh\nexec sleep 120\n")
    hung.chmod(0o755)
    runtime = Runtime("podman", binary=str(hung), timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(RuntimeFailure, match=r"podman container inspect: no answer within 1s"):
        runtime.inspect("x")
    with pytest.raises(RuntimeFailure, match=r"podman stop: no answer within 31s"):
        runtime.stop("x", 1.0)
    assert time.monotonic() - t0 < 90  # 1 s and 31 s, far from the 120 s the stand-in would take


# A start that fails when the test says so: it counts its starts in the container's own /tmp (kept across the
# runtime's restarts), prints that number, and exits 3 with its own error once /w/go<N> appears.
ATTEMPT = ("import os, sys, time\n"
           "n = int(open('/tmp/n').read()) + 1 if os.path.exists('/tmp/n') else 1\n"
           "open('/tmp/n', 'w').write(str(n))\n"
           "print(f'INFO loading the weights, start {n}', flush=True)\n"
           "deadline = time.time() + 200\n"
           "while not os.path.exists(f'/w/go{n}') and time.time() < deadline:\n"
           "    time.sleep(0.05)\n"
           "print(f'RuntimeError: start {n} failed', flush=True)\n"
           "sys.exit(3)\n")


@pytest.mark.parametrize("sample_interval", ["1", "5"])
def test_watch_container_follows_the_restart_policy_attempt_after_attempt(real_podman: Podman, tmp_path: Path,
                                                                          sample_interval: str):
    """``--restart on-failure:1``: the runtime starts the container twice. Each start is an attempt judged on its
    own lines and its own exit; the first failed one is reported and the watch goes on; the second's verdict is
    the watch's. Sampled every 5 s, the restart (0.1 s) always comes before the sampler's next look: the first
    start's exit is then read from podman's ``died`` event, its lines told from the second's by their times."""
    name, work = real_podman.name(), tmp_path / "w"
    work.mkdir()
    podman("run", "-d", "--name", name, "--restart", "on-failure:1", "--network", "host", "-v", f"{work}:/w:ro",
           *real_podman.python("-c", ATTEMPT), env=real_podman.env)
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        p = subprocess.Popen(firstlight_cmd("watch", "--container", name, "--url", f"http://127.0.0.1:{free_port()}",
                                            "--max-attempts", "3", "--restart-wait", "60", "--no-history", "--json",
                                            "--sample-interval", sample_interval),
                             stdout=f, stderr=subprocess.PIPE, text=True, env=real_podman.env,
                             stdin=subprocess.DEVNULL)
    try:
        def count(kind: str) -> int:  # whole lines only: the last one may be half written
            return sum(1 for line in out.read_text().split("\n")[:-1] if f'"event": "{kind}"' in line)
        wait_for(lambda: count("started") == 1, RUN_S, "the first attempt's watch to start")
        (work / "go1").touch()
        wait_for(lambda: count("started") == 2, RUN_S, "the second attempt's watch to start")
        (work / "go2").touch()
        _, err = p.communicate(timeout=RUN_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=30)
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert p.returncode == 1, err[-3000:]
    attempts = [e for e in events if e["event"] == "attempt"]
    assert len(attempts) == 1 and attempts[0]["attempt"] == 1 and attempts[0]["verdict"] == "failed"
    first = json.dumps(attempts[0]["evidence"])
    assert "start 1 failed" in first and "exited with code 3" in first and "start 2" not in first, first
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "summary" and kinds.count("summary") == 1 and kinds.count("verdict") == 1
    summary = events[-1]
    assert summary["verdict"] == "failed"
    evidence = json.dumps(summary["evidence"])
    assert "start 2 failed" in evidence and "start 1 failed" not in evidence  # judged on its own lines only
    c = summary["container"]
    assert (c["name"], c["runtime"], c["restart_policy"], c["attempt"]) == (name, "podman", "on-failure", 2)
    assert [(a["number"], a["restart_count"], a["verdict"]) for a in c["attempts"]] == [(1, 0, "failed"),
                                                                                       (2, 1, "failed")]
    assert c["attempts"][0]["started_at"] != c["attempts"][1]["started_at"]


def test_watch_container_without_a_restart_policy_ends_with_its_one_start(real_podman: Podman, tmp_path: Path):
    name, work = real_podman.name(), tmp_path / "w"
    work.mkdir()
    (work / "go1").touch()  # fails at once
    podman("run", "-d", "--name", name, "--network", "host", "-v", f"{work}:/w:ro",
           *real_podman.python("-c", ATTEMPT.replace("time.time() + 200", "time.time() + 3")), env=real_podman.env)
    t0 = time.monotonic()
    run = run_firstlight("watch", "--container", name, "--url", f"http://127.0.0.1:{free_port()}", "--max-attempts",
                         "3", "--restart-wait", "200", "--no-history", "--json", timeout=RUN_S, env=real_podman.env)
    assert run.rc == 1, run.stderr[-3000:]
    assert time.monotonic() - t0 < 150  # not the --restart-wait for a start that is not coming
    assert not [e for e in run.events if e.get("event") == "attempt"]  # no restart is coming: no waiting for one
    assert run.summary["container"]["restart_policy"] == "no" and run.summary["container"]["attempt"] == 1
