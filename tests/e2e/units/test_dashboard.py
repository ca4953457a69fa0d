"""``watch --unit`` on a terminal: the live dashboard gets the observations of the unit's start (a wrapper of the
reporters that lacked ``observe`` once left it blank there).

A real journal file (systemd-journal-remote writes it, journalctl follows it) holds a llama.cpp start still
loading; ``firstlight watch --unit`` runs as a user runs it, its stderr on a pseudo-terminal. The dashboard's
``log`` row (``[... ago] <line>``) is drawn only from observations: ``watch`` does not echo the server's lines,
so nothing else puts the journal's last line there.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import firstlight_cmd, wait_for
from tests.support.journal_export import UnitRun, journal_remote, write_journal

UNIT = "llm.service"
LAST_LINE = "llama_model_loader: loaded meta data with 33 key-value pairs and 292 tensors"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_watch_unit_on_a_terminal_draws_the_journals_lines_on_the_dashboard(tmp_path: Path):
    journal_remote()
    journal = tmp_path / "u.journal"
    run = UnitRun(UNIT, time.time() - 5)
    run.started()
    run.lines(["build: 11434 (llama.cpp)", "main: loading model", LAST_LINE])  # loading: no verdict yet
    write_journal(journal, bytes(run.out))
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    def shown() -> str:
        return _ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    cmd = firstlight_cmd("watch", "--unit", UNIT, "--journal-file", str(journal), "--url",
                         f"http://127.0.0.1:{free_port()}", "--engine", "llamacpp", "--no-history",
                         "--timeout", "120", "--sample-interval", "0.2")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL,
                         env={**os.environ, "COLUMNS": "160", "LINES": "30", "TERM": "xterm-256color"})
    try:
        wait_for(lambda: "ago] " + LAST_LINE in shown(), 60, "the dashboard's log row with the journal's last line")
        assert "firstlight llamacpp" in shown()  # the dashboard's head: this is the dashboard, not plain lines
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=60) == 130
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
