"""Secrets never leak (issue 15, item 7) and redaction does not damage evidence (issue 9, item 8).

The unit tests pin each way a secret was seen to leak; the end-to-end test runs a real server process that
echoes firstlight's Authorization header in a 401 body and prints a token nobody told firstlight about, and
checks every exit: the console, the JSON, the --record file and the history database.

The process-starting tests of this subject; the others: ``tests/unit/redact/test_redact.py``.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from firstlight.sim.fixtures import free_port
from tests.support.common import run_firstlight

ECHO_SERVER = r"""
import http.server, sys
port = int(sys.argv[1])
print("loading; worker args: --hf-token cfgtoken777abc --port", port, flush=True)
class H(http.server.BaseHTTPRequestHandler):
    def _deny(self):
        body = ("unauthorized: got " + str(self.headers.get("Authorization"))).encode()
        self.send_response(401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = _deny
    def log_message(self, *a):
        print("request", self.headers.get("Authorization"), flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_no_secret_reaches_any_exit_of_a_real_run(tmp_path: Path):
    port = free_port()
    script = tmp_path / "echo_server.py"
    script.write_text(ECHO_SERVER)
    record = tmp_path / "run.jsonl"
    history = tmp_path / "history.sqlite3"
    secrets = ["sk-own-key-0123456789", "urlpass-4242", "shellkey-4242", "cfgtoken777abc"]
    r = run_firstlight("up", "--json", "--timeout", "4", "--grace", "2", "--record", str(record),
                       "--history", str(history), "--api-key", secrets[0], "--poll-min", "0.05",
                       "--url", f"http://user:{secrets[1]}@127.0.0.1:{port}", "--",
                       "bash", "-c", f"exec {sys.executable} {script} {port} --api-key {secrets[2]}")
    assert r.summary["verdict"] in ("failed", "timeout"), r.stderr[-2000:]
    assert "unauthorized" in r.stdout + r.stderr  # the 401 body is there as evidence, masked
    exits = {"stdout": r.stdout, "stderr": r.stderr, "record": record.read_text()}
    with sqlite3.connect(history) as con:
        exits["history"] = "\n".join(str(row) for row in con.execute("SELECT * FROM runs"))
    for where, text in exits.items():
        for secret in secrets:
            assert secret not in text, f"{secret} leaked into {where}"
