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
from firstlight.samplers.logs import FileFollower, _copies, _mtime
from firstlight.samplers.weights import resolve_model_dir, total_weight_bytes
from firstlight.timeline import GpuSample, LogLine, Observation, SourceNote
from tests.support.common import FIXTURES as _FIXTURES
from tests.support.common import wait_for
from tests.support.logs import following

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


def test_copytruncate_under_a_fast_writer_loses_no_line_and_repeats_none(tmp_path: Path):
    """logrotate's copytruncate: the file copied to NAME.1 then truncated in place, and the writer at once writes
    past the old size (so the size alone never shows the truncation). Whether or not the follower read the last
    lines before the copy, every line arrives once: those after its last read from the copy, then the new file."""
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    with following(log, interval=0.05) as (_, got), log.open("ab") as w:
        w.write(b"a\nb\n")
        w.flush()
        wait_for(lambda: _texts(got) == ["a", "b"], 5, "the first lines")
        w.write(b"c\nd\n")  # the writer goes on; the rotation comes before the follower's next look
        w.flush()
        (tmp_path / "server.log.1").write_bytes(log.read_bytes())
        os.truncate(log, 0)
        w.write(b"".join(b"new %d\n" % i for i in range(20)))  # O_APPEND: from 0, past the old size at once
        w.flush()
        wait_for(lambda: _texts(got)[-1:] == ["new 19"], 5, "the new file's lines")
    assert _texts(got) == ["a", "b", "c", "d", *[f"new {i}" for i in range(20)]]
    notes = [o.message for o in got if isinstance(o, SourceNote)]
    assert any("server.log was truncated" in n and "server.log.1" in n for n in notes), notes


def test_a_truncated_files_unread_bytes_are_read_from_the_copy_that_ends_as_the_last_read(tmp_path: Path):
    """The copy is the sibling whose bytes before the last read's offset are the last bytes read; another file of
    the same name's family that differs there is not it; no such copy: the loss is said."""
    log = tmp_path / "server.log"
    got: list[Observation] = []
    f = FileFollower(log)
    f.delivery.sink = got.append
    f._tail = b"b\n"  # read up to offset 4 ("a\nb\n")
    (tmp_path / "server.log-20261206").write_bytes(b"a\nX\nnot it\n")  # differs before offset 4
    assert "are lost" in f._from_copy(4) and _texts(got) == []
    (tmp_path / "server.log.1").write_bytes(b"a\nb\nc\nd\n")
    said = f._from_copy(4)
    f.delivery.flush()
    assert said == "the 4 bytes written after the last read were read from its copy server.log.1", said
    assert _texts(got) == ["c", "d"]
    (tmp_path / "server.log.1").write_bytes(b"a\nb\n")
    f._tail = b"b\n"
    assert f._from_copy(4) == "nothing was written after the last read (its copy server.log.1 ends there)"
    f._tail = b""
    assert f._from_copy(0) == "nothing had been read from it"


def test_a_newer_sibling_that_is_not_the_copy_is_passed_over_for_the_one_that_is(tmp_path: Path):
    """The newest sibling is tried first; one that is too short, or whose bytes before the offset differ, is
    passed over, and an older one that ends as the last read did is the copy."""
    log = tmp_path / "server.log"
    got: list[Observation] = []
    f = FileFollower(log)
    f.delivery.sink = got.append
    (tmp_path / "server.log.1").write_bytes(b"a\nb\nc\n")
    os.utime(tmp_path / "server.log.1", (1_000_000, 1_000_000))
    (tmp_path / "server.log.2").write_bytes(b"a\n")  # newer, too short
    os.utime(tmp_path / "server.log.2", (1_000_002, 1_000_002))
    (tmp_path / "server.log-20261206").write_bytes(b"a\nX\nnot it\n")  # newer still, differs before offset 4
    os.utime(tmp_path / "server.log-20261206", (1_000_001, 1_000_001))
    f._tail = b"b\n"
    assert f._from_copy(4) == "the 2 bytes written after the last read were read from its copy server.log.1"
    f.delivery.flush()
    assert _texts(got) == ["c"]


def test_a_follower_that_skipped_ahead_behind_a_slow_consumer_takes_no_skip_for_a_truncation(tmp_path: Path):
    """Lines dropped unread (the consumer behind, the file 1 MiB past the follower) move the read offset without
    delivering them: the file is still the same file there, so the next lines follow with no truncation note."""
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    behind = [True]
    with following(log, interval=0.02, backlog=lambda: 10**6 if behind[0] else 0, max_pending=64 << 10) as (f, got):
        log.write_bytes(b"".join(b"line %06d\n" % i for i in range(100_000)))
        wait_for(lambda: f.dropped_lines > 0, 10, "lines dropped while the consumer is behind")
        behind[0] = False
        wait_for(lambda: _texts(got)[-1:] == ["line 099999"], 10, "the file's end")
        with log.open("ab") as w:
            w.write(b"after\n")
        wait_for(lambda: _texts(got)[-1:] == ["after"], 10, "the next line")
    assert not any("truncated" in o.message for o in got if isinstance(o, SourceNote))


def test_a_logs_rotated_copies_are_its_siblings_by_logrotates_names_newest_first(tmp_path: Path):
    """NAME.1 and NAME-DATE (not compressed, not the log itself, not another log's, not a folder), the newest
    first: the one a truncation most likely went to is tried first."""
    log = tmp_path / "server.log"
    names = ["server.log", "server.log.1", "server.log-20261205", "server.log.2.gz", "server.log-1.xz",
             "server.log.3.bz2", "server.log.4.zst", "server.logs.1", "other.log.1", "server.log.GZ"]
    for i, name in enumerate(names):
        (tmp_path / name).write_text(name)
        os.utime(tmp_path / name, (1_000_000 + i, 1_000_000 + i))
    (tmp_path / "server.log.d").mkdir()
    assert [p.name for p in _copies(log)] == ["server.log.GZ", "server.log-20261205", "server.log.1"]
    assert _mtime(tmp_path / "gone") == 0.0 and _mtime(log) == 1_000_000.0


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
