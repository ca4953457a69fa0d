"""`watch --log` follows a CRI log file (what containerd and CRI-O write under /var/log/pods, what the node-log
sidecar reads) across the kubelet's rotation: ``0.log`` renamed to ``0.log.<YYYYMMDD-hhmmss>`` and a new ``0.log``
created, while the runtime may still write to the renamed file until it reopens its log. A real firstlight
follows real files renamed under it; every line arrives once, in order, and the verdict comes from a line of
the newest file."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import (
    firstlight_cmd,
    stand_in_engine,  # noqa: F401 (a fixture)
    wait_for,
)

RUN_S = 180.0  # the whole watch, on a loaded 2-core machine


def cri(text: str, stream: str = "stdout") -> bytes:
    """One CRI log record: `<RFC3339Nano> <stream> F <line>` (F: a full line; P would be a partial one)."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
    return f"{stamp} {stream} F {text}\n".encode()


def test_watch_log_follows_a_cri_file_across_the_kubelets_rotation(tmp_path: Path, stand_in_engine: int):  # noqa: F811
    d = tmp_path / "pods" / "default_vllm-qwen-7d9f_0b6a1c7e-1f2d-4c61-9a43-5b0f7e6d8c21" / "vllm"
    d.mkdir(parents=True)
    log = d / "0.log"
    out = tmp_path / "out.jsonl"
    record = tmp_path / "record.jsonl"
    pid = str(stand_in_engine)
    with out.open("w") as f:
        watch = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{free_port()}", "--pid", pid,
                                                "--engine", "vllm", "--log", str(log), "--json", "--record",
                                                str(record), "--stall-timeout", "600", "--timeout", "300",
                                                "--no-history"),
                                 stdout=f, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def notes() -> list[str]:
        lines = out.read_text().split("\n")[:-1]  # whole lines only
        return [str(e.get("message")) for e in map(json.loads, (x for x in lines if x.startswith("{")))
                if e.get("event") == "note"]

    written: list[str] = []
    try:
        wait_for(lambda: any("does not exist (yet)" in n for n in notes()), RUN_S, "the follower waiting for 0.log")
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)  # the runtime's open log

        def write(text: str) -> None:
            os.write(fd, cri(text))
            written.append(text)

        wait_for(lambda: any("appeared" in n for n in notes()), RUN_S, "the follower to open 0.log")
        for rotation in range(1, 4):
            for i in range(1, 26):
                write(f"INFO 12-02 19:{rotation:02d}:{i:02d} [loader.py:{i}] file {rotation}, line {i}")
            # the kubelet's rotation: rename, then the runtime reopens; what it writes in between lands in the
            # renamed file, which it still holds open
            os.rename(log, d / f"0.log.20261202-19{rotation:02d}00")
            write(f"INFO 12-02 19:{rotation:02d}:59 [loader.py:99] the last line of file {rotation}, after the rename")
            os.close(fd)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
            # the kubelet rotates a container's log at most every 10 s: the follower has moved on by then
            wait_for(lambda r=rotation: sum("was rotated" in n for n in notes()) >= r, RUN_S,
                     f"rotation {rotation} seen")
        write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
              "capacity of 79.10 GiB of which 11.88 MiB is free.")
        os.close(fd)
        _, err = watch.communicate(timeout=RUN_S)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate(timeout=30)
    assert watch.returncode == 1, err[-3000:]
    events = [json.loads(x) for x in out.read_text().splitlines() if x.startswith("{")]
    summary = events[-1]
    assert summary["event"] == "summary" and summary["verdict"] == "failed" and summary["failure"] == "oom"
    assert any("OutOfMemoryError" in e["value"] for e in summary["evidence"]), summary["evidence"]
    seen = [o["text"] for o in map(json.loads, record.read_text().splitlines()) if o.get("kind") == "log"]
    # each line once and in order; the CRI framing peeled or not (firstlight.framing takes it off)
    assert len(seen) == len(written), (len(seen), len(written))
    for got, text in zip(seen, written, strict=True):
        assert got.endswith(text), (got, text)
    assert sum("was rotated" in n for n in notes()) == 3
