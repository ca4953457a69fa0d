"""`watch --log` reads a followed file as `replay` reads the same file: a real corpus log whose frame is learned
from its own lines (a k9s log pane's `│ ` border, `tests/fixtures/corpus/a-vllm-k9s-routes-box-border.log`, dev
half), appended line by line to a file a real firstlight follows, gives the engine, phase and failure that
`replay` gives (vLLM, told by its route lines once the border is peeled; `generic` if it were not). Every wait
has a deadline; nothing sleeps."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from firstlight.logreplay import replay_log
from firstlight.sim.fixtures import free_port
from tests.support.common import (
    REPO,
    firstlight_cmd,
    stand_in_engine,  # noqa: F401 (a fixture)
    wait_for,
)

RUN_S = 180.0  # the whole watch, on a loaded 2-core machine
LOG = REPO / "tests" / "fixtures" / "corpus" / "a-vllm-k9s-routes-box-border.log"


def test_watch_log_learns_the_frame_of_a_followed_file_as_replay_does(tmp_path: Path, stand_in_engine: int):  # noqa: F811
    lines = LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    replayed = replay_log(LOG)
    assert replayed.engine == "vllm"  # the frame learned: the route lines read as vLLM's
    log = tmp_path / "server.log"
    log.touch()
    out = tmp_path / "out.jsonl"
    record = tmp_path / "record.jsonl"
    pid = str(stand_in_engine)
    with out.open("w") as f:
        watch = subprocess.Popen(firstlight_cmd("watch", f"http://127.0.0.1:{free_port()}", "--pid", pid,
                                                "--log", str(log), "--json", "--record", str(record),
                                                "--stall-timeout", "600", "--timeout", "300", "--no-history"),
                                 stdout=f, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def events() -> list[dict[str, object]]:
        whole = out.read_text().split("\n")[:-1]  # whole lines only
        return [json.loads(x) for x in whole if x.startswith("{")]

    def seen() -> list[str]:
        if not record.exists():
            return []
        whole = record.read_text().split("\n")[:-1]
        return [str(o["text"]) for o in map(json.loads, whole) if o.get("kind") == "log"]

    try:
        wait_for(lambda: any(e.get("event") == "started" for e in events()), RUN_S, "the watch to start")
        with log.open("a", encoding="utf-8") as fh:
            for i, line in enumerate(lines, 1):
                fh.write(line)  # one line a write, as an engine writes them
                fh.flush()
                if i == 1:  # followed live: the first line read before the others are written
                    wait_for(lambda: len(seen()) >= 1, RUN_S, "the first line read")
        wait_for(lambda: len(seen()) >= len(lines), RUN_S, "every line read")
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=RUN_S)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate(timeout=30)
    summary = events()[-1]
    assert summary["event"] == "summary", err[-3000:]
    assert summary["engine"] == replayed.engine
    assert summary["phase"] == replayed.phase
    assert (summary["failure"] or "none") == replayed.failure
    # the border peeled as replay peels it: from the line the frame is learned on
    assert seen()[-1].startswith("INFO 03-21 20:19:24 [launcher.py:34] Route: /v1/embeddings"), seen()
