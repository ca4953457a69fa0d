"""The Python API (firstlight.api, re-exported from firstlight): its names, ``up`` against the real llama-server,
a crash, ``watch`` of a running server, the preflight and the replay of real logs.

The process-starting tests of this subject; the others: ``tests/unit/api/test_api.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import psutil
import pytest

import firstlight
from firstlight.result import RunResult
from firstlight.sim.fixtures import free_port
from tests.support.api import SECRET, _crash_cmd
from tests.support.common import REPO, children, pids_in_group, sim_cmd, wait_for
from tests.support.llama_server import llama, server_cmd  # noqa: F401  (llama: the fixture)


def test_up_of_a_command_that_crashes_raises_not_ready_with_failed_and_its_evidence(capfd: pytest.CaptureFixture[str]):
    with pytest.raises(firstlight.NotReady) as caught, firstlight.up(_crash_cmd(), port=free_port(), timeout=60,
                                                                     api_key=SECRET, history=False):
        pytest.fail("entered the block of a server that crashed")
    result = caught.value.result
    assert isinstance(result, RunResult)
    assert result.verdict == firstlight.FAILED and result.failure == "oom"
    assert any("CUDA out of memory" in str(e["value"]) for e in result.evidence), result.evidence
    message = str(caught.value)
    assert "\n" not in message and message.startswith("failed (oom)") and "CUDA out of memory" in message
    assert result.pid is not None and not pids_in_group(result.pid)
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # the API renders nothing
    assert SECRET not in message and SECRET not in repr(result.to_dict())


def test_up_stops_before_launch_when_a_preflight_check_fails(tmp_path: Path):
    """The preflight is up's, as the CLI runs it: a port already taken fails it, and nothing is launched."""
    marker = tmp_path / "launched"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cmd = [sys.executable, "-c", f"open({str(marker)!r}, 'w')", "--port", str(port)]
        with pytest.raises(firstlight.NotReady) as caught, firstlight.up(cmd, timeout=30, history=False):
            pytest.fail("entered")
    result = caught.value.result
    assert result.verdict == firstlight.FAILED and result.preflight is not None, result
    assert "port" in {c["name"] for c in result.preflight["checks"] if c["status"] == "fail"}, result.preflight
    assert not marker.exists()


@pytest.mark.llama
def test_up_enters_at_ready_after_a_real_generation_and_stops_the_whole_group_on_exit(llama: dict[str, str]):  # noqa: F811
    port = free_port()
    with firstlight.up(server_cmd(llama, port), timeout=300, history=False) as server:
        assert server.url == f"http://127.0.0.1:{port}"
        assert server.result.verdict == firstlight.READY and server.result.engine == "llamacpp"
        assert server.result.first_generation and server.result.first_generation["text"].strip()
        pgid = server.pid
        assert pgid is not None and server.alive and pids_in_group(pgid)
        r = httpx.post(f"{server.url}/v1/completions", json={"prompt": "Hello", "max_tokens": 4}, timeout=60)
        assert r.status_code == 200 and r.json()["choices"][0]["text"] is not None  # it serves in the block
    assert not pids_in_group(pgid)
    assert not psutil.pid_exists(pgid) or psutil.Process(pgid).status() == psutil.STATUS_ZOMBIE
    assert server.result.verdict == firstlight.READY and server.result.server_stopped
    assert server.alive is False


def test_watch_of_a_running_server_enters_at_ready_and_leaves_it_running(reap: list[int]):
    port = free_port()
    sim = subprocess.Popen(sim_cmd("normal", port, "--load-seconds", "1"), start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reap.append(sim.pid)
    with firstlight.watch(f"http://127.0.0.1:{port}", pid=sim.pid, timeout=60, history=False) as server:
        assert server.result.verdict == firstlight.READY and server.launched is False
        assert server.result.first_generation is not None
    assert sim.poll() is None and server.alive
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    os.killpg(sim.pid, signal.SIGTERM)
    sim.wait(timeout=30)


def test_watch_of_nothing_listening_raises_timeout_and_a_missing_pid_is_a_value_error():
    with pytest.raises(firstlight.NotReady) as caught, firstlight.watch(f"http://127.0.0.1:{free_port()}",
                                                                        timeout=1.5, history=False):
        pytest.fail("entered")
    assert caught.value.result.verdict == firstlight.TIMEOUT
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    with pytest.raises(ValueError, match=f"no process with pid {dead.pid}"):
        firstlight.watch("http://127.0.0.1:8000", pid=dead.pid)


def test_a_server_that_dies_in_the_block_is_seen_and_its_exit_raises_the_failed_result():
    port = free_port()
    with pytest.raises(firstlight.NotReady) as caught, firstlight.up(
            sim_cmd("normal", port, "--load-seconds", "1"), timeout=60, history=False) as server:
        assert server.result.verdict == firstlight.READY and server.alive
        os.kill(server.pid, signal.SIGKILL)  # the server's root, under supervision
        wait_for(lambda: server.alive is False, 30, "supervision to see the server die")
    result = caught.value.result
    assert result.verdict == firstlight.FAILED and result.phase == "serving", result
    assert server.result is result and not pids_in_group(server.pid)


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # gone meanwhile: polled by wait_for, never raise
        return ""


def test_ctrl_c_while_waiting_for_ready_is_the_callers_keyboard_interrupt_and_stops_the_server(tmp_path: Path):
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        import firstlight

        cm = firstlight.up({sim_cmd("hang", free_port())!r}, timeout=120, history=False, no_preflight=True)
        try:
            with cm:
                print("entered a server that hangs")
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
    """))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    caller = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        sim = wait_for(lambda: [c for c in children(caller.pid) if "firstlight.sim" in _cmdline(c)], 60,
                       "the server to be launched")[0]
        caller.send_signal(signal.SIGINT)
        out, _ = caller.communicate(timeout=60)
    finally:
        caller.kill()
    assert out.strip() == "KeyboardInterrupt" and caller.returncode == 0
    assert not pids_in_group(sim.pid)
