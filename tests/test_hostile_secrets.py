"""Secrets never leak (issue 15, item 7) and redaction does not damage evidence (issue 9, item 8).

The unit tests pin each way a secret was seen to leak; the end-to-end test runs a real server process that
echoes firstlight's Authorization header in a 401 body and prints a token nobody told firstlight about, and
checks every exit: the console, the JSON, the --record file and the history database.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from firstlight.redact import MASK, Redactor, redactor_for
from firstlight.sim.server import free_port
from firstlight.timeline import Level, LogLine, Probe, Started
from tests.support.common import run_firstlight


def test_url_credentials_are_masked_and_learnt():
    r = redactor_for(url="http://alice:pa55word-9@host:8000/v1?api_key=qk-123456&x=1")
    out = r.text("probing http://alice:pa55word-9@host:8000/v1?api_key=qk-123456&x=1")
    assert "pa55word-9" not in out and "qk-123456" not in out
    assert "alice" in out and "host:8000" in out and "x=1" in out
    assert "pa55word-9" not in r.text('{"url": "pa55word-9"}')  # learnt: masked wherever it appears
    fresh = Redactor()  # not learnt: the URL shape alone is enough
    assert fresh.text("GET http://bob:hunter2xyz@h/") == f"GET http://bob:{MASK}@h/"
    assert "tok-98765" not in fresh.text("http://h/x?token=tok-98765")


def test_a_key_inside_a_shell_string_is_learnt():
    argv = ["bash", "-c", "exec python -m sglang.launch_server --model m --api-key shellkey-42 --port 8"]
    r = redactor_for(argv)
    shown = " ".join(r.argv(argv))
    assert "shellkey-42" not in shown and "--port 8" in shown
    assert "shellkey-42" not in r.text("server_args: api key shellkey-42")


def test_plural_multi_value_secret_options():
    argv = ["lmdeploy", "serve", "api_server", "m", "--api-keys", "key-one-1", "key-two-2", "--server-port", "23333"]
    r = redactor_for(argv)
    assert r.argv(argv) == ["lmdeploy", "serve", "api_server", "m", "--api-keys", MASK, MASK, "--server-port",
                            "23333"]
    assert "key-two-2" not in r.text("accepted keys: key-one-1, key-two-2")


def test_flag_values_in_log_lines_are_masked_when_not_known():
    r = Redactor()
    out = r.text("worker cmd: python w.py --hf-token cfgtoken777 --admin-password=pw-from-file --max-tokens 16")
    assert "cfgtoken777" not in out and "pw-from-file" not in out
    assert "--max-tokens 16" in out


def test_code_in_a_traceback_is_not_a_secret():
    r = Redactor()
    for line in ("    items.sort(key=lambda x: x[0])", "    sorted(xs, key=len)", "    best = max(d, key=d.get)",
                 "    sorted(rows, key=operator.itemgetter(1))", "    api_key=None,"):
        assert r.text(line) == line
    assert r.text("key=Zx81abcdEF") == f"key={MASK}"
    assert r.text("api_key='s3cr3t-value'") == f"api_key='{MASK}'"


def test_observations_and_summaries_are_redacted_whole():
    r = redactor_for(api_key="sk-own-key-0123456789")
    probe = Probe(1.0, Level.GENERATION, False, detail='POST /v1/completions -> 401 {"error": "bad header '
                                                       'Authorization: Bearer sk-own-key-0123456789"}')
    assert "sk-own-key" not in r.observation(probe).detail
    assert r.observation(LogLine(1.0, "api_key=abc12345")).text == f"api_key={MASK}"
    started = Started(1.0, url="http://u:pw-9999@h:1")
    assert "pw-9999" not in (r.observation(started).url or "")
    summary = {"url": "http://u:pw-9999@h:1", "evidence": [{"value": "Bearer sk-own-key-0123456789"}],
               "api_key": "plain", "n": 3}
    red = r.data(summary)
    assert "pw-9999" not in str(red) and "sk-own-key" not in str(red) and red["api_key"] == MASK and red["n"] == 3


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
