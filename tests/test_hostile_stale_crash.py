"""A previous run's crash in an append-mode log never fails this start (issue 20): a log without dates
(llama.cpp) is read from where it ended when the watch began, and with dates a fatal line counts only when it
is later than the process's start (a crash 100 ms before a ``Restart=on-failure`` restart is the old run's).
Real files, a real server process writing its log in append mode."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from firstlight.samplers.logs import FileFollower
from firstlight.sim.server import free_port
from firstlight.timeline import LogLine, Observation
from tests.support.common import REPO, require, run_firstlight, sim_cmd, wait_for

OLD_OOM = (b"ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: "
           b"out of memory\nllama_model_load: error loading model: unable to allocate CUDA0 buffer\n")


def _texts(obs: list[Observation]) -> list[str]:
    return [o.text for o in obs if isinstance(o, LogLine)]


def _follow(log: Path, since: float) -> list[str]:
    got: list[Observation] = []
    f = FileFollower(log, got.append, interval=0.02, since=since)
    f.start()
    try:
        f.sync(10)
        with open(log, "ab") as out:  # this run goes on writing
            out.write(b"main: server is listening on http://127.0.0.1:8080\n")
        wait_for(lambda: any("listening" in t for t in _texts(got)), 10, "the appended line")
    finally:
        f.stop()
    return _texts(got)


def test_an_undated_log_with_an_old_crash_is_read_from_where_it_ended(tmp_path: Path):
    log = tmp_path / "llama.log"
    log.write_bytes(b"llama_model_loader: loaded meta data\n" + OLD_OOM)  # fresh mtime: written "now"
    texts = _follow(log, since=time.time() - 1)
    assert not any("out of memory" in t or "unable to allocate" in t for t in texts), texts


def _stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def test_a_dated_crash_100ms_before_the_restart_is_the_previous_runs(tmp_path: Path):
    start = time.time() - 0.5
    log = tmp_path / "vllm.log"
    log.write_text(f"{_stamp(start - 0.1)} ERROR torch.OutOfMemoryError: CUDA out of memory.\n"
                   f"{_stamp(start + 0.05)} INFO Starting vLLM API server\n")
    texts = _follow(log, since=start)
    assert not any("out of memory" in t for t in texts), texts
    assert any("Starting vLLM API server" in t for t in texts), texts  # this run's own earlier line is read


def test_watch_of_a_healthy_llama_style_server_with_an_old_undated_crash_is_ready(tmp_path: Path):
    """The issue's case: the previous run's OOM in an append-mode log without dates, the new server healthy."""
    log = tmp_path / "llama.log"
    log.write_bytes(OLD_OOM)
    port = free_port()
    with open(log, "ab") as out:
        server = subprocess.Popen(sim_cmd("normal", port, "--dialect", "llamacpp", "--load-seconds", "1"),
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        r = run_firstlight("watch", f"http://127.0.0.1:{port}", "--pid", str(server.pid), "--log", str(log),
                           "--engine", "llamacpp", "--json", "--timeout", "60", "--poll-min", "0.05")
    finally:
        server.kill()
        server.wait()
    assert r.rc == 0 and r.summary["verdict"] == "ready", (r.summary, r.stderr[-2000:])


@pytest.fixture(scope="module")
def llama() -> dict[str, str]:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "setup_llama_server.py"), "--print-paths"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        require(False, f"llama-server and its model ({p.stderr.strip()[-200:]}); run scripts/setup_llama_server.py")
    return dict(json.loads(p.stdout))


@pytest.mark.llama
def test_the_real_llama_server_appending_to_a_log_with_an_old_oom_is_ready(llama: dict[str, str], tmp_path: Path):
    """As seen in the field: llama-server's output appended (``>>``) to a log whose last lines are the previous
    run's OOM; llama.cpp's lines carry no dates. Before: FAILED oom while the server answered 200."""
    log = tmp_path / "llama.log"
    log.write_bytes(b"llama_model_loader: loaded meta data with 33 key-value pairs\n" + OLD_OOM)
    port = free_port()
    server = [llama["llama_server"], "-m", llama["model"], "--host", "127.0.0.1", "--port", str(port), "-np", "1",
              "-c", "2048"]
    p = subprocess.Popen(["sh", "-c", f'exec "$@" >> {log} 2>&1', "sh", *server], stdin=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        r = run_firstlight("watch", f"http://127.0.0.1:{port}", "--pid", str(p.pid), "--log", str(log), "--json",
                           "--timeout", "120", "--poll-min", "0.05", "--engine", "llamacpp", timeout=180)
    finally:
        p.kill()
        p.wait()
    assert r.rc == 0 and r.summary["verdict"] == "ready", (r.summary.get("failure"), r.stderr[-2000:])
    assert "out of memory" not in json.dumps(r.summary["evidence"])
