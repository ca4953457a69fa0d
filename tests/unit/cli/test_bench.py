
"""`firstlight bench` and `firstlight history` as click commands (CliRunner on the command objects): exit codes,
JSON, one-line errors.

The in-process tests of this subject; the others: ``tests/e2e/cli/test_bench.py``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from firstlight.cli.bench import bench_command
from firstlight.cli.history import history_command
from firstlight.sim.fixtures import free_port
from tests.support.bench import _sse_head, fake_server
from tests.support.bench_cli import invoke

FAST = ["--requests", "4", "-c", "2", "--output-len", "10", "--prompt-len", "16"]


def test_server_down_is_exit_1_with_one_line(tmp_path: Path):
    r = invoke(bench_command, [f"http://127.0.0.1:{free_port()}", *FAST, "--history", str(tmp_path / "h")])
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1 and "connection refused" in r.stderr
    r = invoke(bench_command, [f"http://127.0.0.1:{free_port()}", *FAST, "--json", "--no-history"])
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and out["verdict"] == "failed" and "connection refused" in out["error"]


def test_failed_requests_are_exit_1_and_timeouts_exit_3(tmp_path: Path):
    def http_500(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        h.send_response(500)
        h.send_header("Content-Length", "2")
        h.end_headers()
        h.wfile.write(b"no")

    def stall(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        _sse_head(h)
        stop.wait(30)

    with fake_server(http_500) as url:
        r = invoke(bench_command, [url, *FAST, "--warmup", "0", "--json", "--no-history"])
    assert r.exit_code == 1 and json.loads(r.stdout)["bench"]["errors"] == 4
    with fake_server(stall) as url:
        r = invoke(bench_command, [url, *FAST, "--warmup", "0", "--json", "--no-history", "--request-timeout", "0.3"])
        assert r.exit_code == 3 and json.loads(r.stdout)["bench"]["timeouts"] == 4
        r = invoke(bench_command, [url, *FAST, "--warmup", "1", "--no-history", "--request-timeout", "0.3"])
        assert r.exit_code == 3 and "every warm-up request failed" in r.stderr


def test_usage_errors_exit_64():
    for args in (["ftp://x"], ["http://x:notaport"], ["http://x", "--bogus"], ["http://x", "-c", "0"],
                 ["http://x", "--no-history", "--fail-on-regression"], []):
        r = invoke(bench_command, args)
        assert r.exit_code == 64, (args, r.output)


def test_history_command_corrupt_missing_and_unusable(tmp_path: Path):
    r = invoke(history_command, ["--history", str(tmp_path / "none.sqlite3")])
    assert r.exit_code == 0 and "no history yet" in r.stdout
    bad = tmp_path / "bad.sqlite3"  # not a database at all: refused in one line, and never moved or touched
    bad.write_bytes(b"\x00garbage" * 1000)
    r = invoke(history_command, ["--history", str(bad)])
    assert r.exit_code == 1 and "not a SQLite database" in r.stderr and r.stderr.count("\n") == 1
    assert bad.read_bytes() == b"\x00garbage" * 1000 and not list(tmp_path.glob("bad.sqlite3.corrupt-*"))
    (tmp_path / "file").write_text("x")
    r = invoke(history_command, ["--history", str(tmp_path / "file" / "h.sqlite3"), "--pin", "1"])
    assert r.exit_code == 1 and "cannot open history database" in r.stderr


def test_registered_in_the_cli_group(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture):
    """The real CLI group has both commands, and runs them through its own entry point (exit codes, no
    traceback)."""
    from firstlight import cli as cli_mod

    assert cli_mod.cli.commands.get("bench") is bench_command
    assert cli_mod.cli.commands.get("history") is history_command
    for argv, code in ((["bench", "ftp://x"], 64), (["bench", "http://x", "--bogus"], 64),
                       (["bench", f"http://127.0.0.1:{free_port()}", "--no-history"], 1),
                       (["history", "--history", str(tmp_path / "none.sqlite3")], 0)):
        with pytest.raises(SystemExit) as e:
            cli_mod.main(argv)
        assert e.value.code == code, argv
    assert "Traceback" not in capsys.readouterr().err
