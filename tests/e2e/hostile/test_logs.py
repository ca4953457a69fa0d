"""Log sources under hostile conditions (issue 15): an append-mode log holding a previous run's failure, a FIFO,
a flood of 50 MB/s from a real process. Real files, a real FIFO, a real pipe.

The process-starting tests of this subject; the others: ``tests/unit/samplers/test_logs.py``.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from firstlight.samplers.logs import FileFollower, PipeReader
from firstlight.sim.fixtures import free_port
from firstlight.timeline import LogLine, Observation, SourceNote
from tests.support.common import pids_in_group, run_firstlight, wait_for
from tests.support.hostile_logs import _texts


def test_a_fifo_delivers_each_line_as_it_arrives(tmp_path: Path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    got: list[Observation] = []
    f = FileFollower(fifo, interval=0.02)
    f.start(got.append)
    writer = subprocess.Popen([sys.executable, "-c", "import sys, time\nf = open(sys.argv[1], 'w')\n"
                               "f.write('first line\\n'); f.flush()\nsys.stdin.read()", str(fifo)],
                              stdin=subprocess.PIPE)
    try:
        wait_for(lambda: "first line" in _texts(got), 10, "the first line while the writer keeps the FIFO open")
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        writer.wait(timeout=10)
        f.stop()
        f.thread.join(5)
    assert not f.thread.is_alive()


FLOOD = """
import sys, time
line = b"x" * 99 + b"\\n"
chunk = line * 25_000  # 2.5 MB: 50 ms of a 50 MB/s flood
out = sys.stdout.buffer
start = time.monotonic()
for i in range(40):  # 100 MB in about 2 s
    out.write(chunk)
    out.flush()
    time.sleep(max(0.0, start + (i + 1) * 0.05 - time.monotonic()))
out.write(b"THE-END\\n")
out.flush()
"""


def test_a_50mb_per_s_flood_never_blocks_the_server_and_drops_with_a_count():
    """A terminal and a consumer that take a line per millisecond cannot keep up with 50 MB/s: the server must still
    finish writing (firstlight never back-pressures it), drops are counted in a note, and the newest line
    (where a fatal error would be) gets through with its true line number."""
    q: queue.Queue[Observation] = queue.Queue()
    server = subprocess.Popen([sys.executable, "-c", FLOOD], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert server.stdout is not None
    echoed: list[str] = []

    def slow_terminal(stream: str, text: str) -> None:  # a terminal that shows 2000 lines a second
        echoed.append(text)
        time.sleep(0.0005)

    reader = PipeReader(server.stdout, "stdout", slow_terminal, backlog=q.qsize, max_pending=256 << 10)
    reader.start(q.put)
    got: list[Observation] = []
    stop = threading.Event()

    def slow_consumer() -> None:
        while not stop.is_set():
            try:
                got.append(q.get(timeout=0.05))
            except queue.Empty:
                continue
            time.sleep(0.001)

    consumer = threading.Thread(target=slow_consumer, daemon=True)
    consumer.start()
    try:
        server.wait(timeout=120)  # blocked writes would take over 15 minutes at this consumer's pace
        wait_for(lambda: not reader.thread.is_alive(), 120, "every kept line handed on")
        wait_for(lambda: q.empty(), 120, "the consumer to take the rest")
    finally:
        stop.set()
        server.kill()
    assert reader.dropped_lines > 0
    notes = [o.message for o in got if isinstance(o, SourceNote)]
    assert any("dropped" in n for n in notes), notes
    last = [o for o in got if isinstance(o, LogLine)][-1]
    assert last.text == "THE-END" and last.lineno == 40 * 25_000 + 1


FLOOD_FOREVER = """
import sys, time
chunk = (b"x" * 99 + b"\\n") * 25_000
out = sys.stdout.buffer
start = time.monotonic()
i = 0
while True:  # 50 MB/s until stopped
    out.write(chunk)
    out.flush()
    i += 1
    time.sleep(max(0.0, start + i * 0.05 - time.monotonic()))
"""


def test_up_under_a_50mb_per_s_flood_still_reaches_its_verdict_and_stops_the_server():
    """The live path: the verdict loop keeps assessing (the --timeout fires), the drop is counted in a note,
    and the flooding server is stopped."""
    r = run_firstlight("up", "--json", "--quiet-server", "--no-history", "--timeout", "5", "--grace", "2",
                       "--url", f"http://127.0.0.1:{free_port()}", "--", sys.executable, "-c", FLOOD_FOREVER,
                       timeout=120)
    assert r.rc == 3, r.stderr[-2000:]
    s = r.summary
    assert s["verdict"] == "timeout" and s["server_stopped"].startswith("stopped")
    assert any("log flood" in n for n in s["notes"]), s["notes"]
    assert not pids_in_group(s["pid"])
