"""Hostile checkpoints in preflight (issue 20): files whose ``open()`` blocks (a FIFO as a shard or index), index
entries that leave the model directory, and a check stuck on a hung mount (a real FIFO a reader blocks on,
standing in for NFS) under the whole-preflight deadline, SIGTERM and SIGINT.

The process-starting tests of this subject; the others: ``tests/unit/preflight/test_checkpoint.py``.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from firstlight.preflight import FAIL, WARN
from tests.support.common import REPO, run_firstlight, wait_for
from tests.support.preflight import make_checkpoint

CHECK_S = 60  # a subprocess that has not answered by then is stuck (the defect); the rule itself is seconds


def _preflight(d: Path) -> dict[str, Any]:
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", "vllm", "serve", str(d), timeout=CHECK_S)
    event = r.events[-1]
    return next(c for c in event["checks"] if c["name"] == "checkpoint") | {"rc": r.rc}


def test_a_fifo_as_a_shard_is_a_fail_not_a_block(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    shard = d / "model-00002-of-00003.safetensors"
    shard.unlink()
    os.mkfifo(shard)
    c = _preflight(d)
    assert c["rc"] == 1 and c["status"] == FAIL and f"{shard.name} is a FIFO" in c["evidence"], c


def test_a_fifo_as_the_index_is_a_fail_not_a_block(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    index = d / "model.safetensors.index.json"
    index.unlink()
    os.mkfifo(index)
    c = _preflight(d)
    assert c["status"] == FAIL and "model.safetensors.index.json is a FIFO" in c["evidence"], c


def test_a_fifo_as_config_json_does_not_block_the_quantization_check(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    (d / "config.json").unlink()
    os.mkfifo(d / "config.json")
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", "vllm", "serve", str(d), timeout=CHECK_S)
    assert r.events and r.events[-1]["event"] == "preflight", r.stderr[-2000:]


@pytest.mark.parametrize("entry", ["/dev/stdin", "../../etc/passwd", "/etc/shadow", "", "x" * 5000, "a\0b",
                                   "sub/../../outside.safetensors"])
def test_an_index_entry_outside_the_model_directory_or_no_file_name_fails(tmp_path: Path, entry: str):
    d = make_checkpoint(tmp_path / "m")
    index = d / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["evil.weight"] = entry
    index.write_text(json.dumps(data))
    c = _preflight(d)
    assert c["status"] == FAIL and "model.safetensors.index.json" in c["evidence"], c
    assert "sizes match" not in c["evidence"]
    assert any(why in c["evidence"] for why in ("outside the model directory", "empty", "NUL", "characters")), c


def test_an_index_entry_in_a_subdirectory_is_still_inside(tmp_path: Path):
    from tests.support.preflight import write_safetensors

    d = make_checkpoint(tmp_path / "m")
    (d / "sub").mkdir()
    write_safetensors(d / "sub" / "extra.safetensors", {"extra.weight": 4096})
    index = d / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["extra.weight"] = "sub/extra.safetensors"
    index.write_text(json.dumps(data))
    assert _preflight(d)["status"] == "ok"


# A check stuck in a read that never returns: the shard reader opens a real FIFO whose writer (the test) never
# writes, as a read on a hung NFS or FUSE mount does.
_STUCK = """
import sys
import firstlight.preflight.checkpoint as c
fifo = sys.argv.pop(1)
c.open_regular = lambda path: open(fifo, "rb")
from firstlight.cli.app import main
main(sys.argv[1:])
"""


def _stuck_run(tmp_path: Path, *args: str, **popen: Any) -> tuple[subprocess.Popen[str], Path, list[IO[bytes]]]:
    d = make_checkpoint(tmp_path / "m")
    fifo = tmp_path / "hung-mount"
    os.mkfifo(fifo)
    writers: list[IO[bytes]] = []
    holder = threading.Thread(target=lambda: writers.append(open(fifo, "wb")), daemon=True)  # noqa: SIM115
    holder.start()
    p = subprocess.Popen([sys.executable, "-c", _STUCK, str(fifo), *args, "--", "vllm", "serve", str(d)],
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, **popen)
    wait_for(lambda: writers, CHECK_S, "the preflight's reader to open the FIFO (then stuck in read)")
    return p, d, writers


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_up_while_a_preflight_check_is_stuck(tmp_path: Path, sig: signal.Signals):
    p, _, writers = _stuck_run(tmp_path, "up", "--json", "--timeout", "600")
    try:
        p.send_signal(sig)
        out, err = p.communicate(timeout=CHECK_S)
    finally:
        p.kill()
        p.wait()
        writers[0].close()
    assert p.returncode == 130, err[-2000:]
    assert '"event": "started"' not in out  # no server launched after the stop


def test_the_preflight_deadline_warns_naming_the_stuck_file_and_up_goes_on(tmp_path: Path):
    p, d, writers = _stuck_run(tmp_path, "up", "--json", "--timeout", "3", "--no-disk-sample")
    try:
        out, err = p.communicate(timeout=CHECK_S)
    finally:
        p.kill()
        p.wait()
        writers[0].close()
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert events and events[0]["event"] == "preflight", err[-2000:]
    check = next(c for c in events[0]["checks"] if c["name"] == "checkpoint")
    assert check["status"] == WARN and "timed out after 3s" in check["evidence"], check
    assert str(d / "model.safetensors.index.json") in check["evidence"], check  # the first file read
    assert events[-1]["event"] == "summary"  # up went on (and ended on its own --timeout)


# -- headers the safetensors loader refuses are a fail, never "ok" or "could not check" ----------------------
def _raw_safetensors(path: Path, header: bytes, data: int) -> None:
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + data)


def _one_shard(tmp_path: Path, header: bytes, data: int) -> Path:
    d = tmp_path / "m"
    d.mkdir()
    _raw_safetensors(d / "model.safetensors", header, data)
    (d / "config.json").write_text("{}")
    return d


@pytest.mark.parametrize("header, data, why", [
    (b'{"a":{"dtype":"U8","shape":[8],"data_offsets":[-8,0]}}', 8, "no valid data_offsets"),
    (b'{"a":{"dtype":"U8","shape":[8],"data_offsets":["0","8"]}}', 8, "no valid data_offsets"),
    (b'{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,1e400]}}', 8, "no valid data_offsets"),
    (b'{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}}',
     12, "overlap"),
    (b'{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[12,16]}}',
     16, "a gap"),
    (b'{"a":{"dtype":"F32","shape":[4,4],"data_offsets":[0,16]}}', 16, "is 64 bytes, its data_offsets span 16"),
    (b'{"a":{"shape":[4],"dtype":"F32","data_offsets":[0,8]}}', 8, "is 16 bytes, its data_offsets span 8"),
    (b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}", 0, "nested too deeply"),
])
def test_a_safetensors_header_the_loader_refuses_is_a_fail(tmp_path: Path, header: bytes, data: int, why: str):
    c = _preflight(_one_shard(tmp_path, header, data))
    assert c["status"] == FAIL and why in c["evidence"], c


def test_a_symlink_loop_as_a_shard_is_a_fail(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    shard = d / "model-00002-of-00003.safetensors"
    shard.unlink()
    os.symlink(shard.name, shard)  # points at itself
    c = _preflight(d)
    assert c["status"] == FAIL and shard.name in c["evidence"], c
    assert "could not check" not in c["evidence"]


def test_a_gguf_with_arrays_nested_3000_deep_is_a_fail(tmp_path: Path):
    d = tmp_path / "m"
    d.mkdir()
    body = struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + struct.pack("<Q", 3) + b"key" + struct.pack("<I", 9)
    for _ in range(3000):
        body += struct.pack("<IQ", 9, 1)  # an array of one array of ...
    body += struct.pack("<IQ", 4, 0)
    (d / "model.gguf").write_bytes(body)
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--", "llama-server", "-m", str(d / "model.gguf"),
                       timeout=CHECK_S)
    c = next(c for c in r.events[-1]["checks"] if c["name"] == "checkpoint")
    assert c["status"] == FAIL and "nested" in c["evidence"], c


def test_a_history_that_cannot_be_read_is_a_warning_and_the_forecast_goes_on_without_it(tmp_path: Path):
    d = make_checkpoint(tmp_path / "m")
    garbage = tmp_path / "h.db"
    garbage.write_bytes(b"this is not a SQLite database\n" * 100)
    r = run_firstlight("preflight", "--json", "--no-disk-sample", "--history", str(garbage), "--", "vllm", "serve",
                       str(d), timeout=CHECK_S)
    assert r.events and r.events[-1]["event"] == "preflight", r.stderr[-2000:]
    forecast = next(e for e in r.events if e["event"] == "forecast")
    assert forecast["source"] != "history"  # made without it
    warnings = [line for line in r.stderr.splitlines() if "warning: history:" in line]
    assert len(warnings) == 1 and "forecast without it" in warnings[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert garbage.read_bytes() == b"this is not a SQLite database\n" * 100  # read only: nothing lost
