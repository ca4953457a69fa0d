"""Server text never reaches a terminal or a page raw (issue 20): U+202E and the other bidi controls and NUL
in the lines a real server prints (echoed by ``up``, kept in the HTML report) and in a journal's invocation
ids; a journal entry with a 400-digit ``__REALTIME_TIMESTAMP`` or a 5,000-digit ``EXIT_STATUS`` is skipped,
never exit 70."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from firstlight.sim.fixtures import free_port
from firstlight.units.journal.entries import MSG_PROCESS_EXIT
from tests.support.common import run_firstlight

HOSTILE = ("\u202e", "\u2066", "\u200f", "\x00", "\x07")


def test_up_echoes_and_reports_server_lines_with_bidi_controls_and_nul_neutralised(tmp_path: Path):
    server = [sys.executable, "-c", "import sys; sys.stdout.buffer.write('load gnp.exe\\u202e and \\u2066x\\u2069 "
              "nul\\x00 bell\\x07 rtl\\u200f\\n'.encode()); sys.stdout.flush(); sys.exit(3)"]
    report = tmp_path / "report.html"
    r = run_firstlight("up", "--json", "--no-preflight", "--report", str(report), "--url",
                       f"http://127.0.0.1:{free_port()}", "--timeout", "60", "--", *server, timeout=120)
    assert r.rc == 1, r.stderr[-2000:]
    assert "load gnp.exe" in r.stderr  # the line is shown...
    assert not [c for c in HOSTILE if c in r.stderr], repr(r.stderr[-2000:])  # ...neutralised
    assert not [c for c in HOSTILE if c in r.stdout]
    page = report.read_text(encoding="utf-8")
    assert "load gnp.exe" in page and not [c for c in HOSTILE if c in page]


def _entry(t_us: str, message: str, **fields: str) -> str:
    return json.dumps({"__REALTIME_TIMESTAMP": t_us, "MESSAGE": message, **fields}) + "\n"


def test_a_journal_dump_with_hostile_ids_and_numbers_replays_without_exit_70(tmp_path: Path):
    evil_id = "0123\u202e4567\x00"
    t = 1_790_000_000_000_000
    dump = tmp_path / "dump.json"
    dump.write_text(
        _entry(str(t), "Started llm.service.", UNIT="llm.service", INVOCATION_ID=evil_id)
        + _entry(str(t + 1000), "llama_model_loader: loaded meta data", _SYSTEMD_UNIT="llm.service",
                 _SYSTEMD_INVOCATION_ID=evil_id)
        + _entry("9" * 400, "a time of 400 digits", _SYSTEMD_UNIT="llm.service", _SYSTEMD_INVOCATION_ID=evil_id)
        + _entry(str(t + 2000), "llm.service: Main process exited, code=exited, status=1/FAILURE",
                 UNIT="llm.service", INVOCATION_ID=evil_id, MESSAGE_ID=MSG_PROCESS_EXIT, EXIT_CODE="exited",
                 EXIT_STATUS="7" * 5000))
    r = run_firstlight("replay", "--unit", "llm", "--journal-file", str(dump), "--json", timeout=60)
    assert r.rc in (0, 1, 3) and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert "0123" in r.stderr and not [c for c in HOSTILE if c in r.stderr + r.stdout], repr(r.stderr)
    assert "400 digits" not in r.stdout  # skipped
