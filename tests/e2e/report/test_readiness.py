"""--serve-readiness: /readyz, /livez and /startupz from firstlight's state, and the sidecar loop that watches
start after start (the simulated server as the engine; the real llama-server is in test_readiness_llama.py).

The process-starting tests of this subject; the others: ``tests/unit/report/test_readiness.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from firstlight.history import History
from firstlight.report.base import QuietReporter
from firstlight.result import RunResult
from firstlight.runner.outcome import Outcome
from firstlight.runner.rewatch import ProcessMatcher, Rewatch, Target
from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, run_firstlight, sim_cmd, wait_for
from tests.support.readiness import FAST, _outcome, answers, get


@pytest.mark.parametrize("spec", ["host:", "127.0.0.1:http", "1:70000", ""])
def test_bad_bind_specs_are_usage_errors(spec: str):
    r = run_firstlight("watch", "http://127.0.0.1:1", "--serve-readiness", spec, "--timeout", "1")
    assert r.rc == 64 and "--serve-readiness" in r.stderr and "Traceback" not in r.stderr


def test_a_taken_readiness_port_is_a_usage_error_of_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = run_firstlight("watch", "http://127.0.0.1:1", "--serve-readiness", f"127.0.0.1:{port}", "--timeout", "1")
    assert r.rc == 64 and "cannot listen" in r.stderr and "Traceback" not in r.stderr
    assert len([line for line in r.stderr.splitlines() if line.startswith("Error")]) == 1


# -- the re-watch strategy on its own ------------------------------------------------------------------------
class Recorder(QuietReporter):
    """A reporter that remembers the messages and summaries it was told."""

    def __init__(self) -> None:
        self.summaries: list[dict[str, Any]] = []
        self.messages: list[str] = []

    def message(self, text: str) -> None:
        self.messages.append(text)

    def summary(self, result: RunResult) -> None:
        self.summaries.append(result.to_dict())


def _waiting_child() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)


def test_rewatch_reports_the_end_of_serving_and_watches_the_next_process():
    first, second = _waiting_child(), _waiting_child()
    reporter = Recorder()
    watched: list[int | None] = []

    class Matcher(ProcessMatcher):
        def find(self, port: int | None = None) -> Target | None:  # the first until it is gone, then the second
            return Target.of(second.pid if first.poll() is not None else first.pid)

    def run_start(target: Target) -> Outcome:
        watched.append(target.pid)
        if target.pid == first.pid:
            assert first.stdin is not None
            first.stdin.close()  # it serves, then exits: the loop must notice and say so
            return _outcome("ready", ready_at=time.time())
        return _outcome("interrupted")

    try:
        out = Rewatch(run_start, reporter, "http://127.0.0.1:1", matcher=Matcher("unused"), poll_s=0.02).run()
    finally:
        for p in (first, second):
            p.kill()
            p.wait()
    assert watched == [first.pid, second.pid]
    ended = reporter.summaries[0]
    assert ended["verdict"] == "failed" and ended["phase"] == "serving"
    # how it ended, where its wait status could still be read (a zombie not yet reaped), or that it exited
    assert f"server pid {first.pid} exited" in ended["evidence"][0]["value"], ended["evidence"]
    assert "after serving" in ended["evidence"][0]["value"]
    assert out.verdict == "interrupted" and out.exit_code == 130


def test_rewatch_watches_the_same_start_again_after_a_timeout():
    engine = _waiting_child()
    watched: list[int | None] = []

    def run_start(target: Target) -> Outcome:
        watched.append(target.pid)
        return _outcome("timeout" if len(watched) == 1 else "interrupted")

    try:
        first = Target.of(engine.pid)
        out = Rewatch(run_start, Recorder(), "http://127.0.0.1:1", first=first, poll_s=0.02).run()
    finally:
        engine.kill()
        engine.wait()
    assert watched == [engine.pid, engine.pid] and out.verdict == "interrupted"


def test_the_matcher_finds_the_top_process_of_a_matching_tree_and_never_itself():
    token = f"tok-{uuid.uuid4().hex[:8]}"
    child = f"import time; time.sleep(120)  # {token}"
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                                                     f"{child!r}])  # {token}"], start_new_session=True)
    try:
        matcher = ProcessMatcher(token)
        wait_for(lambda: len([p for p in __import__("psutil").Process(parent.pid).children()]) == 1, 30,
                 "the child process")
        found = matcher.find()
        assert found is not None and found.pid == parent.pid and found.alive()
        assert ProcessMatcher(f"pytest|{token}").find().pid != os.getpid()  # type: ignore[union-attr]
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert not found.alive()


# -- through the CLI, against the simulated server ---------------------------------------------------------
def _summaries(stdout: str) -> list[dict[str, Any]]:
    return [e for e in (json.loads(line) for line in stdout.splitlines() if line.startswith("{"))
            if e["event"] == "summary"]


def test_readyz_stays_503_while_the_model_list_answers_before_a_generation_works(weights: Path):
    """slow_first_request: /v1/models answers 200 from the moment the port opens, /health once the engine says
    ready, and the first generation then takes 3 s more. /readyz must say 503 through all of it."""
    port, rport = free_port(), free_port()
    fl = subprocess.Popen(firstlight_cmd("up", "--json", *FAST, "--serve-readiness", f"127.0.0.1:{rport}", "--",
                                         *sim_cmd("slow_first_request", port, "--model-path", str(weights))),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    polls: list[tuple[float, int, int, str | None]] = []  # (answered by, /readyz, /v1/models, level)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (polls and polls[-1][1] == 200):
            ready, body = get(rport, "/readyz")
            try:
                models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code
            except httpx.HTTPError:
                models = 0
            polls.append((time.time(), ready, models, body.get("level")))
            time.sleep(0.02)  # the polling period of this deadline-bounded loop
        assert polls and polls[-1][1] == 200, "/readyz never turned 200"
        assert get(rport, "/startupz")[0] == 200 and get(rport, "/livez")[0] == 200
        fl.send_signal(signal.SIGINT)
        out, _ = fl.communicate(timeout=60)
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
    ready_summary = _summaries(out)[0]
    generation_at = ready_summary["levels"]["generation"]
    before = [p for p in polls if p[0] < generation_at and p[1] != 0]  # answered (firstlight listens) in time
    window = [p for p in before if p[2] == 200]
    assert window, "the window where /v1/models answers before a generation works was never polled"
    assert all(p[3] != "generation" for p in before)
    assert all(p[1] == 503 for p in before), [p for p in before if p[1] != 503]
    assert _summaries(out)[-1]["verdict"] == "interrupted"


def _start_sim(scenario: str, port: int, token: str, weights: Path, reap: list[int]) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(sim_cmd(scenario, port, "--model-path", str(weights), "--served-model-name", token),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    reap.append(p.pid)
    return p


def _kill(p: subprocess.Popen[bytes]) -> None:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def test_sidecar_serves_hung_and_failed_verdicts_and_watches_each_restart(weights: Path, reap: list[int],
                                                                          tmp_path: Path):
    port, rport, token = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    history = tmp_path / "history.sqlite3"
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid-from", token, "--json", *FAST,
                                         "--stall-timeout", "2", "--history", str(history),
                                         "--serve-readiness", f"127.0.0.1:{rport}"),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: answers(rport, "/livez", 200, start=0), 60, "the sidecar, waiting for an engine")
        # 1. the weights load, then nothing moves: hung, /livez 503, and the sidecar goes on serving
        hung_sim = _start_sim("hang_after_load", port, token, weights, reap)
        body = wait_for(lambda: answers(rport, "/livez", 503, start=1), 60, "/livez 503 after the hang")
        assert body["verdict"] == "hung" and body["evidence"] and body["pid"] == hung_sim.pid
        assert get(rport, "/readyz")[0] == 503 and get(rport, "/startupz")[0] == 503 and fl.poll() is None
        # 2. the kubelet restarts the engine: this start dies of an OOM: failed, /livez 503 again
        _kill(hung_sim)
        oom_sim = _start_sim("crash_oom", port, token, weights, reap)
        body = wait_for(lambda: answers(rport, "/livez", 503, start=2), 60, "/livez 503 after the crash")
        assert body["verdict"] == "failed" and body["pid"] == oom_sim.pid and fl.poll() is None
        # 3. the next start serves: /readyz follows it
        oom_sim.wait(timeout=30)
        good_sim = _start_sim("normal", port, token, weights, reap)
        body = wait_for(lambda: answers(rport, "/readyz", 200, start=3), 60, "/readyz 200 for the third start")
        assert body["verdict"] == "ready" and body["pid"] == good_sim.pid
        assert get(rport, "/livez")[0] == 200 and get(rport, "/startupz")[0] == 200
        # 4. the serving engine dies: not ready, not live, until the next start
        _kill(good_sim)
        body = wait_for(lambda: answers(rport, "/readyz", 503, verdict="failed"), 30, "/readyz 503 after the exit")
        assert "exited after serving" in body["evidence"][0]["value"] and get(rport, "/livez")[0] == 503
        fl.send_signal(signal.SIGTERM)
        out, _ = fl.communicate(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
    assert fl.returncode == 130
    assert [s["verdict"] for s in _summaries(out)] == ["hung", "failed", "ready", "failed", "interrupted"]
    with History(history) as h:  # each start is one run
        assert sorted(r.summary["verdict"] for r in h.runs()) == ["failed", "hung", "ready"]


def test_sidecar_by_url_follows_the_port_closing_and_opening_again(weights: Path, reap: list[int]):
    port, rport, token = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", *FAST, "--no-history",
                                         "--serve-readiness", f"127.0.0.1:{rport}"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        sim = _start_sim("normal", port, token, weights, reap)
        wait_for(lambda: answers(rport, "/readyz", 200, start=1), 60, "/readyz 200")
        _kill(sim)
        body = wait_for(lambda: answers(rport, "/readyz", 503, verdict="failed"), 30, "/readyz 503, port closed")
        assert "stopped accepting connections" in body["evidence"][0]["value"]
        _start_sim("normal", port, token, weights, reap)
        wait_for(lambda: answers(rport, "/readyz", 200, start=2), 60, "/readyz 200 for the restarted engine")
        fl.send_signal(signal.SIGTERM)
        assert fl.wait(timeout=30) == 130
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()


@pytest.mark.parametrize("args, needle", [
    (["--pid", "1", "--pid-from", "x"], "exclude each other"),
    (["--pid-from", "(unclosed"], "not a valid regular expression"),
    (["--pid-from", "no-such-process-" + uuid.uuid4().hex], "no process matches"),
    (["--serve-readiness", "0", "--record", "/tmp/x.jsonl"], "--record"),
])
def test_watch_process_options_are_checked(args: list[str], needle: str):
    r = run_firstlight("watch", "http://127.0.0.1:1", "--timeout", "1", *args)
    assert r.rc == 64 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_sidecar_restarted_under_a_serving_engine_records_no_cold_start(weights: Path, reap: list[int],
                                                                          tmp_path: Path):
    port, rport, token = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    sim = _start_sim("normal", port, token, weights, reap)
    wait_for(lambda: answers_http(port), 60, "the engine serving before the sidecar starts")
    history = tmp_path / "history.sqlite3"
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid-from", token, *FAST,
                                         "--history", str(history), "--serve-readiness", f"127.0.0.1:{rport}"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        body = wait_for(lambda: answers(rport, "/readyz", 200, start=1), 60, "/readyz 200")
        assert body["pid"] == sim.pid
        fl.send_signal(signal.SIGTERM)
        _, err = fl.communicate(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
    assert f"pid {sim.pid} started before this watch: not recorded" in err
    assert not history.exists() or not History(history).runs()


def answers_http(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_endpoints_never_show_a_secret(weights: Path, reap: list[int]):
    port, rport, token = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    secret = f"sk-{uuid.uuid4().hex}"
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid-from", token, *FAST,
                                         "--no-history", "--api-key", secret, "--serve-readiness",
                                         f"127.0.0.1:{rport}"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    bodies: list[str] = []
    try:
        wait_for(lambda: answers(rport, "/livez", 200, start=0), 60, "the sidecar")
        p = subprocess.Popen(sim_cmd("normal", port, "--model-path", str(weights), "--served-model-name", token,
                                     "--api-key", secret), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        reap.append(p.pid)

        def ready() -> bool:
            r = httpx.get(f"http://127.0.0.1:{rport}/readyz", timeout=2)
            bodies.append(r.text)
            return r.status_code == 200

        wait_for(ready, 60, "/readyz 200 with an API key")
        fl.send_signal(signal.SIGTERM)
        assert fl.wait(timeout=30) == 130
    finally:
        if fl.poll() is None:  # a sidecar that did not stop is not left behind
            fl.kill()
            fl.wait()
    assert len(bodies) > 1 and not [b for b in bodies if secret in b]


def test_a_sidecar_whose_start_outlives_timeout_records_that_start_once(weights: Path, reap: list[int],
                                                                        tmp_path: Path):
    """--timeout in the sidecar ends one watch of a start, not the start: the same start is watched again, and
    its repeated timeouts are not runs of their own in the history (one start is one run)."""
    port, rport, token = free_port(), free_port(), f"tok-{uuid.uuid4().hex[:8]}"
    history = tmp_path / "history.sqlite3"
    fl = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{port}", "--pid-from", token, *FAST,
                                         "--timeout", "2", "--stall-timeout", "600", "--history", str(history),
                                         "--serve-readiness", f"127.0.0.1:{rport}"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: answers(rport, "/livez", 200, start=0), 60, "the sidecar, waiting for an engine")
        sim = _start_sim("hang_after_load", port, token, weights, reap)
        # the third watch of the same start: two timeouts are behind it
        wait_for(lambda: answers(rport, "/readyz", 503, start=3, pid=sim.pid), 90, "the start watched a third time")
        fl.send_signal(signal.SIGTERM)
        fl.wait(timeout=30)
    finally:
        if fl.poll() is None:
            fl.kill()
            fl.wait()
        _kill(sim)
    with History(history) as h:
        verdicts = [r.summary["verdict"] for r in h.runs()]
    assert "timeout" not in verdicts and len(verdicts) == 1, verdicts
