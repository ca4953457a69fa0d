"""A previous run's crash in an append-mode log never fails this start (issue 20): a log without dates
(llama.cpp) is read from where it ended when the watch began, and with dates a fatal line counts only when it
is later than the process's start (a crash 100 ms before a ``Restart=on-failure`` restart is the old run's).
Real files, a real server process writing its log in append mode.

The process-starting tests of this subject; the others: ``tests/unit/samplers/test_logs_previous_run.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from firstlight.sim.fixtures import free_port
from tests.support.common import REPO, require, run_firstlight, sim_cmd

OLD_OOM = (b"ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: "
           b"out of memory\nllama_model_load: error loading model: unable to allocate CUDA0 buffer\n")


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
