"""A previous run's crash in an append-mode log never fails this start (issue 20): a log without dates
(llama.cpp) is read from where it ended when the watch began, and with dates a fatal line counts only when it
is later than the process's start (a crash 100 ms before a ``Restart=on-failure`` restart is the old run's).
Real files, a real server process writing its log in append mode.

The in-process tests of this subject; the others: ``tests/e2e/hostile/test_stale_crash.py``.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from firstlight.samplers.logs import FileFollower
from firstlight.timeline import LogLine, Observation, SourceNote
from tests.support.common import wait_for

OLD_OOM = (b"ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: "
           b"out of memory\nllama_model_load: error loading model: unable to allocate CUDA0 buffer\n")


def _texts(obs: list[Observation]) -> list[str]:
    return [o.text for o in obs if isinstance(o, LogLine)]


def _follow(log: Path, since: float, start_size: int | None = None, notes: list[str] | None = None) -> list[str]:
    got: list[Observation] = []
    f = FileFollower(log, interval=0.02, since=since, start_size=start_size)
    f.start(got.append)
    try:
        f.sync(10)
        with open(log, "ab") as out:  # this run goes on writing
            out.write(b"main: server is listening on http://127.0.0.1:8080\n")
        wait_for(lambda: any("listening" in t for t in _texts(got)), 10, "the appended line")
    finally:
        f.stop()
    if notes is not None:
        notes.extend(o.message for o in got if isinstance(o, SourceNote))
    return _texts(got)


def test_an_undated_log_with_an_old_crash_is_read_from_where_it_ended(tmp_path: Path):
    log = tmp_path / "llama.log"
    log.write_bytes(b"llama_model_loader: loaded meta data\n" + OLD_OOM)  # fresh mtime: written "now"
    texts = _follow(log, since=time.time() - 1)
    assert not any("out of memory" in t or "unable to allocate" in t for t in texts), texts


def test_an_undated_log_is_read_from_where_it_ended_before_a_start_that_a_sidecar_found_late(tmp_path: Path):
    """The sidecar waited for the start and saw the log end at byte N (0: no file) before it began: the start's
    first lines, written before it was found, are read; the earlier start's crash before byte N is not."""
    log = tmp_path / "llama.log"
    log.write_bytes(OLD_OOM + b"llama_model_loader: loaded meta data\n")
    notes: list[str] = []
    texts = _follow(log, since=time.time() - 1, start_size=len(OLD_OOM), notes=notes)
    assert texts[0] == "llama_model_loader: loaded meta data", texts
    assert not any("out of memory" in t for t in texts), texts
    assert any(f"before this start began (byte {len(OLD_OOM)})" in n for n in notes), notes
    fresh = tmp_path / "fresh.log"
    fresh.write_bytes(b"llama_model_loader: loaded meta data\n")
    notes.clear()
    assert _follow(fresh, since=time.time() - 1, start_size=0, notes=notes)[0] == "llama_model_loader: loaded meta data"
    assert any("reading it whole: it was empty or absent before this start began" in n for n in notes), notes


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
