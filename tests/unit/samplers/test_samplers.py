"""Samplers observe real things: a real process tree, real files, a recorded NVML snapshot.

The in-process tests of this subject; the others: ``tests/e2e/samplers/test_samplers.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from firstlight.logtext import LineSplitter
from firstlight.samplers.gpu import GpuSampler, NvmlSnapshot
from firstlight.samplers.logs import FileFollower
from firstlight.samplers.weights import resolve_model_dir, total_weight_bytes
from firstlight.timeline import GpuSample, LogLine, Observation, SourceNote
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import wait_for

FIXTURES = _FIXTURES


def test_line_splitter_handles_redraws_invalid_utf8_and_long_lines():
    sp = LineSplitter(max_line_bytes=64 * 1024)
    assert sp.feed_events(b"Loading: 10%\rLoading: 50%\rLoad") == [("Loading: 10%", False), ("Loading: 50%", False)]
    assert sp.feed_events(b"ing: 100%\nbad \xff\xfe bytes\r\n\x1b[32mgreen\x1b[0m\n") == [
        ("Loading: 100%", True), ("bad \ufffd\ufffd bytes", True), ("green", True)]
    events = sp.feed_events(b"x" * 100_000)
    assert events and len(events[0][0]) == 64 * 1024
    assert sp.flush_events()[0][0] == "x" * (100_000 - 64 * 1024)


def test_file_follower_follows_rotation_and_truncation(tmp_path: Path):
    log = tmp_path / "server.log"
    got: list[Observation] = []
    f = FileFollower(log, interval=0.05)
    f.start(got.append)
    try:
        wait_for(lambda: any(isinstance(o, SourceNote) for o in got), 5, "the missing-file note")
        log.write_bytes(b"one\ntwo\n")
        wait_for(lambda: _texts(got) == ["one", "two"], 5, "the first lines")
        os.rename(log, tmp_path / "server.log.1")  # logrotate
        log.write_bytes(b"three\n")
        wait_for(lambda: _texts(got)[-1:] == ["three"], 5, "the line after rotation")
        log.write_bytes(b"4\n")  # truncated and rewritten in place (copytruncate)
        wait_for(lambda: _texts(got)[-1:] == ["4"], 5, "the line after truncation")
    finally:
        f.stop()
    notes = [o.message for o in got if isinstance(o, SourceNote)]
    assert any("rotated" in n for n in notes) and any("truncated" in n for n in notes)


def _texts(obs: list[Observation]) -> list[str]:
    return [o.text for o in obs if isinstance(o, LogLine)]


def _snapshot(tmp_path: Path, server: int, foreign: int) -> Path:
    data = json.loads((FIXTURES / "nvml_8gpu_stale_process.json").read_text())
    for d in data["devices"]:
        for p in d["processes"]:
            p["pid"] = {"SERVER": server, "FOREIGN": foreign}[p["pid"]]
    path = tmp_path / "nvml.json"
    path.write_text(json.dumps(data))
    return path


def test_gpu_sampler_reads_devices_and_processes_from_the_recorded_snapshot(tmp_path: Path):
    path = _snapshot(tmp_path, server=os.getpid(), foreign=1)
    out = GpuSampler(nvml=NvmlSnapshot.from_file(path)).sample()
    assert len(out) == 1 and isinstance(out[0], GpuSample)
    g = out[0]
    assert len(g.devices) == 8 and g.devices[1].memory_used == int(76.2 * (1 << 30))
    assert g.devices[0].utilization == 0.0
    holders = {(p.gpu, p.pid) for p in g.processes}
    assert (0, 1) in holders and (7, os.getpid()) in holders


class _NoGpu:
    def nvmlInit(self) -> None:
        raise RuntimeError("NVML Shared Library Not Found")


def test_gpu_sampler_without_a_gpu_says_so_once():
    s = GpuSampler(nvml=_NoGpu())
    first = s.sample()
    assert len(first) == 1 and isinstance(first[0], SourceNote) and "NVML Shared Library Not Found" in first[0].message
    assert s.sample() == []


def test_gpu_sampler_on_this_machine_never_raises():
    out = GpuSampler().sample()  # CI has no GPU: a note; a GPU machine: a sample
    assert len(out) == 1 and isinstance(out[0], (SourceNote, GpuSample))


def test_weights_total_and_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    snap = tmp_path / "hub" / "models--org--m" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    for name, size in (("a.safetensors", 100), ("b.safetensors", 50), ("pytorch_model.bin", 999), ("x.json", 5)):
        (snap / name).write_bytes(b"\0" * size)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    path = resolve_model_dir("org/m")
    assert path == snap
    assert total_weight_bytes(snap) == (150, 2)  # safetensors only: the .bin duplicate is not read
    assert resolve_model_dir("org/absent") is None
